// Kiln's math algorithms for f32 exp, log, tanh, erf: the constants and the exact sequence
// of IEEE float operations (no FMA) that both the strict-FP32 interpreter and the code
// generator follow, step for step, so that precise results agree bit for bit.
// The constants and the operation sequences, one IEEE operation per line: kmath_constants.h.
// Accuracy against double precision (exhaustive over all floats, at most 1 ulp from the
// correctly rounded result for each function): docs/math.md.
#pragma once

namespace kiln::math {

// Reference implementations in float arithmetic (used by the interpreter and by the tests
// that measure accuracy). Codegen emits the same steps as LLVM IR from the constants below.
float exp(float x);
float log(float x);
float tanh(float x);
float erf(float x);

}  // namespace kiln::math
