// One peers workload: an attention shape or a GEMM shape, its deterministic inputs (those
// `kiln run` would give the library kernel for the same seed) and its FP64 reference.
// Guarantees: the reference is plain double-precision C++ (full score row, max, exp, sum),
// sharing no code with any implementation it checks.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "kernels/gemm.h"
#include "peers/native.h"

namespace kiln::peers {

using Shape = kernels::AttentionShape;
using GemmShape = kernels::GemmShape;

// The workloads `kiln peers --kernel NAME` measures.
enum class Workload { Attention, Gemm };
const char* workloadName(Workload w);  // "attention", "gemm"

// One shape of either workload, as parsed from --shape.
struct ShapeSpec {
  Workload workload = Workload::Attention;
  Shape attention;
  GemmShape gemm;
  std::string text() const;    // "1,8,2,1,2053,80,96" or "512,512,512"
  std::string fields() const;  // "B,Hq,Hkv,Q,K,D,Dv" or "M,N,K"
};

// "B,Hq,Hkv,Q,K,D,Dv", all >= 1 and Hq a multiple of Hkv. Error: names the bad field.
std::optional<std::string> parseShape(const std::string& text, Shape& out);
std::string shapeText(const Shape& s);

// The shapes `kiln peers` measures by default: the seed's four, then a long decode and a
// square prefill at Llama-like sizes.
const std::vector<std::string>& defaultShapes();

// GEMM: "M,N,K", each in 1..16777216 (K >= 1), at most 2^30 elements of A, B and C.
std::optional<std::string> parseGemmShape(const std::string& text, GemmShape& out);
// `kiln peers --kernel gemm` by default: a square 512^3, a skinny 1 x 4096 x 4096 (one token
// through a 4096-wide projection: memory-bound) and a small-M 64 x 2048 x 256.
const std::vector<std::string>& defaultGemmShapes();

// Parses one --shape of the workload. Error: names the bad field.
std::optional<std::string> parseShapeSpec(Workload w, const std::string& text, ShapeSpec& out);

// The storage of attention's K and V (`kiln peers --kv-dtype`): f32, or a 16-bit type whose
// values k and v then are (an f32 implementation computes the same problem from them).
using KvElem = dsl::FloatElem;
inline const char* kvElemName(KvElem e) {
  return dsl::floatElemName(e);
}

struct Problem {
  Workload workload = Workload::Attention;
  Shape shape;  // attention
  bool causal = false;
  float scale = 1.0f;  // the kernel's: 1/sqrt(D) rounded to f32
  std::vector<float> q, k, v;
  KvElem kv_elem = KvElem::F32;
  std::vector<uint16_t> k16, v16;  // a 16-bit kv_elem: the bits of k and v
  GemmShape gemm;                  // gemm: C[M,N] = A[M,K] . B[K,N], all row-major
  std::vector<float> a, b;
  KvElem b_elem = KvElem::F32;      // gemm: B as f32, or a 16-bit type whose values b then are
  std::vector<uint16_t> b16;        // a 16-bit b_elem: the bits of b
  std::vector<double> reference;    // o (or c) in FP64 (empty until computeReference)
  std::vector<double> abs_product;  // gemm: (|A||B|)[i,j] (computeReference)

  // attention: 2 * B * Hq * Q * K * (D + Dv) (every key, mask or not); gemm: 2 * M * N * K
  double flops() const;
  // The bytes the roofline's memory side reads: attention K and V, B * Hkv * K * (D + Dv)
  // elements of kv_elem; gemm A and B, 4 * M * K + (4 or 2 for 16-bit B) * K * N.
  double kvBytes() const;
  const char* bytesName() const { return workload == Workload::Gemm ? "A+B" : "K/V"; }
  int64_t outputSize() const {
    return workload == Workload::Gemm ? gemm.M * gemm.N : shape.B * shape.Hq * shape.Q * shape.Dv;
  }
  ShapeSpec spec() const;
  // Arguments for the hand-written kernels, writing to `o`.
  AttentionArgs args(float* o) const;
};

// Inputs from `seed` (host::makeInputs on the DSL kernel of the shape, K and V of `kv`, so
// values of that type). Error: the kernel does not build.
std::optional<std::string> makeProblem(const Shape& shape, bool causal, uint64_t seed, Problem& out,
                                       KvElem kv = KvElem::F32);
// GEMM inputs from `seed` (host::makeInputs on the library's gemm kernel of the shape).
// With a 16-bit b_elem, B's values are of that type and b16 holds their bits.
std::optional<std::string> makeGemmProblem(const GemmShape& shape, uint64_t seed, Problem& out,
                                           KvElem b_elem = KvElem::F32);
std::optional<std::string> makeProblem(const ShapeSpec& spec, bool causal, uint64_t seed, Problem& out,
                                       KvElem kv = KvElem::F32, KvElem b_elem = KvElem::F32);
void computeReference(Problem& problem);

}  // namespace kiln::peers
