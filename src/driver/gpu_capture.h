// GPU capture (docs/gpu.md): one case of a kiln-replay archive (docs/gpu/archive-format.md).
// The kernel is compiled twice with the same knobs: for the CPU, where it runs on the
// deterministic inputs and is checked bit for bit against the strict-f32 interpreter (and in
// f64 against the FP64 oracle), and for target nvptx, whose PTX the archive holds beside the
// expected output bytes. A GPU machine without LLVM replays it (tools/kiln-replay).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "driver/check.h"
#include "ir/ir.h"
#include "plan/knobs.h"

namespace kiln::driver {

struct GpuCaptureOptions {
  std::string archive;    // the archive folder (created; index.txt appended)
  std::string case_name;  // folder name: letters, digits, '.', '_', '-'
  std::string source;     // how the kernel was made (the command line), for the manifest
  uint64_t seed = 0;      // the inputs' seed
  CheckOptions f64;       // the FP64 check of the CPU run (a library kernel's reference, or the interpreter)
  double flops = 0.0;     // useful floating-point operations (0 = not stated)
  // Views whose input is every bit pattern from a base on instead of generated values (a
  // conversion sweep): element e of a view<f32> holds the 32 bits base + e (the replay makes
  // them again: INIT bits:BASE), of a view<f16> / view<bf16> the 16 bits (base + e) mod 2^16
  // (carried in its inputs file). NaNs and infinities included.
  std::map<std::string, uint32_t> bit_patterns;
  // Outputs travel as their digests only (no expected bytes): for outputs too large to carry.
  bool digest_only = false;
};

struct GpuCaptureResult {
  bool cpu_bitexact = false;  // the CPU's bytes equal the strict-f32 interpreter's
  bool cpu_f64 = false;       // the CPU's outputs within tolerance of the FP64 oracle (or not checked:)
  bool f64_checked = true;    // false for a sweep of bit patterns (GpuCaptureOptions::bit_patterns)
  std::string plan_vs_code;   // planDisagreesWithCode of the CPU compilation (empty: agree)
  nlohmann::json gpu_report;  // the nvptx compilation's report
  std::string case_dir;
};

// FNV-1a 64 of `n` bytes as 16 lowercase hex digits (the archive's digests).
std::string fnv1a64Hex(const void* data, size_t n);

// Error: a bad case name, a compile or CPU launch failure, an unwritable archive. A CPU run that
// does not match the interpreter is not an error (cpu_bitexact false) and writes nothing.
std::optional<std::string> captureGpuCase(const ir::Kernel& kernel, const plan::Knobs& knobs,
                                          const GpuCaptureOptions& options, GpuCaptureResult& out);

}  // namespace kiln::driver
