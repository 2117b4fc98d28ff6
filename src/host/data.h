// Host data for a kernel's parameters: deterministic inputs, output comparison, digests.
// Shared by `kiln eval`, `kiln run`, the runtime tests and the bench harness.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/ir.h"

namespace kiln::host {

// The value of one kernel parameter.
struct ParamData {
  std::vector<float> data;    // f32, f16 or bf16 view: row-major elements as f32 (size = numElements
                              // of the view; a 16-bit view's are values of its type, host/storage.h)
  std::vector<int64_t> ints;  // integer view (view<i32>, view<i64>): row-major elements
  int64_t i64 = 0;            // i64 scalar parameter
  float f32 = 0.0f;           // f32 scalar parameter
};

// Deterministic inputs (docs/cli.md, "Inputs"): every view that the kernel loads gets
// uniform values in [-1, 1) on a 2^-23 grid from a SplitMix64 stream seeded by (seed, param
// index); views only stored to start as zeros; an integer view that the kernel loads gets
// small integers in `ints` (lengths, positions and tables are the caller's to give: these
// exercise the code, including negative and past-the-end values), one only stored zeros; f32
// scalars get one draw of the same stream; i64 scalars are 0 (or in their stated range). `overrides` (name -> value)
// sets scalar parameters by name. Returns an error message for an override naming no scalar parameter or a malformed
// value.
//
// The generator, exactly (all arithmetic on uint64_t, wrapping):
//   mix(z):  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9; z = (z ^ (z >> 27)) * 0x94D049BB133111EB;
//            return z ^ (z >> 31)
//   stream of parameter i (0-based position in the kernel's parameter list):
//            state = seed ^ mix(i + 1)
//   next():  state = state + 0x9E3779B97F4A7C15; return mix(state)          (SplitMix64)
//   draw():  u = next() >> 40 (the top 24 bits, 0 .. 2^24-1);
//            value = float(int64(u) - 2^23) * 2^-23   (exact: in [-1, 1 - 2^-23], step 2^-23)
// A loaded view takes numElements draws, element 0 first (row-major order); a view<f16> or
// view<bf16> takes each draw rounded to its type (round to nearest even, docs/ir.md). A loaded integer
// view takes numElements values int64(next() >> 58) - 8 (in [-8, 56)), element 0 first. An f32 scalar takes
// the first draw of its stream. A parameter with a stated range [lo, hi] (an i64 scalar, or a
// loaded integer view) takes lo + next() % (hi - lo + 1) per element instead (one draw for a
// scalar; an unloaded view stays zeros, or lo when 0 is outside the range). Overrides: the key is the parameter name
// with or without the leading '%'; an i64 value is a decimal integer (optional sign), an f32 value is a decimal or
// exponent-form number, `inf`, `-inf` or `nan`; the whole string must parse.
std::optional<std::string> makeInputs(const ir::Kernel& kernel, uint64_t seed,
                                      const std::map<std::string, std::string>& overrides, std::vector<ParamData>& out);

// An integer view's elements as its memory holds them: int32_t (each value's low 32 bits) or
// int64_t, native byte order; and back, each element sign-extended to int64_t.
std::string integerBytes(const std::vector<int64_t>& ints, bool int32);
void integersFromBytes(const void* bytes, size_t size, bool int32, std::vector<int64_t>& out);

// Result of comparing an output against the FP64 oracle.
struct CompareResult {
  bool pass = true;
  double max_abs_err = 0.0;  // over elements where both values are finite
  double max_rel_err = 0.0;  // |got - ref| / |ref| over those with ref != 0
  int64_t first_bad = -1;    // index of the first failing element, -1 when all pass
  int64_t failing = 0;       // number of failing elements (size difference counts as one)
};

// Element i passes when ref[i] is finite, got[i] is finite and
// |got - ref| <= atol + rtol * |ref|; or when ref[i] is not finite and got[i] is in the same
// class (NaN <-> NaN, +inf <-> +inf, -inf <-> -inf). Different sizes fail with
// first_bad = the smaller size.
CompareResult compareF64(const std::vector<float>& got, const std::vector<double>& ref, double atol = 5e-5,
                         double rtol = 5e-5);
// The same for an output stored in a 16-bit view (`storage` f16 or bf16; f32: as above): the
// compiled value is the f32 result rounded to the type, so an element also passes when it is
// the reference rounded to the type, or within one unit in the last place of the type at the
// reference's magnitude (the f32 result and the exact one can lie on either side of a rounding
// boundary).
// `allowance` (when not null, one per element): added to atol + rtol * |ref| for that element
// (a kernel's own rounding-error bound, e.g. a K-term dot product's).
CompareResult compareF64(const std::vector<float>& got, const std::vector<double>& ref, double atol, double rtol,
                         ir::Elem storage, const std::vector<double>* allowance = nullptr);

// Bit-exact comparison: identical bytes, except that any NaN equals any NaN.
struct BitexactResult {
  bool pass = true;
  int64_t mismatches = 0;  // number of differing elements (size difference counts as one)
  int64_t first_bad = -1;  // index of the first differing element, -1 when equal
};
BitexactResult compareBitexact(const std::vector<float>& a, const std::vector<float>& b);
// The same for integer views: every element equal.
BitexactResult compareInts(const std::vector<int64_t>& a, const std::vector<int64_t>& b);

// SHA-256 of a byte range, as 64 lowercase hex digits.
std::string sha256Hex(const void* data, size_t size);

// Summary of a buffer. NaN propagates: any NaN element makes min, max and mean NaN (print them
// as null). Infinities take part normally. An empty buffer gives count 0 and NaN min/max/mean.
struct Stats {
  int64_t count = 0;
  double min = 0.0;
  double max = 0.0;
  double mean = 0.0;  // sum in double, in element order, divided by count
};
Stats stats(const std::vector<float>& values);

}  // namespace kiln::host
