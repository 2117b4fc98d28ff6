// The 16-bit storage conversions of docs/ir.md ("16-bit views", src/host/storage.h) on every
// input: all 2^16 half and bfloat16 patterns, all 2^32 float patterns. The interpreter's integer
// definitions against x86's F16C instructions (`vcvtph2ps`, `vcvtps2ph` with round to nearest
// even), which compiled code may use only because they agree here on every input; and against
// AVX-512 BF16's `vcvtneps2bf16` where the CPU has it, to record where that instruction differs
// (it treats subnormal inputs as zero), so compiled code must not use it unguarded. Then Kiln's
// compiled loads and stores of view<f16> / view<bf16> (isa=avx2 and, where the CPU has it,
// avx512) against the same definitions on every input. Heavy: ~1 minute.
#include <gtest/gtest.h>
#include <immintrin.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <thread>
#include <vector>

#include "driver/compile.h"
#include "host/storage.h"
#include "host_isa.h"
#include "ir/diag.h"
#include "ir/parser.h"
#include "plan/knobs.h"
#include "runtime/runtime.h"

namespace {

using kiln::host::bf16ToF32;
using kiln::host::bitsOf;
using kiln::host::f16ToF32;
using kiln::host::f32ToBf16;
using kiln::host::f32ToF16;
using kiln::host::floatOf;

bool isNan16(uint16_t h) {
  return (h & 0x7C00u) == 0x7C00u && (h & 0x3FFu) != 0;
}

// Runs body(lo, hi) over [0, 2^32) in two halves on two threads; sums what they return.
template <class F>
uint64_t overAllFloats(F body) {
  std::atomic<uint64_t> total{0};
  std::vector<std::thread> ts;
  for (uint64_t t = 0; t < 2; ++t) ts.emplace_back([&, t] { total += body(t << 31, (t + 1) << 31); });
  for (auto& th : ts) th.join();
  return total;
}

__attribute__((target("f16c"))) float hwF16ToF32(uint16_t h) {
  return _cvtsh_ss(h);
}

// 8 floats from bits b, b+1, ..., b+7 to halves, round to nearest even.
__attribute__((target("avx2,f16c"))) void hwF32ToF16x8(uint32_t b, uint16_t out[8]) {
  const __m256i bits =
      _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(b)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  const __m128i h = _mm256_cvtps_ph(_mm256_castsi256_ps(bits), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), h);
}

__attribute__((target("avx512f,avx512bf16,avx512vl,avx512bw"))) void hwF32ToBf16x16(uint32_t b, uint16_t out[16]) {
  const __m512i bits = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(b)),
                                        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
  const __m256bh h = _mm512_cvtneps_pbh(_mm512_castsi512_ps(bits));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), reinterpret_cast<const __m256i&>(h));
}

TEST(Storage, HalfToFloatOnEveryHalfMatchesF16c) {
  int64_t differ = 0;
  for (uint32_t h = 0; h < 65536; ++h) {
    const float mine = f16ToF32(static_cast<uint16_t>(h));
    const float hw = hwF16ToF32(static_cast<uint16_t>(h));
    if (bitsOf(mine) != bitsOf(hw)) {
      if (++differ < 5)
        ADD_FAILURE() << std::hex << "half 0x" << h << ": 0x" << bitsOf(mine) << " against F16C 0x" << bitsOf(hw);
    }
  }
  EXPECT_EQ(differ, 0);
  // Spot values: the largest half, the smallest subnormal, -0, inf.
  EXPECT_EQ(f16ToF32(0x7BFF), 65504.0f);
  EXPECT_EQ(f16ToF32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(bitsOf(f16ToF32(0x8000)), 0x80000000u);
  EXPECT_EQ(f16ToF32(0x7C00), INFINITY);
}

TEST(Storage, EveryHalfAndBfloatSurvivesTheRoundTrip) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint16_t x = static_cast<uint16_t>(h);
    if (isNan16(x))
      EXPECT_EQ(f32ToF16(f16ToF32(x)), x | 0x0200u) << std::hex << h;  // made quiet
    else
      EXPECT_EQ(f32ToF16(f16ToF32(x)), x) << std::hex << h;
    const bool nanB = (x & 0x7F80u) == 0x7F80u && (x & 0x7Fu) != 0;
    EXPECT_EQ(bitsOf(bf16ToF32(x)), h << 16);
    EXPECT_EQ(f32ToBf16(bf16ToF32(x)), nanB ? (x | 0x0040u) : x) << std::hex << h;
  }
}

TEST(Storage, FloatToHalfOnEveryFloatMatchesF16c) {
  const uint64_t differ = overAllFloats([](uint64_t lo, uint64_t hi) {
    uint64_t bad = 0;
    uint16_t hw[8];
    for (uint64_t b = lo; b < hi; b += 8) {
      hwF32ToF16x8(static_cast<uint32_t>(b), hw);
      for (int i = 0; i < 8; ++i) bad += f32ToF16(floatOf(static_cast<uint32_t>(b + i))) != hw[i];
    }
    return bad;
  });
  EXPECT_EQ(differ, 0u);
  EXPECT_EQ(f32ToF16(65504.0f), 0x7BFF);
  EXPECT_EQ(f32ToF16(65519.99f), 0x7BFF);
  EXPECT_EQ(f32ToF16(65520.0f), 0x7C00);               // overflow to inf
  EXPECT_EQ(f32ToF16(std::ldexp(1.0f, -25)), 0x0000);  // a tie: to even, zero
  EXPECT_EQ(f32ToF16(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(f32ToF16(std::ldexp(3.0f, -25)), 0x0002);   // 1.5 units: a tie, to even 2
  EXPECT_EQ(f32ToF16(-std::ldexp(1.0f, -14)), 0x8400);  // the smallest normal
}

TEST(Storage, FloatToBfloatOnEveryFloat) {
  // Against an independent definition: the nearest bfloat16 value, ties to the even pattern,
  // computed from the two neighbours in double; NaN quieted; the overflow threshold the bits give.
  const uint64_t differ = overAllFloats([](uint64_t lo, uint64_t hi) {
    uint64_t bad = 0;
    for (uint64_t b = lo; b < hi; ++b) {
      const uint32_t u = static_cast<uint32_t>(b);
      const float x = floatOf(u);
      const uint16_t got = f32ToBf16(x);
      uint16_t want;
      if (std::isnan(x)) {
        want = static_cast<uint16_t>((u >> 16) | 0x40u);
      } else {
        const uint16_t down = static_cast<uint16_t>(u >> 16);  // toward zero
        const uint16_t up = static_cast<uint16_t>(down + 1);   // away from zero (may be inf)
        const double d = std::fabs(static_cast<double>(x));
        const double dd = std::fabs(static_cast<double>(bf16ToF32(down)));
        const double du =
            (up & 0x7FFFu) == 0x7F80u ? std::ldexp(1.0, 128) : std::fabs(static_cast<double>(bf16ToF32(up)));
        if ((u & 0xFFFFu) == 0)
          want = down;
        else if (d - dd < du - d)
          want = down;
        else if (d - dd > du - d)
          want = up;
        else
          want = (down & 1u) ? up : down;
      }
      bad += got != want;
    }
    return bad;
  });
  EXPECT_EQ(differ, 0u);
}

TEST(Storage, AvxBf16InstructionDiffersOnlyOnSubnormals) {
  if (!__builtin_cpu_supports("avx512bf16")) GTEST_SKIP() << "this CPU has no AVX-512 BF16";
  std::atomic<uint64_t> subnormal{0};
  const uint64_t differ = overAllFloats([&](uint64_t lo, uint64_t hi) {
    uint64_t bad = 0, sub = 0;
    uint16_t hw[16];
    for (uint64_t b = lo; b < hi; b += 16) {
      hwF32ToBf16x16(static_cast<uint32_t>(b), hw);
      for (int i = 0; i < 16; ++i) {
        const uint32_t u = static_cast<uint32_t>(b + i);
        if (f32ToBf16(floatOf(u)) == hw[i]) continue;
        ++bad;
        if ((u & 0x7F800000u) == 0 && (u & 0x7FFFFFu) != 0) ++sub;
      }
    }
    subnormal += sub;
    return bad;
  });
  // Every difference is a subnormal input (the instruction treats it as zero); none elsewhere.
  EXPECT_EQ(differ, subnormal.load());
  EXPECT_GT(differ, 0u) << "vcvtneps2bf16 kept subnormals here: compiled code could use it";
  RecordProperty("differences", std::to_string(differ));
  std::printf("vcvtneps2bf16 differs from round-to-nearest-even on %llu inputs, all subnormal\n",
              static_cast<unsigned long long>(differ));
}

// One compiled kernel converting a block of N elements: f32 -> f16 and bf16 stores, and f16 /
// bf16 -> f32 loads (of the first 65536 elements of two 16-bit inputs).
constexpr int64_t kBlock = int64_t{1} << 22;
const char* kConvert = R"(kernel @convert(%x: view<f32>[4194304], %h: view<f16>[4194304], %b: view<bf16>[4194304],
                 %hin: view<f16>[65536], %bin: view<bf16>[65536], %hout: view<f32>[65536], %bout: view<f32>[65536]) {
  parallel (%p) in (4096) {
    %o = mul %p, 1024 : i64
    %t = load %x[%o] as [e:1024] fill 0
    store %t, %h[%o] as [e:1024]
    store %t, %b[%o] as [e:1024]
  }
  parallel (%q) in (64) {
    %o = mul %q, 1024 : i64
    %a = load %hin[%o] as [e:1024] fill 0
    store %a, %hout[%o] as [e:1024]
    %c = load %bin[%o] as [e:1024] fill 0
    store %c, %bout[%o] as [e:1024]
  }
})";

void compiledConversionsOnEveryInput(const std::string& isa) {
  kiln::ir::DiagEngine diag;
  auto kernel = kiln::ir::parseKernel(kConvert, "convert.tile", diag);
  ASSERT_TRUE(kernel) << diag.str();
  kiln::plan::Knobs knobs;
  ASSERT_FALSE(knobs.set("isa", isa));
  kiln::driver::Compilation c;
  ASSERT_FALSE(kiln::driver::compile(*kernel, knobs, c, kiln::driver::Stage::Obj)) << isa;
  if (!kiln::testhost::runsHere(isa, "Storage compiled conversions isa=" + isa)) return;  // compiled only
  std::unique_ptr<kiln::runtime::LoadedKernel> loaded;
  ASSERT_FALSE(kiln::driver::load(c.object, *kernel, isa, 1, loaded)) << isa;
  std::vector<float> x(kBlock), hout(65536), bout(65536);
  std::vector<uint16_t> h(kBlock), b(kBlock), hin(65536), bin(65536);
  for (uint32_t i = 0; i < 65536; ++i) hin[i] = bin[i] = static_cast<uint16_t>(i);
  auto view = [](auto& v) { return kiln::runtime::Arg::view(v.data(), static_cast<int64_t>(v.size() * sizeof(v[0]))); };
  uint64_t badH = 0, badB = 0, badLoad = 0;
  for (uint64_t base = 0; base < (uint64_t{1} << 32); base += kBlock) {
    for (int64_t i = 0; i < kBlock; ++i) x[i] = floatOf(static_cast<uint32_t>(base + i));
    const std::vector<kiln::runtime::Arg> args = {view(x),   view(h),    view(b),   view(hin),
                                                  view(bin), view(hout), view(bout)};
    auto e = loaded->launch(args);
    ASSERT_FALSE(e) << *e;
    for (int64_t i = 0; i < kBlock; ++i) {
      badH += h[i] != f32ToF16(x[i]);
      badB += b[i] != f32ToBf16(x[i]);
    }
    if (base == 0)
      for (uint32_t i = 0; i < 65536; ++i) {
        badLoad += bitsOf(hout[i]) != bitsOf(f16ToF32(static_cast<uint16_t>(i)));
        badLoad += bitsOf(bout[i]) != bitsOf(bf16ToF32(static_cast<uint16_t>(i)));
      }
  }
  EXPECT_EQ(badH, 0u) << isa << ": f32 -> f16 stores differing from the definition";
  EXPECT_EQ(badB, 0u) << isa << ": f32 -> bf16 stores differing from the definition";
  EXPECT_EQ(badLoad, 0u) << isa << ": f16 / bf16 loads differing from the definition";
}

TEST(Storage, CompiledConversionsOnEveryInputAvx2) {
  compiledConversionsOnEveryInput("avx2");
}

TEST(Storage, CompiledConversionsOnEveryInputAvx512) {
  compiledConversionsOnEveryInput("avx512");
}

}  // namespace
