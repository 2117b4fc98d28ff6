// The hand-written peers: an online-softmax attention in AVX-512 or AVX2 intrinsics (the
// "native reference": how fast hand-tuned code gets), plain C++ loops compiled with
// -O3 -march=native (what a user writes first), and the vector helpers the other peers and the
// machine probes share (a row softmax, an FMA peak loop, a read-bandwidth loop).
// Expects: row-major views q [B,Hq,Q,D], k [B,Hkv,K,D], v [B,Hkv,K,Dv], o [B,Hq,Q,Dv] with
// Hq a multiple of Hkv; q and o f32, k and v f32 or 16-bit (bf16 or IEEE f16 bits, each
// element widened to f32 exactly on load). Guarantees: o written in full; rows with no visible
// key are zeros.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace kiln::peers {

// How K and V are stored: f32 (k, v) or 16-bit bits (k16, v16).
enum class KvStorage : int { F32, BF16, F16 };

struct AttentionArgs {
  const float* q = nullptr;
  const float* k = nullptr;  // KvStorage::F32
  const float* v = nullptr;
  const uint16_t* k16 = nullptr;  // KvStorage::BF16 / F16
  const uint16_t* v16 = nullptr;
  KvStorage kv = KvStorage::F32;
  float* o = nullptr;
  int64_t B = 1, Hq = 1, Hkv = 1, Q = 1, K = 1, D = 1, Dv = 1;
  float scale = 1.0f;
  bool causal = false;  // key j visible to query i iff j <= i + K - Q
  // Tuning, set by nativeAttention: software-prefetch K/V rows (decode), worth it only when
  // K/V come from DRAM; from L3 the hardware prefetcher does better alone.
  bool prefetch = false;
};

// The keys query row i sees: [0, visibleKeys(args, i)).
inline int64_t visibleKeys(const AttentionArgs& a, int64_t i) {
  if (!a.causal) return a.K;
  const int64_t n = i + a.K - a.Q + 1;
  return n < 0 ? 0 : (n > a.K ? a.K : n);
}

// One instruction set's kernels (native_avx512.cpp, native_avx2.cpp). Raw pointers only: these
// files are compiled with ISA flags and must not instantiate code other files could share.
struct IsaKernels {
  const char* name;  // "avx512", "avx2"
  int lanes;         // f32 lanes of one vector
  // Attention as independent work items (each writes its own rows of o); scratch holds
  // scratchFloats(args) floats per concurrently running item.
  int64_t (*items)(const AttentionArgs& args);
  int64_t (*scratchFloats)(const AttentionArgs& args);
  void (*item)(const AttentionArgs& args, int64_t item, float* scratch);
  // Row-wise softmax in place over row r's first limits[r] columns (all `cols` when limits is
  // null); the other columns become 0, a row with no column stays all 0.
  void (*softmaxRows)(float* s, int64_t rows, int64_t cols, int64_t ld, const int64_t* limits);
  // `iterations` rounds of independent FMAs on kFmaAccumulators vector accumulators; returns
  // the floating-point operations done (2 per lane per FMA).
  double (*fmaPeak)(int64_t iterations);
  // Sum of n floats read with vector loads (n a multiple of 8 lanes x lanes); keeps the loads.
  float (*readSum)(const float* data, int64_t n);
};

inline constexpr int kFmaAccumulators = 12;

namespace native_detail {
const IsaKernels* avx512Table();  // call only when the CPU has AVX-512 F/BW/VL/DQ
const IsaKernels* avx2Table();    // call only when the CPU has AVX2 and FMA
}  // namespace native_detail

// "auto" picks AVX-512 when the CPU has it, else AVX2; "avx512" / "avx2" force one (null when
// the CPU lacks it).
const IsaKernels* isaKernels(const std::string& which = "auto");

// Runs work items on `threads` threads (a oneTBB arena of that size, created once); with one
// thread, items run on the calling thread.
class ThreadTeam {
 public:
  explicit ThreadTeam(int threads);
  ~ThreadTeam();
  int threads() const { return threads_; }
  // Calls fn(item, scratch) for every item in [0, n); scratch is a per-thread buffer of at
  // least scratch_floats floats, 64-byte aligned.
  template <class Fn>
  void forEach(int64_t n, int64_t scratch_floats, Fn&& fn) {
    run(
        n, scratch_floats, [](void* f, int64_t i, float* s) { (*static_cast<Fn*>(f))(i, s); }, &fn);
  }

 private:
  void run(int64_t n, int64_t scratch_floats, void (*call)(void*, int64_t, float*), void* fn);
  struct Arena;
  int threads_;
  std::unique_ptr<Arena> arena_;
};

// The native reference: every item of `isa` through `team`.
void nativeAttention(const IsaKernels& isa, ThreadTeam& team, const AttentionArgs& args);

// Plain loops (plain_loops.cpp): per query row, scores for every key, the row max, exp and sum,
// then the weighted sum of V. One item per (b, query head). Compiled twice: -O3 -march=native
// (plainNative), and the same without AVX-512 (plainAvx2: `-march=native -mno-avx512f`, the
// code a user's compiler makes on an AVX2 machine; kiln peers --isa avx2).
struct PlainKernels {
  const char* flags;  // how the file was compiled
  int64_t (*items)(const AttentionArgs& args);
  int64_t (*scratch_floats)(const AttentionArgs& args);
  void (*item)(const AttentionArgs& args, int64_t item, float* scratch);
  // Plain GEMM loops: row i of C[M,N] = A[M,K] . B[K,N] (row-major), i-k-j order.
  void (*gemm_row)(const float* a, const float* b, float* c, int64_t N, int64_t K, int64_t i);
};
const PlainKernels& plainNative();
const PlainKernels& plainAvx2();

}  // namespace kiln::peers
