// The kernel library as the CLI and the bench harness see it: a kernel by NAME, a --shape
// string and options, built through the DSL (specialised per shape), plus its independent
// FP64 reference written plainly in C++ (no IR, no interpreter).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "host/data.h"
#include "ir/ir.h"

namespace kiln::kernels {

// What the library sizes programs for (DESIGN.md, "The target model"): the CPU, or a GPU
// with this many multiprocessors (its programs are thread blocks; gemm's default tiles fill
// them). Filled by the caller from the target knob's model; a different choice is a different,
// equally defined kernel.
struct LibraryTarget {
  bool gpu = false;
  int64_t multiprocessors = 0;
  int64_t threads = 1;    // a CPU: the threads programs run on (the knob `threads`)
  int64_t l1d_bytes = 0;  // a CPU: one core's L1 data cache (0: unknown, taken as 32 KiB)
  bool dpbf16 = false;    // a CPU: the bf16 orders' steps run on VDPBF16PS (plan::dpbf16Steps)
  bool amx = false;       // a CPU: the bf16 dot order's mmas run on AMX tiles (plan::amxTiles)
};

struct LibraryRequest {
  std::string name;                            // e.g. "attention"
  std::string shape;                           // e.g. "1,8,2,1,2053,80,96"
  std::map<std::string, std::string> options;  // e.g. {"mask","causal"}, {"block","1x16"}
  // Option names are the CLI's without "--" (block mask scale trans-b eps style base approx);
  // a flag (trans-b) takes "" or "true". An option the kernel does not take is an error.
  LibraryTarget target;
};

struct LibraryKernelInfo {
  std::string name;
  std::string shape_fields;  // e.g. "B,Hq,Hkv,Q,K,D,Dv"
  std::string options;       // one line per option: "--mask causal|none (default causal)"
  std::string summary;
};

const std::vector<LibraryKernelInfo>& libraryKernels();

// Builds the kernel. Error: a sentence naming the parameter (shape field, option) that is
// wrong and what is legal; never aborts.
std::optional<std::string> buildLibraryKernel(const LibraryRequest& request, std::unique_ptr<ir::Kernel>& out);

// The choices the library made for this request (option name -> value, defaults filled in and
// said to be defaults): e.g. attention's block and split. For the realization report.
std::optional<std::string> libraryChoices(const LibraryRequest& request, std::map<std::string, std::string>& out);

// The independent FP64 reference: from the parameter values (as makeInputs lays them out, one
// per kernel parameter), the double-precision result of every parameter that the kernel
// writes, indexed like the parameters (entries for non-outputs are left empty).
std::optional<std::string> libraryReference(const LibraryRequest& request, const std::vector<host::ParamData>& params,
                                            std::vector<std::vector<double>>& outputs);

// The allowance of the f64 check beyond its atol + rtol·|ref| (driver::CheckOptions::
// f64_allowance), per element of each output, indexed like the parameters (empty: none). gemm:
// 2·sqrt(K)·u·(|A|·|B|)[i,j], u = 2^-24 — the rounding of a K-term FP32 dot product grows with
// K (4096^3 with the generated inputs: errors to 3.8e-4, past 5e-5); the other kernels: none.
std::optional<std::string> libraryAllowance(const LibraryRequest& request, const std::vector<host::ParamData>& params,
                                            std::vector<std::vector<double>>& allowances);

}  // namespace kiln::kernels
