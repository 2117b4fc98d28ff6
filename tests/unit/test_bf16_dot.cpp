// The mma order `bf16_dot` (docs/ir.md, MMA): the interpreter on hand-computed cases that tell
// it apart from every other order; the interpreter against Intel AMX's TDPBF16PS on random and
// edge inputs where this CPU has AMX (the order is defined to be that instruction's, so a
// compiled realization may use it); and compiled code (both CPU realizations, AVX2 and AVX-512,
// K unrolled and in a loop) against the interpreter bit for bit on the same inputs.
#include <cpuid.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "driver/compile.h"
#include "host/isa.h"
#include "host/storage.h"
#include "host_isa.h"
#include "interp/interp.h"
#include "ir/diag.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "plan/knobs.h"
#include "runtime/runtime.h"

namespace kiln {
namespace {

constexpr int kM = 16, kN = 16;

// c[m, n] = mma(a[m, :], b[n, :], acc[m, n]) over K in the bf16 dot order, or `order` (kOuter:
// b stored [K, N] and loaded as [k, n]; bf16B: b a bf16 view).
std::string dotKernel(int K, int M = kM, int N = kN, bool kOuter = false, bool bf16B = false, bool bf16A = false,
                      const std::string& order = "bf16_dot") {
  const std::string bView = fmt::format("view<{}>[{}, {}]", bf16B ? "bf16" : "f32", kOuter ? K : N, kOuter ? N : K);
  const std::string bTile = kOuter ? fmt::format("[k:{}, n:{}]", K, N) : fmt::format("[n:{}, k:{}]", N, K);
  return fmt::format(
      R"(kernel @dot(%a: view<{5}>[{0}, {2}], %b: {3}, %acc: view<f32>[{0}, {1}], %c: view<f32>[{0}, {1}]) {{
  parallel (%p) in (1) {{
    %at = load %a[0, 0] as [m:{0}, k:{2}] fill 0
    %bt = load %b[0, 0] as {4} fill 0
    %ct = load %acc[0, 0] as [m:{0}, n:{1}] fill 0
    %r = mma %at, %bt, %ct contract [k] {6}
    store %r, %c[0, 0] as [m:{0}, n:{1}]
  }}
}}
)",
      M, N, K, bView, bTile, bf16A ? "bf16" : "f32", order);
}

std::unique_ptr<ir::Kernel> parse(const std::string& text) {
  ir::DiagEngine diag;
  auto k = ir::parseKernel(text, "dot.tile", diag);
  EXPECT_TRUE(k) << diag.str();
  return k;
}

struct Inputs {
  int K = 0;
  std::vector<float> a, b, acc;  // [M, K], [N, K], [M, N]
};

std::vector<float> interpret(const ir::Kernel& k, const Inputs& in) {
  std::vector<host::ParamData> ps(4);
  ps[0].data = in.a;
  ps[1].data = in.b;
  ps[2].data = in.acc;
  ps[3].data.assign(in.acc.size(), 0.0f);
  interp::Options o;
  o.mode = interp::Mode::StrictF32;
  auto e = interp::evaluate(k, ps, o);
  EXPECT_FALSE(e) << *e;
  return ps[3].data;
}

bool sameBits(float x, float y) {
  return (std::isnan(x) && std::isnan(y)) || std::bit_cast<uint32_t>(x) == std::bit_cast<uint32_t>(y);
}

// One output element, c[0, 0], from a row of a and of b (other rows zero).
float element(int K, const std::vector<float>& a, const std::vector<float>& b, float acc,
              const std::string& order = "bf16_dot") {
  Inputs in{K, std::vector<float>(kM * K, 0.0f), std::vector<float>(kN * K, 0.0f), std::vector<float>(kM * kN, 0.0f)};
  for (int k = 0; k < K; ++k) in.a[k] = a[k], in.b[k] = b[k];
  in.acc[0] = acc;
  auto k = parse(dotKernel(K, kM, kN, false, false, false, order));
  return interpret(*k, in)[0];
}

TEST(Bf16Dot, InterpreterRunsTwoChainsPerBlockOf32) {
  const float big = 0x1p24f;  // a bf16 value: 2^24 + 1 is not an f32 sum that survives
  // K = 4, b = 1: even chain (0 + 2^24) - 2^24 = 0, odd chain 1 + 1 = 2, c = 0 + (0 + 2) = 2.
  // Ascending K gives ((2^24 + 1) - 2^24) + 1 = 1; partitions(2) gives the same 2, but:
  EXPECT_EQ(element(4, {big, 1, -big, 1}, {1, 1, 1, 1}, 0.0f), 2.0f);
  // acc + (even + odd), not (acc + even) + odd: acc = 2^24, even = 1, odd = 1: 2^24 + 2.
  // ((2^24 + 1) + 1) would be 2^24.
  EXPECT_EQ(element(2, {1, 1}, {1, 1}, big), big + 2.0f);
  // Blocks of 32: k = 32 starts new chains. a0 = 2^24, a32 = 1, a34 = 1, a2 = -2^24: block 0
  // gives 0 + (0 + 0)... with a2 the block's even chain is exact; block 1's even chain 1 + 1 = 2.
  std::vector<float> a(35, 0.0f), b(35, 1.0f);
  a[0] = big, a[32] = 1, a[34] = 1;
  // Block 0: even = 2^24, c = 2^24; block 1: even = 2, c = 2^24 + 2. One chain over K would
  // fold 1 into 2^24 twice and keep 2^24.
  EXPECT_EQ(element(35, a, b, 0.0f), big + 2.0f);
}

// The bf16 pairs order (VDPBF16PS's): one chain from the accumulator, per pair k+1 before k.
TEST(Bf16Pairs, InterpreterRunsOneChainOverPairsOddFirst) {
  const float big = 0x1p24f;
  const std::string pairs = "bf16_pairs";
  // a = 1, 2^24, 1, -2^24 (b = 1): 2^24, (2^24 + 1) -> 2^24, 0, 1. Ascending K gives 0 (the last
  // 1 is lost in 2^24), bf16_dot's two chains 2 (1 + 1, and 2^24 - 2^24).
  EXPECT_EQ(element(4, {1, big, 1, -big}, {1, 1, 1, 1}, 0.0f, pairs), 1.0f);
  EXPECT_EQ(element(4, {1, big, 1, -big}, {1, 1, 1, 1}, 0.0f), 2.0f);
  // One chain from the accumulator: 2^24 + 1 + 1 stays 2^24 (bf16_dot: 2^24 + (1 + 1)).
  EXPECT_EQ(element(2, {1, 1}, {1, 1}, big, pairs), big);
  // k+1 first, each step flushed: 2^-127 (subnormal) -> 0, then 0 + 2^-126. k first would keep
  // 2^-126 + 2^-127.
  EXPECT_EQ(element(2, {0x1p-63f, 0x1p-64f}, {0x1p-63f, 0x1p-63f}, 0.0f, pairs), 0x1p-126f);
  // An odd count's last contribution alone, after the pairs: (1 + 2^24) -> 2^24, then - 2^24 + ...
  EXPECT_EQ(element(3, {big, 1, -big}, {1, 1, 1}, 0.0f, pairs), 0.0f);
  EXPECT_EQ(element(3, {1, big, -big}, {1, 1, 1}, 0.0f, pairs), 0.0f);
  EXPECT_EQ(element(3, {big, -big, 1}, {1, 1, 1}, 0.0f, pairs), 1.0f);
  // Operands rounded to bf16 and flushed, the accumulator flushed: as bf16_dot.
  EXPECT_EQ(element(1, {1 + 3 * 0x1p-9f}, {1}, 0.0f, pairs), 1 + 0x1p-7f);
  EXPECT_EQ(element(1, {0x1p-130f}, {0x1p100f}, 0.0f, pairs), 0.0f);
  EXPECT_EQ(element(1, {0x1p-63f}, {0x1p-63f}, 0x1p-128f, pairs), 0x1p-126f);
}

TEST(Bf16Dot, InterpreterRoundsOperandsToBf16AndFlushesTinyValues) {
  // 1 + 2^-9 lies halfway between two bf16 values: to even, 1. 1 + 3 * 2^-9 rounds up to 1 + 2^-7.
  EXPECT_EQ(element(2, {1 + 0x1p-9f, 0}, {1, 0}, 0.0f), 1.0f);
  EXPECT_EQ(element(2, {1 + 3 * 0x1p-9f, 0}, {1, 0}, 0.0f), 1 + 0x1p-7f);
  // A subnormal operand is zero: 2^-130 * 2^100 gives 0, not 2^-30.
  EXPECT_EQ(element(2, {0x1p-130f, 0}, {0x1p100f, 0}, 0.0f), 0.0f);
  // A subnormal acc is zero: 2^-128 + 2^-126 = 2^-126.
  EXPECT_EQ(element(2, {0x1p-63f, 0}, {0x1p-63f, 0}, 0x1p-128f), 0x1p-126f);
  // A chain's subnormal value is flushed: 2^-120 - (2^-120 - 2^-128) = 2^-128 -> 0, + 2^-126.
  EXPECT_EQ(element(6, {0x1p-60f, 0, -0x1p-60f, 0, 0x1p-63f, 0},
                    {0x1p-60f, 0, 0x1p-60f * (1 - 0x1p-8f), 0, 0x1p-63f, 0}, 0.0f),
            0x1p-126f);
  // A tiny product is not flushed before it is added (the step is one fused multiply-add):
  // 2^-126 (1 + 2^-7) + 2^-127.
  EXPECT_EQ(element(4, {0x1p-63f * (1 + 0x1p-7f), 0, 0x1p-64f, 0}, {0x1p-63f, 0, 0x1p-63f, 0}, 0.0f),
            0x1p-126f * (1 + 0x1p-7f) + 0x1p-127f);
  // Tininess after rounding: 2^-126 - 2^-151 rounds to 2^-126, which is kept.
  EXPECT_EQ(element(4, {0x1p-63f, 0, -0x1p-63f, 0}, {0x1p-63f, 0, 0x1p-88f, 0}, 0.0f), 0x1p-126f);
  // The merge's result keeps its sign when flushed: -2^-125 + 2^-125 (1 - 2^-3) = -2^-128 -> -0.
  const float r = element(2, {0x1p-62f, 0}, {0x1p-63f * (1 - 0x1p-3f), 0}, -0x1p-125f);
  EXPECT_TRUE(sameBits(r, -0.0f)) << r;
  // Chains start from +0: every product -0 and acc -0 gives +0.
  EXPECT_TRUE(sameBits(element(2, {-1, -1}, {0, 0}, -0.0f), 0.0f));
}

// ---- the silicon ----------------------------------------------------------------------------

struct TileConfig {
  uint8_t palette = 1, start = 0, reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

bool amxHere(std::string& why) {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  __cpuid_count(7, 0, eax, ebx, ecx, edx);
  if (!(edx & (1u << 22)) || !(edx & (1u << 24))) {
    why = "this CPU has no AMX-BF16";
    return false;
  }
  // Linux grants the tile data state per process on request (ARCH_REQ_XCOMP_PERM, XTILEDATA).
  if (syscall(SYS_arch_prctl, 0x1023, 18) != 0) {
    why = "the kernel refused AMX tile state";
    return false;
  }
  return true;
}

// c[m, n] over K: one TDPBF16PS per block of 32, the last block padded with zeros. The operands
// go in as bf16 rounded to nearest even (host/storage.h); the instruction flushes them itself.
__attribute__((target("amx-tile,amx-bf16"))) std::vector<float> amx(const Inputs& in) {
  TileConfig cfg;
  for (int t = 0; t < 3; ++t) cfg.rows[t] = 16, cfg.colsb[t] = 64;
  _tile_loadconfig(&cfg);
  alignas(64) float c[kM][kN];
  alignas(64) uint16_t A[kM][32], B[16][32];
  for (int m = 0; m < kM; ++m)
    for (int n = 0; n < kN; ++n) c[m][n] = in.acc[m * kN + n];
  _tile_loadd(0, c, 64);
  for (int k0 = 0; k0 < in.K; k0 += 32) {
    for (int m = 0; m < kM; ++m)
      for (int j = 0; j < 32; ++j) A[m][j] = k0 + j < in.K ? host::f32ToBf16(in.a[m * in.K + k0 + j]) : 0;
    for (int p = 0; p < 16; ++p)
      for (int n = 0; n < kN; ++n)
        for (int t = 0; t < 2; ++t) {
          const int k = k0 + 2 * p + t;
          B[p][2 * n + t] = k < in.K ? host::f32ToBf16(in.b[n * in.K + k]) : 0;
        }
    _tile_loadd(1, A, 64);
    _tile_loadd(2, B, 64);
    _tile_dpbf16ps(0, 1, 2);
  }
  _tile_stored(0, c, 64);
  _tile_release();
  std::vector<float> out(kM * kN);
  for (int m = 0; m < kM; ++m)
    for (int n = 0; n < kN; ++n) out[m * kN + n] = c[m][n];
  return out;
}

// Values that exercise every rule: wide and narrow exponents (products near 2^-126, cancelling
// chains), f32 values between bf16 values and halfway, subnormals, zeros of both signs, and a
// rare inf or NaN.
float edgeValue(std::mt19937_64& rng, int mode) {
  const uint32_t sign = (rng() & 1) << 31;
  const int r = static_cast<int>(rng() % 64);
  if (r == 0) return std::bit_cast<float>(sign);                                                // ±0
  if (r == 1) return std::bit_cast<float>(sign | static_cast<uint32_t>(rng() % 0x7FFFFF + 1));  // subnormal
  if (r == 2 && mode == 2) return std::bit_cast<float>(sign | 0x7F800000u);                     // inf
  if (r == 3 && mode == 2) return std::numeric_limits<float>::quiet_NaN();
  int e = mode == 0 ? 127 + static_cast<int>(rng() % 17) - 8 : 127 - 70 + static_cast<int>(rng() % 16) - 8;
  uint32_t mant = static_cast<uint32_t>(rng()) & 0x7FFFFFu;
  if (r < 40) mant &= 0x7F0000u;                    // a bf16 value
  if (r == 4) mant = (mant & 0x7F0000u) | 0x8000u;  // halfway
  return std::bit_cast<float>(sign | static_cast<uint32_t>(e) << 23 | mant);
}

Inputs edgeInputs(int K, uint64_t seed, int mode, int M = kM, int N = kN) {
  std::mt19937_64 rng(seed);
  Inputs in{K, {}, {}, {}};
  for (int i = 0; i < M * K; ++i) in.a.push_back(edgeValue(rng, mode));
  for (int i = 0; i < N * K; ++i) in.b.push_back(edgeValue(rng, mode));
  // acc near the products' magnitudes (mode 1: around 2^-126..2^-140 sums)
  for (int i = 0; i < M * N; ++i) {
    float v = edgeValue(rng, mode);
    in.acc.push_back(mode == 1 ? v * v : v);
  }
  return in;
}

int64_t differing(const std::vector<float>& x, const std::vector<float>& y, const std::string& what) {
  int64_t bad = 0;
  for (size_t i = 0; i < x.size(); ++i)
    if (!sameBits(x[i], y[i]) && ++bad <= 3)
      ADD_FAILURE() << what << " element " << i << std::hex << ": 0x" << std::bit_cast<uint32_t>(x[i]) << " against 0x"
                    << std::bit_cast<uint32_t>(y[i]);
  return bad;
}

TEST(Bf16Dot, InterpreterMatchesAmxWhereTheCpuHasIt) {
  std::string why;
  if (!amxHere(why)) {
    testhost::sayNotRun("Bf16Dot against AMX's TDPBF16PS", why);
    return;
  }
  int64_t cases = 0;
  for (int K : {2, 32, 33, 64, 77, 200})
    for (int mode = 0; mode < 3; ++mode)
      for (uint64_t seed = 0; seed < 6; ++seed) {
        const Inputs in = edgeInputs(K, seed * 3 + mode + 1000 * K, mode);
        auto k = parse(dotKernel(K));
        ASSERT_TRUE(k);
        EXPECT_EQ(differing(interpret(*k, in), amx(in), fmt::format("K={} mode={} seed={}", K, mode, seed)), 0);
        cases += kM * kN;
      }
  EXPECT_EQ(cases, 6 * 3 * 6 * kM * kN);
}

// VDPBF16PS (AVX512-BF16) on one lane: e + a1*b1, then + a0*b0 (16 lanes of the same pair).
__attribute__((target("avx512f,avx512bf16"))) float vdpbf16ps(float e, uint32_t aPair, uint32_t bPair) {
  const __m512 r = _mm512_dpbf16_ps(_mm512_set1_ps(e), (__m512bh)_mm512_set1_epi32(static_cast<int>(aPair)),
                                    (__m512bh)_mm512_set1_epi32(static_cast<int>(bPair)));
  return _mm512_cvtss_f32(r);
}

float flushed(float x) {
  return std::fabs(x) < 0x1p-126f ? std::copysign(0.0f, x) : x;
}

// A bf16 value of any class: zero or subnormal, tiny or huge normal, ordinary, infinity or NaN.
uint16_t anyBf16(std::mt19937_64& rng) {
  const uint64_t r = rng();
  const uint16_t sign = static_cast<uint16_t>((r & 1) << 15), mant = static_cast<uint16_t>((r >> 8) & 127);
  switch ((r >> 1) % 8) {
    case 0: return sign | mant;                                                                   // zero, subnormal
    case 1: return sign | static_cast<uint16_t>((1 + (r >> 20) % 6) << 7) | mant;                 // tiny normal
    case 2: return sign | static_cast<uint16_t>((250 + (r >> 20) % 5) << 7) | mant;               // huge
    case 3: return sign | static_cast<uint16_t>(0x7F80 | ((r >> 20) % 3 == 0 ? 0 : (mant | 1)));  // inf, NaN
    default: return sign | static_cast<uint16_t>((60 + (r >> 20) % 100) << 7) | mant;
  }
}

// A chain's value (flushed) for the i-th random case: any f32 bits, every fourth one tiny (a
// subnormal or zero before the flush).
float anyChainValue(std::mt19937_64& rng, int i) {
  float e = std::bit_cast<float>(static_cast<uint32_t>(rng()));
  if (i % 4 == 0) e = std::bit_cast<float>(static_cast<uint32_t>(rng() % (1u << 24) | (rng() & 1) << 31));
  return flushed(e);
}

// The planner's VDPBF16PS step (LaneMma::dpbf16, knob avx512_bf16): a's bf16 in the low half of a
// 32-bit pair with -0 above it, b's with +0, so the pair's other product, added first, is -0 and
// changes nothing; the instruction's DAZ and FTZ (tininess after rounding) are the order's
// flushes; so one instruction is a chain's step, flush(fma(a, b, e)) with a and b flushed. Read
// off the silicon wherever the CPU has AVX512-BF16 (AMD Zen 4 agrees), random values of every
// class against the step computed in software; NaN as any NaN.
TEST(Bf16Dot, Vdpbf16psWithANegativeZeroPartnerIsTheOrdersStep) {
  if (!host::cpuHasAvx512Bf16()) {
    testhost::sayNotRun("Bf16Dot against VDPBF16PS",
                        "this host has no AVX512-BF16 (or KILN_HOST_WITHOUT_AVX512 is set)");
    return;
  }
  std::mt19937_64 rng(2026);
  int64_t bad = 0;
  for (int i = 0; i < 2000000; ++i) {
    const uint16_t a = anyBf16(rng), b = anyBf16(rng);
    const float e = anyChainValue(rng, i);
    const float want = flushed(std::fma(flushed(host::bf16ToF32(a)), flushed(host::bf16ToF32(b)), e));
    const float got = vdpbf16ps(e, 0x80000000u | a, b);
    if (!sameBits(got, want) && ++bad <= 3)
      ADD_FAILURE() << std::hex << "a 0x" << a << " b 0x" << b << " e 0x" << std::bit_cast<uint32_t>(e) << ": 0x"
                    << std::bit_cast<uint32_t>(got) << " against 0x" << std::bit_cast<uint32_t>(want);
  }
  EXPECT_EQ(bad, 0);
}

// The bf16 pairs order's pair step is one VDPBF16PS: a 32-bit lane holding contributions k (low
// half) and k+1 (high half) of a and of b gives flush(fma(a_k, b_k, flush(fma(a_k+1, b_k+1, e))))
// with the operands flushed. Random values of every class, NaN as any NaN.
TEST(Bf16Pairs, Vdpbf16psIsThePairsStep) {
  if (!host::cpuHasAvx512Bf16()) {
    testhost::sayNotRun("Bf16Pairs against VDPBF16PS",
                        "this host has no AVX512-BF16 (or KILN_HOST_WITHOUT_AVX512 is set)");
    return;
  }
  std::mt19937_64 rng(2027);
  int64_t bad = 0;
  auto value = [](uint16_t x) { return flushed(host::bf16ToF32(x)); };
  for (int i = 0; i < 2000000; ++i) {
    const uint16_t a0 = anyBf16(rng), a1 = anyBf16(rng), b0 = anyBf16(rng), b1 = anyBf16(rng);
    const float e = anyChainValue(rng, i);
    const float want = flushed(std::fma(value(a0), value(b0), flushed(std::fma(value(a1), value(b1), e))));
    const float got = vdpbf16ps(e, static_cast<uint32_t>(a1) << 16 | a0, static_cast<uint32_t>(b1) << 16 | b0);
    if (!sameBits(got, want) && ++bad <= 3)
      ADD_FAILURE() << std::hex << "a 0x" << a1 << ":" << a0 << " b 0x" << b1 << ":" << b0 << " e 0x"
                    << std::bit_cast<uint32_t>(e) << ": 0x" << std::bit_cast<uint32_t>(got) << " against 0x"
                    << std::bit_cast<uint32_t>(want);
  }
  EXPECT_EQ(bad, 0);
}

// ---- compiled code --------------------------------------------------------------------------

// M x N outputs (the lanes along n), K unrolled or in a loop with a padded last block. Returns
// the mma forms the plans chose.
std::set<std::string> compiledMatchesInterpreter(const std::string& isa,
                                                 const std::vector<std::pair<std::string, std::string>>& set, int M = 3,
                                                 int N = 16, bool kOuter = false, bool bf16B = false,
                                                 const std::vector<int>& Ks = {33, 77},
                                                 const std::string& order = "bf16_dot") {
  std::set<std::string> forms;
  for (int K : Ks) {
    auto k = parse(dotKernel(K, M, N, kOuter, bf16B, false, order));
    if (!k) {
      ADD_FAILURE() << "parse";
      continue;
    }
    plan::Knobs knobs;
    EXPECT_FALSE(knobs.set("isa", isa));
    std::string label = "isa=" + isa;
    for (const auto& [name, value] : set) {
      EXPECT_FALSE(knobs.set(name, value)) << name;
      label += " " + name + "=" + value;
    }
    driver::Compilation c;
    EXPECT_FALSE(driver::compile(*k, knobs, c, driver::Stage::Obj)) << label;
    for (const auto& phase : c.report["phases"]) {
      const auto lanes = phase.find("lanes");
      if (lanes != phase.end() && lanes->is_object() && lanes->contains("mma"))
        for (const auto& m : (*lanes)["mma"]) {
          forms.insert(m["form"].get<std::string>());
          if (m.contains("amx_operands")) forms.insert(m["amx_operands"].get<std::string>());
          if (m.contains("bf16_steps")) forms.insert(m["bf16_steps"].get<std::string>());
        }
    }
    if (!testhost::runsHere(isa, "Bf16Dot compiled " + label)) continue;
    std::unique_ptr<runtime::LoadedKernel> loaded;
    EXPECT_FALSE(driver::load(c.object, *k, isa, 1, loaded)) << label;
    if (!loaded) continue;
    for (int mode = 0; mode < 3; ++mode) {
      Inputs in = edgeInputs(K, 77 + mode, mode, M, N);
      std::vector<float> out(M * N, 0.0f);
      auto view = [](std::vector<float>& v) {
        return runtime::Arg::view(v.data(), static_cast<int64_t>(v.size() * sizeof(float)));
      };
      if (kOuter) {  // b as [K, N]
        std::vector<float> t(in.b.size());
        for (int n = 0; n < N; ++n)
          for (int q = 0; q < K; ++q) t[q * N + n] = in.b[n * K + q];
        in.b = t;
      }
      // A bf16 b: its values are bf16 (subnormals included), given as bits.
      std::vector<uint16_t> bits;
      if (bf16B)
        for (float& v : in.b) bits.push_back(host::f32ToBf16(v)), v = host::bf16ToF32(bits.back());
      const runtime::Arg bArg =
          bf16B ? runtime::Arg::view(bits.data(), static_cast<int64_t>(bits.size() * 2)) : view(in.b);
      const std::vector<runtime::Arg> args = {view(in.a), bArg, view(in.acc), view(out)};
      auto e = loaded->launch(args);
      EXPECT_FALSE(e) << *e;
      EXPECT_EQ(differing(out, interpret(*k, in), fmt::format("{} {} K={} mode={}", order, label, K, mode)), 0);
    }
  }
  return forms;
}

TEST(Bf16Dot, CompiledMatchesInterpreterBitForBit) {
  for (const std::string isa : {"avx2", "avx512"}) {
    compiledMatchesInterpreter(isa, {{"amx", "off"}});
    compiledMatchesInterpreter(isa, {{"local_lanes", "1"}});
    compiledMatchesInterpreter(isa, {{"max_unrolled_tile_elements", "0"}, {"amx", "off"}});
    // Several rows and chunks of outputs, the last chunk ragged: b's lanes read as vectors
    // (b[k, n]) or gathered (b[n, k]), a's splat.
    for (bool kOuter : {false, true}) compiledMatchesInterpreter(isa, {{"amx", "off"}}, 5, 37, kOuter, true);
  }
}

// The outer product's steps on VDPBF16PS (knob avx512_bf16=auto, AVX-512 code without AMX on a
// host with AVX512-BF16) and in software (avx512_bf16=off): register tiles of several rows and
// chunks, a ragged last chunk, b as [n, k] (a panel) and [k, n], f32 or bf16 (its values taken as
// they are), K from one pair to several blocks with a padded last block; against the interpreter.
TEST(Bf16Dot, OuterProductStepsMatchInterpreterBitForBit) {
  const bool dp = host::cpuHasAvx512Bf16();
  for (auto [M, N, kOuter, bf16B] : {std::tuple{5, 37, false, false},
                                     {5, 37, true, true},
                                     {9, 64, true, false},
                                     {1, 100, false, true},
                                     {3, 20, true, true}})
    for (const std::string steps : {"auto", "off"}) {
      const std::set<std::string> forms = compiledMatchesInterpreter("avx512", {{"amx", "off"}, {"avx512_bf16", steps}},
                                                                     M, N, kOuter, bf16B, {2, 32, 33, 64, 77, 200});
      EXPECT_EQ(forms.count("outer_product"), 1u) << M << "x" << N;
      EXPECT_EQ(forms.count("vdpbf16ps"), dp && steps == "auto" ? 1u : 0u) << M << "x" << N << " " << steps;
    }
  if (!dp)
    testhost::sayNotRun("Bf16Dot steps on VDPBF16PS",
                        "this host has no AVX512-BF16 (or KILN_HOST_WITHOUT_AVX512 is set)");
}

// The AMX form (knob amx=auto: AVX-512 code on a host with AMX): b as [n, k] and as [k, n],
// ragged M, N and K (tiles padded to 16 x 16, K to blocks of 32; b[n, k]'s words transposed 16
// rows at a time, K in whole pairs of 16-chunks, a last pair of one or two), against the
// interpreter.
TEST(Bf16Dot, AmxFormMatchesInterpreterBitForBit) {
  // Kiln's own answer (KILN_HOST_WITHOUT_AVX512 turns AMX off with AVX-512).
  const bool amx = host::cpuHasAmxBf16();
  const std::string why = "this host has no AMX-BF16 for Kiln (or KILN_HOST_WITHOUT_AVX512 is set)";
  // 37 x 20: through a tile buffer; 32 x 48: the tiles are the result's rows.
  // A bf16 view's bits go to the tiles as they are.
  // At most 16 rows with b[n, k]: b's rows as the instruction's A, c's transpose in the C tiles
  // (LaneMma::amx_b_first); 100 columns: a group of 4 C tiles and a group of 3.
  for (auto [M, N, kOuter, bf16B] : {std::tuple{37, 20, false, false},
                                     {37, 20, true, false},
                                     {32, 48, false, false},
                                     {32, 48, true, false},
                                     {37, 20, true, true},
                                     {32, 48, false, true},
                                     {5, 20, false, false},
                                     {16, 48, false, true},
                                     {1, 100, false, true},
                                     {3, 20, true, true}}) {
    const std::set<std::string> forms = compiledMatchesInterpreter("avx512", {}, M, N, kOuter, bf16B, {33, 50, 64, 77});
    const bool bFirst = M <= 16 && !kOuter;
    if (amx)
      EXPECT_EQ(forms, (std::set<std::string>{"amx", bFirst ? "b as A, a as B" : "a as A, b as B"})) << M << "x" << N;
    else
      EXPECT_EQ(forms.count("amx"), 0u);
  }
  if (!amx) testhost::sayNotRun("Bf16Dot AMX form", why);
}

// The order rounds a to bf16 (and flushes its subnormals): a bf16 view holding a's values rounded
// to nearest even (subnormals kept, as a store keeps them) gives the f32 view's bits, compiled
// (AMX tiles where the host has them, AVX2 step by step) as interpreted. The Llama model relies
// on it to hand its GEMMs bf16 activations. Likewise the bf16 pairs order (on VDPBF16PS a bf16 a
// is read from its view, a pair of words at a time).
TEST(Bf16Dot, Bf16ViewOfATheSameBitsAsF32) {
  const int N = 32;
  for (const std::string order : {"bf16_dot", "bf16_pairs"})
    for (const std::string isa : {"avx512", "avx2"})
      for (auto [M, K] : {std::pair{16, 50}, {16, 64}, {32, 64}, {5, 33}}) {  // AMX: b's rows first; a's from its view
        std::vector<std::vector<float>> outs;
        for (bool bf16A : {false, true}) {
          auto k = parse(dotKernel(K, M, N, false, false, bf16A, order));
          ASSERT_TRUE(k);
          plan::Knobs knobs;
          EXPECT_FALSE(knobs.set("isa", isa));
          driver::Compilation c;
          ASSERT_FALSE(driver::compile(*k, knobs, c, driver::Stage::Obj)) << isa;
          if (!testhost::runsHere(isa, "Bf16Dot bf16 a on " + isa)) break;
          std::unique_ptr<runtime::LoadedKernel> loaded;
          ASSERT_FALSE(driver::load(c.object, *k, isa, 1, loaded)) << isa;
          for (int mode = 0; mode < 2; ++mode) {  // finite values: normal, tiny (subnormal sums)
            Inputs in = edgeInputs(K, 91 + mode, mode, M, N);
            std::vector<uint16_t> aBits;
            for (float v : in.a) aBits.push_back(host::f32ToBf16(v));
            std::vector<float> out(M * N, 0.0f);
            auto view = [](auto& v) {
              return runtime::Arg::view(v.data(), static_cast<int64_t>(v.size() * sizeof(v[0])));
            };
            const std::vector<runtime::Arg> args = {bf16A ? view(aBits) : view(in.a), view(in.b), view(in.acc),
                                                    view(out)};
            auto e = loaded->launch(args);
            EXPECT_FALSE(e) << *e;
            if (!bf16A) {
              EXPECT_EQ(differing(out, interpret(*k, in), isa + " f32 a against the interpreter"), 0);
            }
            outs.push_back(out);
          }
        }
        if (outs.size() == 4) {
          for (int mode = 0; mode < 2; ++mode)
            EXPECT_EQ(
                differing(outs[2 + mode], outs[mode], fmt::format("{} {} K={} mode={} bf16 a", order, isa, K, mode)),
                0);
        }
      }
}

// The bf16 pairs order compiled: both CPU realizations, AVX2 and AVX-512, the outer product with
// its pairs on VDPBF16PS (avx512_bf16=auto, where the CPU has it) and in software (off), K from
// one contribution to many (odd counts: a last contribution alone; pairs unrolled and by a loop),
// b as [n, k] and [k, n], f32 or bf16; against the interpreter bit for bit.
TEST(Bf16Pairs, CompiledMatchesInterpreterBitForBit) {
  const std::string pairs = "bf16_pairs";
  const bool dp = host::cpuHasAvx512Bf16();
  const std::vector<int> Ks = {1, 2, 3, 16, 17, 33, 200};
  for (const std::string isa : {"avx2", "avx512"}) {
    compiledMatchesInterpreter(isa, {{"local_lanes", "1"}}, 3, 16, false, false, {3, 33}, pairs);
    compiledMatchesInterpreter(isa, {{"max_unrolled_tile_elements", "0"}}, 3, 16, false, false, {3, 33}, pairs);
  }
  for (auto [M, N, kOuter, bf16B] : {std::tuple{5, 37, false, false},
                                     {5, 37, true, true},
                                     {9, 64, true, false},
                                     {1, 100, false, true},
                                     {3, 20, true, true}}) {
    for (const std::string steps : {"auto", "off"}) {
      const std::set<std::string> forms =
          compiledMatchesInterpreter("avx512", {{"avx512_bf16", steps}}, M, N, kOuter, bf16B, Ks, pairs);
      EXPECT_EQ(forms.count("outer_product"), 1u) << M << "x" << N;
      EXPECT_EQ(forms.count("vdpbf16ps"), dp && steps == "auto" ? 1u : 0u) << M << "x" << N << " " << steps;
    }
    compiledMatchesInterpreter("avx2", {}, M, N, kOuter, bf16B, Ks, pairs);
  }
  if (!dp)
    testhost::sayNotRun("Bf16Pairs steps on VDPBF16PS",
                        "this host has no AVX512-BF16 (or KILN_HOST_WITHOUT_AVX512 is set)");
}

TEST(Bf16Pairs, ParsesPrintsAndRefusesOtherFlags) {
  const std::string text = dotKernel(8, kM, kN, false, false, false, "bf16_pairs");
  auto k = parse(text);
  ASSERT_TRUE(k);
  const std::string printed = ir::print(*k);
  EXPECT_NE(printed.find("contract [k] bf16_pairs"), std::string::npos) << printed;
  auto again = parse(printed);
  ASSERT_TRUE(again);
  EXPECT_EQ(ir::print(*again), printed);
  const size_t at = text.find("bf16_pairs");
  for (const auto& [flags, message] : {std::pair{"bf16_pairs fused", "bf16_pairs is an order of its own"},
                                       {"bf16_pairs partitions(2)", "bf16_pairs is an order of its own"},
                                       {"bf16_dot bf16_pairs", "two different orders"},
                                       {"bf16_pairs bf16_pairs", "bf16_pairs is given twice"}}) {
    ir::DiagEngine diag;
    EXPECT_FALSE(ir::parseKernel(text.substr(0, at) + flags + text.substr(at + 10), "x.tile", diag)) << flags;
    EXPECT_NE(diag.str().find(message), std::string::npos) << diag.str();
  }
}

TEST(Bf16Dot, ParsesPrintsAndRefusesOtherFlags) {
  auto k = parse(dotKernel(8));
  ASSERT_TRUE(k);
  const std::string printed = ir::print(*k);
  EXPECT_NE(printed.find("contract [k] bf16_dot"), std::string::npos) << printed;
  auto again = parse(printed);
  ASSERT_TRUE(again);
  EXPECT_EQ(ir::print(*again), printed);
  ir::DiagEngine diag;
  std::string text = dotKernel(8);
  const size_t at = text.find("bf16_dot");
  EXPECT_FALSE(ir::parseKernel(text.substr(0, at) + "bf16_dot fused" + text.substr(at + 8), "x.tile", diag));
  EXPECT_NE(diag.str().find("bf16_dot is an order of its own"), std::string::npos) << diag.str();
}

}  // namespace
}  // namespace kiln
