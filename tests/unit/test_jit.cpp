// JIT: compile a hand-written ABI module at O2, load the object bytes into a Session and run
// them; capture the object to a file and run it in a fresh process that compiles nothing;
// precise vs fast-math code generation.
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <vector>

#include "host/isa.h"
#include "jit/compile.h"
#include "jit/object_file.h"
#include "jit/session.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/IRReader/IRReader.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "runtime/runtime.h"

extern char** environ;

namespace kiln::jit {
namespace {

// y[p] = x[p] * 2 for 100 programs, 8 programs per block: 13 blocks, the last one masked.
constexpr int64_t kPrograms = 100;
constexpr int64_t kBlocks = 13;
const char* kDoubleIR = R"(
@kiln_num_blocks = constant i64 13
@kiln_abi_version = constant i64 2

define void @kiln_phase_blocks(ptr %params, ptr %blocks) {
  store i64 13, ptr %blocks
  ret void
}

define void @kiln_blocks(ptr %params, i64 %begin, i64 %end, ptr %record) {
entry:
  %x = load ptr, ptr %params
  %yslot = getelementptr ptr, ptr %params, i64 1
  %y = load ptr, ptr %yslot
  br label %block
block:
  %b = phi i64 [ %begin, %entry ], [ %b.next, %count ]
  %more = icmp slt i64 %b, %end
  br i1 %more, label %body, label %exit
body:
  %first = mul i64 %b, 8
  %stop.full = add i64 %first, 8
  %full = icmp sle i64 %stop.full, 100
  %stop = select i1 %full, i64 %stop.full, i64 100
  br label %program
program:
  %p = phi i64 [ %first, %body ], [ %p.next, %program ]
  %xa = getelementptr float, ptr %x, i64 %p
  %xv = load float, ptr %xa
  %yv = fmul float %xv, 2.0
  %ya = getelementptr float, ptr %y, i64 %p
  store float %yv, ptr %ya
  %p.next = add i64 %p, 1
  %again = icmp slt i64 %p.next, %stop
  br i1 %again, label %program, label %count
count:
  %field = select i1 %full, i64 0, i64 1
  %ra = getelementptr i64, ptr %record, i64 %field
  %rv = load i64, ptr %ra
  %rn = add i64 %rv, 1
  store i64 %rn, ptr %ra
  %b.next = add i64 %b, 1
  br label %block
exit:
  ret void
}

define void @kiln_launch(ptr %params, ptr %record) {
  store i64 0, ptr %record
  %masked = getelementptr i64, ptr %record, i64 1
  store i64 0, ptr %masked
  %n = load i64, ptr @kiln_num_blocks
  call void @kiln_blocks(ptr %params, i64 0, i64 %n, ptr %record)
  ret void
}
)";

// out[i] = a[i] * b[i] + c[i] for 16 elements, as separate fmul and fadd: one block.
const char* kMulAddIR = R"(
@kiln_num_blocks = constant i64 1
@kiln_abi_version = constant i64 2

define void @kiln_phase_blocks(ptr %params, ptr %blocks) {
  store i64 1, ptr %blocks
  ret void
}

define void @kiln_blocks(ptr %params, i64 %begin, i64 %end, ptr %record) {
entry:
  %a = load ptr, ptr %params
  %bs = getelementptr ptr, ptr %params, i64 1
  %b = load ptr, ptr %bs
  %cs = getelementptr ptr, ptr %params, i64 2
  %c = load ptr, ptr %cs
  %os = getelementptr ptr, ptr %params, i64 3
  %o = load ptr, ptr %os
  %run = icmp slt i64 %begin, %end
  br i1 %run, label %loop, label %exit
loop:
  %i = phi i64 [ 0, %entry ], [ %i.next, %loop ]
  %pa = getelementptr float, ptr %a, i64 %i
  %va = load float, ptr %pa
  %pb = getelementptr float, ptr %b, i64 %i
  %vb = load float, ptr %pb
  %pc = getelementptr float, ptr %c, i64 %i
  %vc = load float, ptr %pc
  %m = fmul float %va, %vb
  %s = fadd float %m, %vc
  %po = getelementptr float, ptr %o, i64 %i
  store float %s, ptr %po
  %i.next = add i64 %i, 1
  %again = icmp slt i64 %i.next, 16
  br i1 %again, label %loop, label %exit
exit:
  ret void
}

define void @kiln_launch(ptr %params, ptr %record) {
  call void @kiln_blocks(ptr %params, i64 0, i64 1, ptr %record)
  ret void
}
)";

std::unique_ptr<llvm::Module> parse(const char* text, llvm::LLVMContext& context) {
  llvm::SMDiagnostic diagnostic;
  auto module = llvm::parseIR(llvm::MemoryBufferRef(text, "test.ll"), diagnostic, context);
  if (!module) ADD_FAILURE() << diagnostic.getMessage().str() << " at line " << diagnostic.getLineNo();
  return module;
}

CompiledObject compile(const char* text, JitOptions options = {}) {
  llvm::LLVMContext context;
  auto compiled = compileToObject(parse(text, context), options);
  if (!compiled) {
    ADD_FAILURE() << llvm::toString(compiled.takeError());
    return {};
  }
  return std::move(*compiled);
}

std::unique_ptr<Session> load(std::string bytes, const std::string& isa = "native") {
  auto session = Session::load(std::move(bytes), isa);
  if (!session) {
    ADD_FAILURE() << llvm::toString(session.takeError());
    return nullptr;
  }
  return std::move(*session);
}

std::vector<float> doubleInputs() {
  std::vector<float> x(kPrograms);
  for (int64_t i = 0; i < kPrograms; ++i) x[i] = 0.5f * static_cast<float>(i) - 7.25f;
  return x;
}

void expectDoubled(const std::vector<float>& x, const std::vector<float>& y) {
  ASSERT_EQ(x.size(), y.size());
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(y[i], x[i] * 2.0f) << "at " << i;
}

std::vector<runtime::ParamSpec> doubleParams() {
  return {runtime::ParamSpec::view("x", {kPrograms}), runtime::ParamSpec::view("y", {kPrograms})};
}

TEST(Jit, HostTargetIsDetected) {
  const HostTarget& host = hostTarget();
  EXPECT_FALSE(host.cpu.empty());
  EXPECT_NE(host.triple.find("x86_64"), std::string::npos) << host.triple;
  if (kiln::host::cpuHasAvx512()) {
    EXPECT_NE(host.features.find("+avx512f"), std::string::npos);
  }
  // KILN_HOST_WITHOUT_AVX512: `native` compiles without any AVX-512 feature.
  if (kiln::host::pretendingNoAvx512()) {
    EXPECT_EQ(host.features.find("+avx512"), std::string::npos) << host.features;
  }
  EXPECT_EQ(host.llvm_version.substr(0, 3), "22.");
}

// Compiling needs no CPU: isa=avx512 and isa=avx2 objects are made on any host; loading one
// that this host cannot run is refused, naming the ISA and the CPU (also under
// KILN_HOST_WITHOUT_AVX512, which `make test` sets for a second run of this suite).
TEST(Jit, EveryIsaCompilesAnywhereAndLoadsOnlyWhereItRuns) {
  for (const char* isa : {"avx2", "avx512", "native"}) {
    JitOptions options;
    options.isa = isa;
    CompiledObject compiled = compile(kDoubleIR, options);
    ASSERT_EQ(compiled.object_bytes.substr(0, 4),
              "\x7f"
              "ELF")
        << isa;
    auto session = Session::load(compiled.object_bytes, isa);
    const std::optional<std::string> why = cannotRunHere(isa);
    ASSERT_EQ(static_cast<bool>(session), !why) << isa;
    if (why) {
      const std::string message = llvm::toString(session.takeError());
      EXPECT_EQ(message, *why);
      EXPECT_NE(message.find(std::string("isa=") + isa), std::string::npos) << message;
      EXPECT_NE(message.find(hostTarget().cpu), std::string::npos) << message;
    }
  }
  EXPECT_EQ(cannotRunHere("avx512").has_value(), !kiln::host::cpuHasAvx512());
  EXPECT_FALSE(cannotRunHere("native").has_value());
  EXPECT_TRUE(cannotRunHere("sse2").has_value());
}

// KILN_PERF_MAP=1: the functions of a loaded object in /tmp/perf-PID.map at their linked
// addresses (kiln_blocks placed from its offset to kiln_launch in the object).
TEST(Jit, PerfMapNamesTheLinkedFunctions) {
  const std::string path = "/tmp/perf-" + std::to_string(getpid()) + ".map";
  std::remove(path.c_str());
  setenv("KILN_PERF_MAP", "1", 1);
  auto session = load(compile(kDoubleIR).object_bytes);
  unsetenv("KILN_PERF_MAP");
  ASSERT_TRUE(session);
  std::ifstream in(path);
  std::map<std::string, uint64_t> at;
  std::string address, size, name;
  while (in >> address >> size >> name) at[name] = std::stoull(address, nullptr, 16);
  std::remove(path.c_str());
  ASSERT_TRUE(at.count("kiln_blocks") && at.count("kiln_launch")) << at.size() << " functions in the map";
  EXPECT_EQ(at["kiln_blocks"], reinterpret_cast<uintptr_t>(session->blocks()));
  EXPECT_EQ(at["kiln_launch"], reinterpret_cast<uintptr_t>(session->launch()));
}

TEST(Jit, CompileLoadAndRunThroughTheRuntime) {
  CompiledObject compiled = compile(kDoubleIR);
  EXPECT_GT(compiled.instructions_pre_opt, 0);
  EXPECT_GT(compiled.instructions_post_opt, 0);
  EXPECT_GT(compiled.basic_blocks_post_opt, 0);
  EXPECT_GT(compiled.compile_ms, 0.0);
  ASSERT_GE(compiled.object_bytes.size(), 4u);
  EXPECT_EQ(compiled.object_bytes.substr(0, 4),
            "\x7f"
            "ELF");
  EXPECT_EQ(compiled.object_sha256.size(), 64u);

  std::shared_ptr<Session> session = load(compiled.object_bytes);
  ASSERT_TRUE(session);
  EXPECT_EQ(session->numBlocks(), kBlocks);
  EXPECT_EQ(session->objectSha256(), compiled.object_sha256);
  EXPECT_NE(session->lookup("kiln_blocks"), nullptr);
  EXPECT_EQ(session->lookup("no_such_symbol"), nullptr);

  const std::vector<float> x = doubleInputs();
  for (int threads : {1, 2}) {
    runtime::LoadedKernel kernel(kernelEntry(session), doubleParams(), threads);
    std::vector<float> y(kPrograms, -1.0f);
    runtime::KilnLaunchRecord record;
    ASSERT_FALSE(
        kernel.launch(std::vector<runtime::Arg>{runtime::Arg::view(const_cast<float*>(x.data()), kPrograms * 4),
                                                runtime::Arg::view(y)},
                      &record));
    expectDoubled(x, y);
    EXPECT_EQ(record.packets_full, kBlocks - 1);
    EXPECT_EQ(record.packets_masked, 1);
  }

  // kiln_launch resets the record, then runs every block on this thread.
  std::vector<float> y(kPrograms);
  void* params[] = {const_cast<float*>(x.data()), y.data()};
  runtime::KilnLaunchRecord record{1000, 1000};
  session->launch()(params, &record);
  expectDoubled(x, y);
  EXPECT_EQ(record.packets_full, kBlocks - 1);
  EXPECT_EQ(record.packets_masked, 1);
}

TEST(Jit, KernelOutlivesTheCallersSessionPointer) {
  runtime::LoadedKernel kernel(kernelEntry(load(compile(kDoubleIR).object_bytes)), doubleParams());
  std::vector<float> x = doubleInputs(), y(kPrograms);
  ASSERT_FALSE(kernel.launch(std::vector<runtime::Arg>{runtime::Arg::view(x), runtime::Arg::view(y)}));
  expectDoubled(x, y);
}

std::string tempPath(const char* name) {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/kiln-test-jit-" + std::to_string(getpid()) + "-" + name;
}

// Runs this test binary again with only JitReplayChild selected; returns its exit status.
int runChild(const std::string& object_path, const std::string& out_path, const std::string& sha256) {
  setenv("KILN_REPLAY_OBJECT", object_path.c_str(), 1);
  setenv("KILN_REPLAY_OUT", out_path.c_str(), 1);
  setenv("KILN_REPLAY_SHA256", sha256.c_str(), 1);
  std::string self = "/proc/self/exe";
  std::string filter = "--gtest_filter=JitReplayChild.RunsCapturedObject";
  char* argv[] = {self.data(), filter.data(), nullptr};
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, self.c_str(), nullptr, nullptr, argv, environ);
  unsetenv("KILN_REPLAY_OBJECT");
  unsetenv("KILN_REPLAY_OUT");
  unsetenv("KILN_REPLAY_SHA256");
  if (spawned != 0) return -1;
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(Jit, CapturedObjectRunsInAFreshProcess) {
  CompiledObject compiled = compile(kDoubleIR);
  const std::string object_path = tempPath("double.o"), out_path = tempPath("y.bin");
  ASSERT_EQ(writeFile(object_path, compiled.object_bytes), std::nullopt);
  std::string back;
  ASSERT_EQ(readFile(object_path, back), std::nullopt);
  EXPECT_EQ(back, compiled.object_bytes);

  EXPECT_EQ(runChild(object_path, out_path, compiled.object_sha256), 0);
  std::string out;
  ASSERT_EQ(readFile(out_path, out), std::nullopt) << "the child wrote no output";
  ASSERT_EQ(out.size(), kPrograms * sizeof(float));
  std::vector<float> y(kPrograms);
  std::memcpy(y.data(), out.data(), out.size());
  expectDoubled(doubleInputs(), y);
  std::remove(object_path.c_str());
  std::remove(out_path.c_str());
}

// The child half of CapturedObjectRunsInAFreshProcess; skipped unless that test spawned it.
TEST(JitReplayChild, RunsCapturedObject) {
  const char* object_path = std::getenv("KILN_REPLAY_OBJECT");
  if (!object_path) GTEST_SKIP() << "run by Jit.CapturedObjectRunsInAFreshProcess";
  std::string bytes;
  ASSERT_EQ(readFile(object_path, bytes), std::nullopt);
  std::shared_ptr<Session> session = load(bytes);
  ASSERT_TRUE(session);
  EXPECT_EQ(session->objectSha256(), std::getenv("KILN_REPLAY_SHA256"));
  runtime::LoadedKernel kernel(kernelEntry(session), doubleParams(), 2);
  std::vector<float> x = doubleInputs(), y(kPrograms);
  ASSERT_FALSE(kernel.launch(std::vector<runtime::Arg>{runtime::Arg::view(x), runtime::Arg::view(y)}));
  EXPECT_EQ(compilationsInThisProcess(), 0);
  ASSERT_EQ(writeFile(std::getenv("KILN_REPLAY_OUT"), std::string(reinterpret_cast<char*>(y.data()), y.size() * 4)),
            std::nullopt);
}

// (1 + 2^-23) * (1 - 2^-23) - 1: the rounded product is exactly 1, so precise code gives 0;
// a fused multiply-add keeps the product exact and gives -2^-46.
float mulAdd(const JitOptions& options) {
  std::shared_ptr<Session> session = load(compile(kMulAddIR, options).object_bytes);
  if (!session) return NAN;
  std::vector<float> a(16, 1.0f + 0x1p-23f), b(16, 1.0f - 0x1p-23f), c(16, -1.0f), out(16, 123.0f);
  runtime::LoadedKernel kernel(kernelEntry(session),
                               {runtime::ParamSpec::view("a", {16}), runtime::ParamSpec::view("b", {16}),
                                runtime::ParamSpec::view("c", {16}), runtime::ParamSpec::view("out", {16})});
  auto error = kernel.launch(std::vector<runtime::Arg>{runtime::Arg::view(a), runtime::Arg::view(b),
                                                       runtime::Arg::view(c), runtime::Arg::view(out)});
  EXPECT_FALSE(error);
  for (float v : out) EXPECT_EQ(v, out[0]);
  return out[0];
}

TEST(Jit, AssemblyOnRequestMatchesTheObject) {
  EXPECT_TRUE(compile(kMulAddIR).assembly.empty());
  CompiledObject precise = compile(kMulAddIR, {.emit_assembly = true});
  CompiledObject fast = compile(kMulAddIR, {.fast_math = true, .emit_assembly = true});
  EXPECT_NE(precise.assembly.find("kiln_blocks:"), std::string::npos) << precise.assembly;
  EXPECT_EQ(precise.object_bytes, compile(kMulAddIR).object_bytes);  // asking for text changes nothing
  if (__builtin_cpu_supports("fma")) {
    EXPECT_EQ(precise.assembly.find("vfmadd"), std::string::npos) << precise.assembly;
    EXPECT_NE(fast.assembly.find("vfmadd"), std::string::npos) << fast.assembly;
  }
}

TEST(Jit, PreciseModeDoesNotContract) {
  EXPECT_EQ(mulAdd({.fast_math = false}), 0.0f);
}

TEST(Jit, FastMathContractsIntoFma) {
  if (!__builtin_cpu_supports("fma")) GTEST_SKIP() << "host has no FMA";
  EXPECT_EQ(mulAdd({.fast_math = true}), -0x1p-46f);
}

TEST(JitErrors, InvalidModuleIsAnError) {
  llvm::LLVMContext context;
  auto module = parse(kDoubleIR, context);
  ASSERT_TRUE(module);
  // A block without a terminator.
  llvm::BasicBlock::Create(context, "dangling", module->getFunction("kiln_launch"));
  auto compiled = compileToObject(std::move(module), {});
  ASSERT_FALSE(compiled);
  EXPECT_NE(llvm::toString(compiled.takeError()).find("invalid LLVM module"), std::string::npos);
}

TEST(JitErrors, GarbageObjectIsAnError) {
  auto session = Session::load("this is not an object file", "native");
  ASSERT_FALSE(session);
  EXPECT_FALSE(llvm::toString(session.takeError()).empty());
}

TEST(JitErrors, MissingAbiSymbolIsNamed) {
  const char* no_launch = R"(
@kiln_num_blocks = constant i64 1
@kiln_abi_version = constant i64 2
define void @kiln_blocks(ptr %params, i64 %begin, i64 %end, ptr %record) {
  ret void
}
)";
  auto session = Session::load(compile(no_launch).object_bytes, "native");
  ASSERT_FALSE(session);
  const std::string message = llvm::toString(session.takeError());
  EXPECT_NE(message.find("'kiln_launch'"), std::string::npos) << message;
}

TEST(JitErrors, WrongAbiVersionIsAnError) {
  std::string ir = kDoubleIR;
  ir.replace(ir.find("@kiln_abi_version = constant i64 2"), 34, "@kiln_abi_version = constant i64 7");
  auto session = Session::load(compile(ir.c_str()).object_bytes, "native");
  ASSERT_FALSE(session);
  const std::string message = llvm::toString(session.takeError());
  EXPECT_NE(message.find("ABI version 7"), std::string::npos) << message;
}

TEST(JitErrors, ReadFileNamesPathAndReason) {
  std::string bytes;
  auto error = readFile("/nonexistent/kiln.o", bytes);
  ASSERT_TRUE(error);
  EXPECT_NE(error->find("'/nonexistent/kiln.o'"), std::string::npos) << *error;
  EXPECT_NE(error->find("No such file"), std::string::npos) << *error;
  error = writeFile("/nonexistent/kiln.o", "x");
  ASSERT_TRUE(error);
  EXPECT_NE(error->find("cannot write"), std::string::npos) << *error;
}

TEST(ObjectCache, KeyHashCoversEveryField) {
  ObjectCacheKey key{"ir", "knobs", "cpu", "22.1.8"};
  const std::string h = key.hash();
  EXPECT_EQ(h.size(), 64u);
  for (std::string ObjectCacheKey::*field :
       {&ObjectCacheKey::ir_text, &ObjectCacheKey::knobs, &ObjectCacheKey::cpu, &ObjectCacheKey::llvm_version}) {
    ObjectCacheKey changed = key;
    changed.*field += "x";
    EXPECT_NE(changed.hash(), h);
  }
  // Length prefixes: moving a character between fields changes the key.
  EXPECT_NE((ObjectCacheKey{"irk", "nobs", "cpu", "22.1.8"}).hash(), h);
  NoObjectCache none;
  none.put(h, "bytes");
  EXPECT_EQ(none.get(h), std::nullopt);
}

}  // namespace
}  // namespace kiln::jit
