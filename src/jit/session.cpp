// Session: an LLJIT whose main JITDylib holds one object file, linked against the process
// (memset, memcpy and the like resolve there).
#include "jit/session.h"

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <utility>

#include "host/data.h"
#include "jit/compile.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/Object/ELFObjectFile.h"
#include "llvm/Object/ObjectFile.h"
#include "llvm/Support/MemoryBuffer.h"

namespace kiln::jit {
namespace {

llvm::Error error(const std::string& message) {
  return llvm::make_error<llvm::StringError>(message, llvm::inconvertibleErrorCode());
}

// KILN_PERF_MAP=1: appends the object's functions, at the addresses they were linked to, to
// /tmp/perf-PID.map, where `perf report` looks for the symbols of JIT code (the program
// functions are local symbols, which the JIT does not resolve: their addresses are the linked
// kiln_launch's plus their offset from it in the object's one code section). A developer's
// aid: a malformed map or an unwritable file is silently skipped.
void writePerfMap(const std::string& object_bytes, const void* launch) {
  const char* on = std::getenv("KILN_PERF_MAP");
  if (!on || !*on || std::strcmp(on, "0") == 0) return;
  auto obj = llvm::object::ObjectFile::createObjectFile(llvm::MemoryBufferRef(object_bytes, "kiln-kernel.o"));
  if (!obj) return llvm::consumeError(obj.takeError());
  auto* elf = llvm::dyn_cast<llvm::object::ELFObjectFileBase>(obj->get());
  if (!elf) return;
  struct Fn {
    std::string name;
    uint64_t offset, size;
    llvm::object::section_iterator section;
  };
  std::vector<Fn> fns;
  const Fn* anchor = nullptr;
  for (const llvm::object::ELFSymbolRef& s : elf->symbols()) {
    auto type = s.getType();
    auto name = s.getName();
    auto address = s.getAddress();
    auto section = s.getSection();
    if (!type || !name || !address || !section) {
      llvm::consumeError(type.takeError()), llvm::consumeError(name.takeError());
      llvm::consumeError(address.takeError()), llvm::consumeError(section.takeError());
      continue;
    }
    if (*type == llvm::object::SymbolRef::ST_Function) fns.push_back({name->str(), *address, s.getSize(), *section});
  }
  for (const Fn& f : fns)
    if (f.name == runtime::kLaunchSymbol) anchor = &f;
  if (!anchor) return;
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  FILE* map = std::fopen(("/tmp/perf-" + std::to_string(getpid()) + ".map").c_str(), "a");
  if (!map) return;
  const auto base = reinterpret_cast<uintptr_t>(launch) - anchor->offset;
  for (const Fn& f : fns)
    if (f.section == anchor->section && f.size > 0)
      std::fprintf(map, "%lx %lx %s\n", static_cast<unsigned long>(base + f.offset), static_cast<unsigned long>(f.size),
                   f.name.c_str());
  std::fclose(map);
}

}  // namespace

Session::Session() = default;
Session::~Session() = default;

llvm::Expected<std::unique_ptr<Session>> Session::load(std::string object_bytes, const std::string& isa) {
  if (std::optional<std::string> why = cannotRunHere(isa)) return error(*why);
  initializeNativeTarget();
  std::unique_ptr<Session> session(new Session());
  session->object_sha256_ = host::sha256Hex(object_bytes.data(), object_bytes.size());

  auto jit = llvm::orc::LLJITBuilder().create();
  if (!jit) return error("cannot create an ORC JIT for the host: " + llvm::toString(jit.takeError()));
  session->jit_ = std::move(*jit);
  if (llvm::Error e = session->jit_->addObjectFile(llvm::MemoryBuffer::getMemBufferCopy(object_bytes, "kiln-kernel.o")))
    return error("cannot add the kernel object: " + llvm::toString(std::move(e)));

  // The first lookup links the object; every ABI symbol must be there.
  auto resolve = [&](const char* name) -> llvm::Expected<void*> {
    auto address = session->jit_->lookup(name);
    if (!address)
      return error(std::string("kernel object: cannot resolve '") + name + "': " + llvm::toString(address.takeError()));
    return address->toPtr<void*>();
  };
  auto version = resolve(runtime::kAbiVersionSymbol);
  if (!version) return version.takeError();
  int64_t abi_version = 0;
  std::memcpy(&abi_version, *version, sizeof abi_version);
  if (abi_version != runtime::kKilnAbiVersion)
    return error("kernel object has ABI version " + std::to_string(abi_version) + ", this runtime expects " +
                 std::to_string(runtime::kKilnAbiVersion));
  auto blocks = resolve(runtime::kBlocksSymbol);
  if (!blocks) return blocks.takeError();
  auto launch = resolve(runtime::kLaunchSymbol);
  if (!launch) return launch.takeError();
  auto num_blocks = resolve(runtime::kNumBlocksSymbol);
  if (!num_blocks) return num_blocks.takeError();
  session->blocks_ = reinterpret_cast<runtime::BlocksFn>(*blocks);
  session->launch_ = reinterpret_cast<runtime::LaunchFn>(*launch);
  writePerfMap(object_bytes, *launch);
  std::memcpy(&session->num_blocks_, *num_blocks, sizeof session->num_blocks_);
  if (session->num_blocks_ < 0)
    return error("kernel object has kiln_num_blocks = " + std::to_string(session->num_blocks_));
  // Phases (optional: an object without them has one phase of every block).
  session->phase_ends_ = {session->num_blocks_};
  void* numPhases = session->lookup(runtime::kNumPhasesSymbol);
  void* phaseEnds = session->lookup(runtime::kPhaseEndsSymbol);
  if (numPhases && phaseEnds) {
    int64_t n = 0;
    std::memcpy(&n, numPhases, sizeof n);
    if (n < 1 || n > 1024) return error("kernel object has kiln_num_phases = " + std::to_string(n));
    session->phase_ends_.assign(static_cast<size_t>(n), 0);
    std::memcpy(session->phase_ends_.data(), phaseEnds, sizeof(int64_t) * static_cast<size_t>(n));
    int64_t prev = 0;
    for (int64_t e : session->phase_ends_) {
      if (e < prev) return error("kernel object has decreasing kiln_phase_ends");
      prev = e;
    }
    if (prev != session->num_blocks_) return error("kernel object: the last phase does not end at kiln_num_blocks");
  }
  auto phaseBlocks = resolve(runtime::kPhaseBlocksSymbol);
  if (!phaseBlocks) return phaseBlocks.takeError();
  session->phase_blocks_ = reinterpret_cast<runtime::PhaseBlocksFn>(*phaseBlocks);
  return session;
}

void* Session::lookup(const char* name) {
  auto address = jit_->lookup(name);
  if (!address) {
    llvm::consumeError(address.takeError());
    return nullptr;
  }
  return address->toPtr<void*>();
}

runtime::KernelEntry kernelEntry(std::shared_ptr<Session> session) {
  runtime::KernelEntry entry;
  entry.blocks = session->blocks();
  entry.launch = session->launch();
  entry.num_blocks = session->numBlocks();
  entry.phase_ends = session->phaseEnds();
  entry.phase_blocks = session->phaseBlocks();
  entry.owner = std::move(session);
  return entry;
}

}  // namespace kiln::jit
