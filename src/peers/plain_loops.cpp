// Plain C++ loops: the attention a user writes first, compiled the way a user compiles it
// (-O3 -march=native -ffp-contract=fast, set for this file in CMakeLists.txt; plain_loops_avx2.cpp
// compiles it again without AVX-512, in its own namespace and table): per query row,
// every visible key's score, the row max, exp and sum, then the weighted sum of V rows.
// One work item per (batch, query head); no GQA sharing, no blocking, no intrinsics.
// Raw pointers and C math only (see native_kernel.h on why no shared templates here).
#include <math.h>

#include <cstdint>

#include "peers/native.h"

#ifndef KILN_PLAIN_NAMESPACE
#define KILN_PLAIN_NAMESPACE plain_native
#define KILN_PLAIN_TABLE plainNative
#define KILN_PLAIN_FLAGS "-O3 -march=native"
#endif

namespace kiln::peers {
namespace KILN_PLAIN_NAMESPACE {

int64_t plainItems(const AttentionArgs& a) {
  return a.B * a.Hq;
}

int64_t plainScratchFloats(const AttentionArgs& a) {
  return a.K + 16;
}

void plainItem(const AttentionArgs& a, int64_t item, float* scores) {
  const int64_t b = item / a.Hq, h = item % a.Hq, kvh = h / (a.Hq / a.Hkv);
  const float* k = a.k + (b * a.Hkv + kvh) * a.K * a.D;
  const float* v = a.v + (b * a.Hkv + kvh) * a.K * a.Dv;
  for (int64_t i = 0; i < a.Q; ++i) {
    const float* q = a.q + ((b * a.Hq + h) * a.Q + i) * a.D;
    float* o = a.o + ((b * a.Hq + h) * a.Q + i) * a.Dv;
    int64_t n = a.K;
    if (a.causal) {
      n = i + a.K - a.Q + 1;
      if (n < 0) n = 0;
      if (n > a.K) n = a.K;
    }
    float mx = -INFINITY;
    for (int64_t j = 0; j < n; ++j) {
      float dot = 0.0f;
      for (int64_t d = 0; d < a.D; ++d) dot += q[d] * k[j * a.D + d];
      scores[j] = dot * a.scale;
      if (scores[j] > mx) mx = scores[j];
    }
    float sum = 0.0f;
    for (int64_t j = 0; j < n; ++j) {
      scores[j] = expf(scores[j] - mx);
      sum += scores[j];
    }
    for (int64_t dv = 0; dv < a.Dv; ++dv) o[dv] = 0.0f;
    for (int64_t j = 0; j < n; ++j)
      for (int64_t dv = 0; dv < a.Dv; ++dv) o[dv] += scores[j] * v[j * a.Dv + dv];
    const float inv = n > 0 ? 1.0f / sum : 0.0f;
    for (int64_t dv = 0; dv < a.Dv; ++dv) o[dv] *= inv;
  }
}

void plainGemmRow(const float* a, const float* b, float* c, int64_t N, int64_t K, int64_t i) {
  float* ci = c + i * N;
  for (int64_t j = 0; j < N; ++j) ci[j] = 0.0f;
  for (int64_t k = 0; k < K; ++k) {
    const float aik = a[i * K + k];
    const float* bk = b + k * N;
    for (int64_t j = 0; j < N; ++j) ci[j] += aik * bk[j];
  }
}

}  // namespace KILN_PLAIN_NAMESPACE

const PlainKernels& KILN_PLAIN_TABLE() {
  static const PlainKernels table{KILN_PLAIN_FLAGS, KILN_PLAIN_NAMESPACE::plainItems,
                                  KILN_PLAIN_NAMESPACE::plainScratchFloats, KILN_PLAIN_NAMESPACE::plainItem,
                                  KILN_PLAIN_NAMESPACE::plainGemmRow};
  return table;
}

}  // namespace kiln::peers
