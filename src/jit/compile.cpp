// Host target detection, the O2 pipeline and object emission.
#include "jit/compile.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "host/data.h"
#include "host/isa.h"
#include "llvm/Analysis/CGSCCPassManager.h"
#include "llvm/Analysis/LoopAnalysisManager.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/PassManager.h"
#include "llvm/IR/Verifier.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/CodeGen.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/SubtargetFeature.h"
#include "llvm/TargetParser/Triple.h"
#include "llvm/Transforms/Utils/Cloning.h"

namespace kiln::jit {
namespace {

std::atomic<int64_t> compilations{0};

llvm::Error error(const std::string& message) {
  return llvm::make_error<llvm::StringError>(message, llvm::inconvertibleErrorCode());
}

llvm::TargetOptions targetOptions(const JitOptions& options) {
  llvm::TargetOptions t;
  // Fast math permits FMA contraction (and, through instruction flags set by the lowering,
  // reassociation); it never assumes away infinities or NaNs: kernels mask with -inf.
  t.AllowFPOpFusion = options.fast_math ? llvm::FPOpFusion::Fast : llvm::FPOpFusion::Strict;
  return t;
}

// The optimisation pipeline's work grows faster than the code it is given: on one function of
// 63 000 instructions in 814 blocks (a fuzz program whose tiles unroll into 268 loops) LLVM 22's
// LICM spends minutes updating MemorySSA, where O2 of every library kernel takes well under a
// second (the largest, decode attention: 20 800 instructions x 71 blocks). Past this many
// instructions x blocks in one function, the module gets a pipeline without loop passes (scalar
// replacement, CSE, instruction combining, GVN, CFG simplification): every pass preserves the
// IR's semantics, so precise-mode bits are the same; only speed can differ, and such programs
// are far larger than anything the library emits (the report names the pipeline).
constexpr int64_t kReducedPipelineWork = int64_t{8} << 20;
constexpr const char* kReducedPipeline =
    "function(sroa,early-cse<memssa>,instcombine,simplifycfg,gvn,instcombine,simplifycfg)";

// The largest instructions x blocks of one defined function.
int64_t functionWork(const llvm::Module& module) {
  int64_t most = 0;
  for (const llvm::Function& f : module) {
    if (f.isDeclaration()) continue;
    most = std::max(most, static_cast<int64_t>(f.getInstructionCount()) * static_cast<int64_t>(f.size()));
  }
  return most;
}

void optimizeReduced(llvm::Module& module, llvm::TargetMachine& machine) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder builder(&machine);
  builder.registerModuleAnalyses(mam);
  builder.registerCGSCCAnalyses(cgam);
  builder.registerFunctionAnalyses(fam);
  builder.registerLoopAnalyses(lam);
  builder.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager mpm;
  if (llvm::Error e = builder.parsePassPipeline(mpm, kReducedPipeline)) llvm::report_fatal_error(std::move(e));
  mpm.run(module, mam);
}

void optimizeO2(llvm::Module& module, llvm::TargetMachine& machine) {
  llvm::PipelineTuningOptions tuning;
  tuning.LoopVectorization = true;
  tuning.SLPVectorization = true;
  tuning.LoopInterleaving = true;
  tuning.LoopUnrolling = true;
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder builder(&machine, tuning);
  builder.registerModuleAnalyses(mam);
  builder.registerCGSCCAnalyses(cgam);
  builder.registerFunctionAnalyses(fam);
  builder.registerLoopAnalyses(lam);
  builder.crossRegisterProxies(lam, fam, cgam, mam);
  builder.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O2).run(module, mam);
}

llvm::Expected<std::string> emit(llvm::Module& module, llvm::TargetMachine& machine, llvm::CodeGenFileType type) {
  llvm::SmallVector<char, 0> buffer;
  llvm::raw_svector_ostream stream(buffer);
  llvm::legacy::PassManager codegen;
  if (machine.addPassesToEmitFile(codegen, stream, nullptr, type))
    return error("target '" + machine.getTargetTriple().str() + "' cannot emit " +
                 (type == llvm::CodeGenFileType::ObjectFile ? "an object file" : "assembly"));
  codegen.run(module);
  return std::string(buffer.begin(), buffer.end());
}

// A masked store of narrow integers (a 16-bit view's bits) whose mask became a constant with
// one lane set is made a plain store of that element. LLVM 22's x86 backend turns such a
// store into a scalar store of the lane's 32-bit source (`vextractps $1, %xmm0, 2(%rdi)`:
// four bytes for a two-byte element), writing past the element; found by `kiln fuzz`
// (a ragged tile's last column of a bf16 view), kept by tests/ir/half_single_lane_store.tile.
void storeSingleNarrowLanes(llvm::Module& module) {
  std::vector<llvm::IntrinsicInst*> calls;
  for (llvm::Function& f : module)
    for (llvm::BasicBlock& bb : f)
      for (llvm::Instruction& i : bb)
        if (auto* c = llvm::dyn_cast<llvm::IntrinsicInst>(&i);
            c && c->getIntrinsicID() == llvm::Intrinsic::masked_store)
          calls.push_back(c);
  for (llvm::IntrinsicInst* c : calls) {
    llvm::Value* value = c->getArgOperand(0);
    auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(value->getType());
    auto* mask = llvm::dyn_cast<llvm::Constant>(c->getArgOperand(2));
    if (!vt || !mask || !vt->getElementType()->isIntegerTy() || vt->getElementType()->getIntegerBitWidth() >= 32)
      continue;
    int lane = -1, set = 0;
    bool known = true;
    for (unsigned l = 0; l < vt->getNumElements(); ++l) {
      auto* bit = llvm::dyn_cast_or_null<llvm::ConstantInt>(mask->getAggregateElement(l));
      if (!bit)
        known = false;
      else if (bit->isOne())
        lane = static_cast<int>(l), ++set;
    }
    if (!known || set != 1) continue;
    llvm::IRBuilder<> b(c);
    llvm::Value* at = b.CreateGEP(vt->getElementType(), c->getArgOperand(1), b.getInt64(lane));
    b.CreateAlignedStore(b.CreateExtractElement(value, b.getInt64(lane)), at, c->getParamAlign(1).valueOrOne());
    c->eraseFromParent();
  }
}

// Shared by both targets: the module set for `machine`, verified, optimised (O2) and counted.
llvm::Error prepare(llvm::Module& module, llvm::TargetMachine& machine, CompiledObject& out) {
  module.setTargetTriple(machine.getTargetTriple());
  module.setDataLayout(machine.createDataLayout());
  std::string verify_message;
  llvm::raw_string_ostream verify_stream(verify_message);
  if (llvm::verifyModule(module, &verify_stream)) return error("invalid LLVM module: " + verify_message);
  out.instructions_pre_opt = static_cast<int>(module.getInstructionCount());
  const int64_t work = functionWork(module);
  if (work > kReducedPipelineWork) {
    out.pipeline = fmt::format("reduced ({}): a function of {} instructions x blocks > {}", kReducedPipeline, work,
                               kReducedPipelineWork);
    optimizeReduced(module, machine);
  } else {
    optimizeO2(module, machine);
  }
  storeSingleNarrowLanes(module);
  out.instructions_post_opt = static_cast<int>(module.getInstructionCount());
  for (const llvm::Function& f : module) out.basic_blocks_post_opt += static_cast<int>(f.size());
  return llvm::Error::success();
}

}  // namespace

void initializeNativeTarget() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
    // LLVM 22's "X86 Avoid Store Forwarding Blocks" pass aborts the process ("Cannot implicitly
    // convert a scalable size") on 16-lane masked loads and stores split for AVX2 (found by
    // `kiln fuzz --seed 7`, tests/fuzz/avx2_masked_split_sfb.tile). The pass only rewrites
    // copies to avoid a stall; switching it off changes no result.
    const char* args[] = {"kiln", "-x86-disable-avoid-SFB"};
    llvm::cl::ParseCommandLineOptions(2, args, "", nullptr);
  });
}

const HostTarget& hostTarget() {
  static const HostTarget host = [] {
    HostTarget h;
    h.triple = llvm::sys::getProcessTriple();
    h.cpu = llvm::sys::getHostCPUName().str();
    std::vector<std::pair<std::string, bool>> features;
    // KILN_HOST_WITHOUT_AVX512 (host/isa.h): every AVX-512-family feature off, as on a CPU
    // that lacks them; `native` then compiles what such a CPU runs.
    auto avx512Family = [](const std::string& name) {
      for (const char* prefix : {"avx512", "avx10", "evex512", "amx"})
        if (name.rfind(prefix, 0) == 0) return true;
      return false;
    };
    for (const auto& entry : llvm::sys::getHostCPUFeatures()) {
      std::string name = entry.getKey().str();
      const bool off = host::pretendingNoAvx512() && avx512Family(name);
      features.emplace_back(std::move(name), entry.getValue() && !off);
    }
    std::sort(features.begin(), features.end());
    llvm::SubtargetFeatures set;
    for (const auto& [name, enabled] : features) set.AddFeature(name, enabled);
    h.features = set.getString();
    h.llvm_version = LLVM_VERSION_STRING;
    return h;
  }();
  return host;
}

int64_t compilationsInThisProcess() {
  return compilations.load();
}

TargetCpu targetCpu(const std::string& isa) {
  if (isa == "native") return {hostTarget().cpu, hostTarget().features};
  if (isa == "avx2") return {"x86-64-v3", ""};
  if (isa == "avx512") return {"x86-64-v4", ""};
  return {};
}

std::string tuneCpu(const std::string& isa, const std::string& tune_cpu) {
  if (tune_cpu == "host") return hostTarget().cpu;
  if (tune_cpu != "generic") return {};
  if (isa == "avx512" || (isa == "native" && host::cpuHasAvx512())) return targetCpu("avx512").cpu;
  if (isa == "avx2" || (isa == "native" && host::cpuHasAvx2())) return targetCpu("avx2").cpu;
  return isa == "native" ? hostTarget().cpu : std::string();  // an x86-64 below AVX2: its own model
}

std::optional<std::string> cannotRunHere(const std::string& isa) {
  const HostTarget& host = hostTarget();
  const std::string cpu = host.cpu + (host::pretendingNoAvx512() ? ", KILN_HOST_WITHOUT_AVX512 set" : "");
  if (isa == "avx512" && !host::cpuHasAvx512())
    return "isa=avx512: this host's CPU (" + cpu +
           ") has no AVX-512; the object compiles on any host but runs only on a CPU with AVX-512 "
           "(run here with isa=avx2 or isa=native)";
  if (isa == "avx2" && !host::cpuHasAvx2())
    return "isa=avx2: this host's CPU (" + cpu + ") has no AVX2 and FMA; run here with isa=native";
  if (isa != "native" && isa != "avx2" && isa != "avx512")
    return "unknown isa '" + isa + "' (legal: native, avx2, avx512)";
  return std::nullopt;
}

llvm::Expected<CompiledObject> compileToObject(std::unique_ptr<llvm::Module> module, const JitOptions& options) {
  compilations.fetch_add(1);
  initializeNativeTarget();
  const auto start = std::chrono::steady_clock::now();
  const HostTarget& host = hostTarget();

  llvm::Triple triple(host.triple);
  std::string lookup_error;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(triple, lookup_error);
  if (!target) return error("no LLVM target for host triple '" + host.triple + "': " + lookup_error);
  const auto [cpu, features] = targetCpu(options.isa);
  if (cpu.empty()) return error("unknown isa '" + options.isa + "' (legal: native, avx2, avx512)");
  std::unique_ptr<llvm::TargetMachine> machine(
      target->createTargetMachine(triple, cpu, features, targetOptions(options), llvm::Reloc::PIC_,
                                  llvm::CodeModel::Small, llvm::CodeGenOptLevel::Default));
  if (!machine) return error("cannot create a target machine for '" + host.triple + "' cpu '" + host.cpu + "'");

  CompiledObject out;
  out.tune_cpu = tuneCpu(options.isa, options.tune_cpu);
  if (out.tune_cpu.empty()) return error("unknown tune_cpu '" + options.tune_cpu + "' (legal: generic, host)");
  // Scheduling and tuning follow the function attribute; the subtarget's instructions the CPU's.
  for (llvm::Function& f : *module)
    if (!f.isDeclaration()) f.addFnAttr("tune-cpu", out.tune_cpu);
  if (llvm::Error e = prepare(*module, *machine, out)) return std::move(e);

  // Codegen rewrites the IR it runs on, so the assembly comes from a copy taken before it.
  if (options.emit_assembly) {
    std::unique_ptr<llvm::Module> copy = llvm::CloneModule(*module);
    auto text = emit(*copy, *machine, llvm::CodeGenFileType::AssemblyFile);
    if (!text) return text.takeError();
    out.assembly = std::move(*text);
  }
  auto object = emit(*module, *machine, llvm::CodeGenFileType::ObjectFile);
  if (!object) return object.takeError();
  out.object_bytes = std::move(*object);
  out.object_sha256 = host::sha256Hex(out.object_bytes.data(), out.object_bytes.size());
  out.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return out;
}

namespace {

void initializeNvptxTarget() {
  static std::once_flag once;
  std::call_once(once, [] {
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
  });
}

}  // namespace

llvm::Expected<CompiledObject> compileToPtx(std::unique_ptr<llvm::Module> module, const JitOptions& options) {
  compilations.fetch_add(1);
  initializeNvptxTarget();
  const auto start = std::chrono::steady_clock::now();
  llvm::Triple triple(kPtxTriple);
  std::string lookup_error;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(triple, lookup_error);
  if (!target) return error(std::string("no LLVM target for '") + kPtxTriple + "': " + lookup_error);
  std::unique_ptr<llvm::TargetMachine> machine(target->createTargetMachine(
      triple, kPtxArch, "", targetOptions(options), std::nullopt, std::nullopt, llvm::CodeGenOptLevel::Default));
  if (!machine) return error(std::string("cannot create a target machine for '") + kPtxTriple + "' " + kPtxArch);
  CompiledObject out;
  if (llvm::Error e = prepare(*module, *machine, out)) return std::move(e);
  auto text = emit(*module, *machine, llvm::CodeGenFileType::AssemblyFile);
  if (!text) return text.takeError();
  out.object_bytes = std::move(*text);
  if (options.emit_assembly) out.assembly = out.object_bytes;
  out.object_sha256 = host::sha256Hex(out.object_bytes.data(), out.object_bytes.size());
  out.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return out;
}

namespace {

// The integer in `s` after position `at` (digits only), or -1.
int64_t numberAt(const std::string& s, size_t at) {
  size_t end = at;
  while (end < s.size() && s[end] >= '0' && s[end] <= '9') ++end;
  return end == at ? -1 : std::stoll(s.substr(at, end - at));
}

}  // namespace

std::vector<PtxFunction> ptxFunctions(const std::string& ptx) {
  std::vector<PtxFunction> out;
  size_t pos = 0;
  while (pos < ptx.size()) {
    size_t eol = ptx.find('\n', pos);
    if (eol == std::string::npos) eol = ptx.size();
    std::string line = ptx.substr(pos, eol - pos);
    pos = eol + 1;
    const size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos) continue;
    line = line.substr(first);
    for (const char* kind : {".entry ", ".func "}) {
      const size_t k = line.find(kind);
      if (k == std::string::npos || line.rfind("//", k) != std::string::npos) continue;
      size_t n = line.find_first_not_of(' ', k + std::string(kind).size());
      if (n == std::string::npos) continue;
      if (line[n] == '(') {  // `.func (.param ...) name(`: skip the return parameters
        n = line.find(')', n);
        n = n == std::string::npos ? line.size() : line.find_first_not_of(' ', n + 1);
      }
      const size_t end = line.find_first_of("( ;", n);
      if (n == std::string::npos || n >= line.size()) continue;
      out.push_back({line.substr(n, end == std::string::npos ? std::string::npos : end - n),
                     std::string(kind) == ".entry ",
                     {},
                     0,
                     0});
    }
    if (out.empty()) continue;
    PtxFunction& f = out.back();
    if (line.rfind(".reg ", 0) == 0) {  // .reg .f32 %f<41>;  (a single register has no <N>)
      const size_t type = line.find('.', 4), space = line.find(' ', type);
      const size_t lt = line.find('<');
      const int64_t n = lt == std::string::npos ? 1 : numberAt(line, lt + 1);
      if (type != std::string::npos && space != std::string::npos && n > 0)
        f.registers.emplace_back(line.substr(type, space - type), n);
    } else if (line.rfind(".local ", 0) == 0 || line.rfind(".shared ", 0) == 0) {
      const size_t lb = line.find('[');
      const int64_t n = lb == std::string::npos ? -1 : numberAt(line, lb + 1);
      if (n > 0) (line[1] == 'l' ? f.local_bytes : f.shared_bytes) += n;
    }
  }
  return out;
}

std::string ptxVersion(const std::string& ptx) {
  const size_t v = ptx.find(".version ");
  if (v == std::string::npos) return "";
  const size_t end = ptx.find_first_of("\n\r", v);
  return ptx.substr(v + 9, end == std::string::npos ? std::string::npos : end - v - 9);
}

}  // namespace kiln::jit
