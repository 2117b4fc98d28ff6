// One differential run: the interpreter in f64 and strict-f32 against native code compiled
// under one knob point, on the deterministic inputs (optionally with special values injected).
// Expects: a verified kernel. Guarantees: a verdict, never an abort of the caller when
// `isolate` is set: the whole run happens in a forked child, so a crash (signal) or a hang
// (timeout) of the interpreter, the compiler or the kernel becomes a Crash verdict.
// What is compared (docs/fuzz.md): every view parameter after the run (outputs, and inputs that
// must come back unchanged), inside guard zones. Precise runs (no fast_math, no relaxed mma):
// identical bytes to strict-f32, any NaN equal to any NaN. Otherwise: the FP64 oracle within
// 5e-5 + 5e-5·|ref| on finite values and the same non-finite class, on the elements where the
// strict-f32 interpreter itself meets that tolerance (elsewhere the program is too
// ill-conditioned for an f32 result to be judged against f64).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "host/data.h"
#include "ir/ir.h"
#include "plan/knobs.h"

namespace kiln::fuzz {

struct InputConfig {
  uint64_t seed = 0;      // host::makeInputs's seed
  bool specials = false;  // inject zeros, denormals, ±inf, NaN (specialInputs)
};

enum class Verdict { Pass, Mismatch, Refused, Error, Crash };
std::string verdictName(Verdict v);

struct Outcome {
  Verdict verdict = Verdict::Pass;
  std::string reason;  // one line; empty on Pass
};

// Makes the inputs: host::makeInputs; with a non-zero seed, i64 scalar parameters get a value in
// -1..4 drawn from the seed; then (specials) replaces about one element in six of
// every loaded view by one of +0, -0, ±denormal, ±inf, NaN, ±FLT_MAX, drawn from an Rng seeded
// by the input seed.
std::optional<std::string> makeFuzzInputs(const ir::Kernel& kernel, const InputConfig& in,
                                          std::vector<host::ParamData>& out);

// A compile error the compiler may legitimately give (a clean refusal, not a bug): a feature
// it says is not yet supported, a knob value it rejects, a resource limit.
bool isRefusal(const std::string& message);

Outcome differential(const ir::Kernel& kernel, const plan::Knobs& knobs, const InputConfig& in, bool isolate = true,
                     int timeout_s = 60);

}  // namespace kiln::fuzz
