// Attention (flash-style, online softmax) written in the DSL: one program per (batch, KV head,
// query block) whose rows are the group's query heads x the block's queries (stack_heads), or
// one program per (batch, query head, query block) reading KV head h / (Hq / Hkv).
// Expects: a shape with Hq a multiple of Hkv; block sizes of at least 1.
// Guarantees: a verified kernel with views q [B,Hq,Q,D], k [B,Hkv,K,D], v [B,Hkv,K,Dv] (of kv_elem),
// o [B,Hq,Q,Dv] (in that order), or diagnostics. Rows with no valid key output zeros.
// With split_blocks, two phases and three workspaces (part_m, part_l, part_acc).
#pragma once

#include <cstdint>
#include <optional>

#include "kiln/dsl.h"

namespace kiln::kernels {

struct AttentionShape {
  int64_t B = 1, Hq = 1, Hkv = 1, Q = 1, K = 1, D = 1, Dv = 1;
};

// Where K and V live (docs/kernels.md, "KV caches"). None: K and V of exactly K keys per
// sequence. Dense: a cache of capacity K positions per sequence, k [B,Hkv,K,D], plus
// `lens: view<i32>[B] in [0, K]`, each sequence's length at launch. Paged: `pages` pages of
// `page` positions, k [pages,Hkv,page,D], `lens` and `block_table: view<i32>[B, ceil(K/page)]
// in [0, pages-1]` (position t of sequence b is row t % page of page block_table[b][t / page]).
// The Q queries of a sequence are its last Q positions (causal: bottom-right aligned per
// sequence). Parameters: q, k, v, lens, [block_table,] [cu_seqlens,] o.
enum class KvCache { None, Dense, Paged };

struct AttentionOptions {
  int64_t block_q = 1;          // BQ: query rows per program
  int64_t block_k = 16;         // BK: keys per step of the KV loop
  bool causal = false;          // bottom-right aligned: key j is visible to query i iff j <= i + K - Q
  std::optional<double> scale;  // default 1/sqrt(D)
  // The Hq/Hkv query heads of one KV head are rows of one program (dims g x m), so K and V are
  // read once per group; false: one program per query head (the seed's kernel).
  bool stack_heads = true;
  // mma steps are fused multiply-adds rounded once (MmaPolicy::fused); false: MUL then ADD.
  bool fused = true;
  // Both mmas (q.k^T and p.v) in the bf16 pairs order (MmaPolicy::bf16_pairs, docs/ir.md): q,
  // k, the probabilities p and v rounded to bf16 as the order's operands, products of pairs
  // added as AVX512-BF16's VDPBF16PS adds them; `fused` does not apply. A different, equally
  // defined result (the probabilities' rounding is its own: the sum l adds them unrounded).
  bool bf16_pairs = false;
  // Split KV (stacked heads only): chunks of this many KV blocks are processed by programs of
  // their own, whose partials a second phase merges in chunk order; 0 (or >= the number of
  // blocks): no split. The result depends on this number, never on the thread count.
  int64_t split_blocks = 0;
  // With a split: value columns (dv) per program of the merge (0: all Dv, one program per row
  // block). Each program recomputes its rows' chunk maxima, factors and sums in the same order,
  // so the bits do not depend on it; more programs spread the merge (a GPU's SMs).
  int64_t merge_columns = 0;
  // Stacked heads: the queries of the block (dim m) along the vector lanes instead of the keys
  // (dim n): scores are [g, n, m] and the accumulator [g, dv, m]; each key's K row is read as
  // scalars broadcast over the queries, Q is transposed once per program, row max and sum are
  // vertical, and a ragged K block costs no padding lanes. Same IR results (dims are named).
  bool queries_in_lanes = false;
  // q.k^T in the partitioned order partitions(P) (docs/ir.md, MMA): with D a multiple of P and
  // of the vector width, the lane realization runs it as a dot product over D (the `dot`
  // form). 0: ascending D (an outer product over the keys). A different, equally defined result.
  int qk_partitions = 0;
  KvCache kv_cache = KvCache::None;  // stacked heads only
  int64_t page = 16;                 // paged: positions per page (a multiple of block_k)
  int64_t pages = 1;                 // paged: pages in the pool
  // With a KV cache: the queries of all sequences packed, q [Q, Hq, D] and o [Q, Hq, Dv] (Q:
  // their total capacity), `cu_seqlens: view<i32>[B+1] in [0, Q] ascending` after lens (and the block
  // table): sequence b's queries are rows cu[b] .. cu[b+1]-1, its last positions. One program
  // per (token, KV head): block_q 1, no split.
  bool varlen = false;
  // The storage of k and v (docs/ir.md, "16-bit views"): loads convert to f32 exactly, so the
  // kernel computes in f32 as ever; a different input, the same arithmetic.
  dsl::FloatElem kv_elem = dsl::FloatElem::F32;
  // The storage of o: a 16-bit o stores each f32 result rounded to nearest even (e.g. the next
  // GEMM's 16-bit A).
  dsl::FloatElem out_elem = dsl::FloatElem::F32;
};

dsl::BuildResult attention(const AttentionShape& shape, const AttentionOptions& options = {});

// The score scale the kernel uses: options.scale (or 1/sqrt(D)) rounded to f32.
float attentionScale(const AttentionShape& shape, const AttentionOptions& options = {});

}  // namespace kiln::kernels
