// Host target detection, the O2 pipeline and object emission.
#include "jit/compile.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <utility>
#include <vector>

#include "host/data.h"
#include "llvm/Analysis/CGSCCPassManager.h"
#include "llvm/Analysis/LoopAnalysisManager.h"
#include "llvm/Config/llvm-config.h"
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
    for (const auto& entry : llvm::sys::getHostCPUFeatures())
      features.emplace_back(entry.getKey().str(), entry.getValue());
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
  if (options.isa == "avx512" && host.features.find("+avx512f") == std::string::npos)
    return error("isa=avx512: this host's CPU (" + host.cpu + ") has no AVX-512F; use isa=avx2 or isa=native");
  std::unique_ptr<llvm::TargetMachine> machine(
      target->createTargetMachine(triple, cpu, features, targetOptions(options), llvm::Reloc::PIC_,
                                  llvm::CodeModel::Small, llvm::CodeGenOptLevel::Default));
  if (!machine) return error("cannot create a target machine for '" + host.triple + "' cpu '" + host.cpu + "'");

  module->setTargetTriple(triple);
  module->setDataLayout(machine->createDataLayout());

  std::string verify_message;
  llvm::raw_string_ostream verify_stream(verify_message);
  if (llvm::verifyModule(*module, &verify_stream)) return error("invalid LLVM module: " + verify_message);

  CompiledObject out;
  out.instructions_pre_opt = static_cast<int>(module->getInstructionCount());
  optimizeO2(*module, *machine);
  out.instructions_post_opt = static_cast<int>(module->getInstructionCount());
  for (const llvm::Function& f : *module) out.basic_blocks_post_opt += static_cast<int>(f.size());

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

}  // namespace kiln::jit
