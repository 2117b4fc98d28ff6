// check(): compile a kernel, run it natively on the deterministic inputs (inside guard
// zones), and compare every output with the interpreter — `f64` within tolerance of the FP64
// oracle, or `bitexact` against strict-FP32. Used by `kiln run` and the correctness tests.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "host/data.h"
#include "ir/ir.h"
#include "plan/knobs.h"

namespace kiln::driver {

enum class CheckMode { F64, Bitexact };

struct OutputCheck {
  std::string name;
  bool pass = true;
  double max_abs_err = 0.0;
  double max_rel_err = 0.0;
  int64_t mismatches = 0;  // bitexact: differing elements; f64: elements out of tolerance
  int64_t first_bad = -1;
};

struct CheckResult {
  bool pass = false;
  double max_abs_err = 0.0;
  double max_rel_err = 0.0;
  std::vector<OutputCheck> outputs;
  int64_t packets_full = 0;
  int64_t packets_masked = 0;
  double compile_ms = 0.0;      // compile() time (a cache hit: reading the entry)
  std::string cache = "off";    // the object cache: hit | miss | off
  double cache_saved_ms = 0.0;  // hit: the compile time the entry recorded
  // Where the plan's prediction of the code differs from the emitted code
  // (planDisagreesWithCode); empty when they agree. Tests require it empty.
  std::string plan_vs_code;
  // Every parameter after the native launch (its outputs written): `kiln run --output`.
  std::vector<host::ParamData> native;
};

struct CheckOptions {
  CheckMode mode = CheckMode::F64;
  uint64_t seed = 0;
  std::map<std::string, std::string> scalar_args;  // name -> value
  // Data for named view parameters (row-major, the view's element count), replacing the
  // generated values: `kiln run --input NAME=FILE.npy`.
  std::map<std::string, std::vector<float>> views;
  // The same for integer views (view<i32>, view<i64>): lengths, positions, tables.
  std::map<std::string, std::vector<int64_t>> int_views;
  double atol = 5e-5;
  double rtol = 5e-5;
  // When set, the f64 check compares against this reference instead of the FP64 interpreter:
  // from the inputs (as host::makeInputs made them) it gives the double result of every output
  // parameter, indexed like the parameters (e.g. a library kernel's plain C++ reference).
  std::function<std::optional<std::string>(const std::vector<host::ParamData>& inputs,
                                           std::vector<std::vector<double>>& outputs)>
      f64_reference;
  // When set (f64 mode): from the same inputs, an allowance per element of an output beyond
  // atol + rtol * |ref| (indexed like the parameters; an empty entry: none): the kernel's own
  // rounding-error bound where it grows with the problem (gemm: kernels::libraryAllowance).
  std::function<std::optional<std::string>(const std::vector<host::ParamData>& inputs,
                                           std::vector<std::vector<double>>& allowances)>
      f64_allowance;
};

// Error (compile failure, refused bitexact under fast math, launch failure, corrupted guard
// zones): a message; a numerical mismatch is not an error but pass = false.
std::optional<std::string> check(const ir::Kernel& kernel, const plan::Knobs& knobs, const CheckOptions& options,
                                 CheckResult& out);

// The reference for `options` (exposed for tests and the bench harness): the interpreter's,
// or in f64 mode options.f64_reference when set.
std::optional<std::string> reference(const ir::Kernel& kernel, const plan::Knobs& knobs, const CheckOptions& options,
                                     std::vector<host::ParamData>& inputs, std::vector<std::vector<double>>& f64_views,
                                     std::vector<host::ParamData>& strict_views);

}  // namespace kiln::driver
