// Interpreter: evaluates any verified kernel on host buffers. It is the oracle.
// Shares no code with codegen (only the constants of Kiln's math algorithms, src/math).
//   f64:        every f32 operation in double (loads widen, stores round to float at the end).
//   strict-f32: float arithmetic in exactly the order the IR defines (docs/ir.md).
// Expects: a kernel that passed verify(); one ParamData per parameter, views sized to match.
// Guarantees: outputs written in place; an error message (never an abort) on bad arguments
// (parameter count, view sizes, reduction_partitions outside 1..16).
// Choices within docs/ir.md, the same in both modes: programs run one after another in
// row-major order of each root domain, phase after phase (workspaces zero-filled first); an f32 literal (const, load
// fill) and an f32 scalar parameter are f32 values (a literal is rounded to float first; f64 mode then widens it). In
// f64 mode an i64 -> f32 cast gives the double nearest the integer, and exp/log/tanh/erf are std::exp/log/tanh/erf in
// double. Each evaluate() call precomputes the index maps of every op once (src/interp/steps.h); executing an op never
// looks a dim up by name.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "host/data.h"
#include "ir/ir.h"

namespace kiln::interp {

enum class Mode { F64, StrictF32 };

struct Options {
  Mode mode = Mode::F64;
  int reduction_partitions = 4;  // for `unordered_tree` without an explicit count
};

// Views in f64 mode: the double-precision result of each view (same layout as ParamData).
using F64Views = std::vector<std::vector<double>>;

// Runs the kernel. In strict-f32 mode the views of `params` are read and written as float.
// In f64 mode the views are widened to double, the kernel runs in double, and the final
// double values of every view are returned in `f64_out` (when non-null) while `params` receive
// them rounded to float.
std::optional<std::string> evaluate(const ir::Kernel& kernel, std::vector<host::ParamData>& params,
                                    const Options& options, F64Views* f64_out = nullptr);

}  // namespace kiln::interp
