// The targets behind target::Target (target.h), one class each; only target.cpp names them.
#pragma once

#include "target/target.h"

namespace kiln::target {

class CpuTarget final : public Target {
 public:
  Kind kind() const override { return Kind::Cpu; }
  const char* name() const override { return "cpu"; }
  const Model& model(const std::string& isa) const override;
  bool gpuEntries() const override { return false; }
  llvm::Expected<jit::CompiledObject> emit(std::unique_ptr<llvm::Module> module,
                                           const jit::JitOptions& options) const override;
  nlohmann::json reportFacts(const std::string& isa, const jit::CompiledObject& object) const override;
};

class NvptxTarget final : public Target {
 public:
  Kind kind() const override { return Kind::Nvptx; }
  const char* name() const override { return "nvptx"; }
  const Model& model(const std::string& isa) const override;
  bool gpuEntries() const override { return true; }
  llvm::Expected<jit::CompiledObject> emit(std::unique_ptr<llvm::Module> module,
                                           const jit::JitOptions& options) const override;
  // PTX above the knob gpu_max_ptx_kb.
  std::optional<std::string> refuse(const jit::CompiledObject& object, const plan::Knobs& knobs) const override;
  nlohmann::json reportFacts(const std::string& isa, const jit::CompiledObject& object) const override;
};

}  // namespace kiln::target
