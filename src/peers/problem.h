// One peers workload: an attention shape, its deterministic inputs (those `kiln run` would
// give the DSL attention kernel for the same seed) and its FP64 reference.
// Guarantees: the reference is plain double-precision C++ (full score row, max, exp, sum),
// sharing no code with any implementation it checks.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "peers/native.h"

namespace kiln::peers {

using Shape = kernels::AttentionShape;

// "B,Hq,Hkv,Q,K,D,Dv", all >= 1 and Hq a multiple of Hkv. Error: names the bad field.
std::optional<std::string> parseShape(const std::string& text, Shape& out);
std::string shapeText(const Shape& s);

// The shapes `kiln peers` measures by default: the seed's four, then a long decode and a
// square prefill at Llama-like sizes.
const std::vector<std::string>& defaultShapes();

struct Problem {
  Shape shape;
  bool causal = false;
  float scale = 1.0f;  // the kernel's: 1/sqrt(D) rounded to f32
  std::vector<float> q, k, v;
  std::vector<double> reference;  // o in FP64 (empty until computeReference)

  double flops() const;    // 2 * B * Hq * Q * K * (D + Dv) (every key, mask or not)
  double kvBytes() const;  // 4 * B * Hkv * K * (D + Dv)
  int64_t outputSize() const { return shape.B * shape.Hq * shape.Q * shape.Dv; }
  // Arguments for the hand-written kernels, writing to `o`.
  AttentionArgs args(float* o) const;
};

// Inputs from `seed` (host::makeInputs on the DSL kernel of the shape). Error: the kernel does
// not build.
std::optional<std::string> makeProblem(const Shape& shape, bool causal, uint64_t seed, Problem& out);
void computeReference(Problem& problem);

}  // namespace kiln::peers
