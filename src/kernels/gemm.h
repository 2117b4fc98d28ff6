// GEMM written in the DSL: C[M,N] = A[M,K] · B, with B stored [K,N] or, with trans_b, [N,K].
// Expects: M, N >= 1, K >= 0, tile sizes >= 1 (any of M, N, K may be ragged).
// Guarantees: a verified kernel with views a, b, c (in that order), or diagnostics. One program
// per output tile; the K loop carries the accumulator; loads past the edges read 0.
#pragma once

#include <cstdint>

#include "kiln/dsl.h"

namespace kiln::kernels {

struct GemmShape {
  int64_t M = 1, N = 1, K = 1;
};

// The most outputs (TM x TN) one program of the library's GEMM holds.
constexpr int64_t kMaxGemmTileOutputs = 16384;

struct GemmTiles {
  int64_t TM = 16, TN = 16, TK = 16;
};

// fused: every mma step one fused multiply-add rounded once (MmaPolicy::fused); false: MUL then ADD.
// runtime_rows: the row count of A and C comes with each launch, `rows: i64 in [0, M]` after c;
// rows of c from it on are not written (a partial last tile runs row by row).
// a_elem, b_elem: the storage of A and B (f32, or 16-bit weights and activations: docs/ir.md,
// "16-bit views"); C is f32. Accumulation is f32 in the same order either way.
// split_k > 1 (not with runtime_rows): K in that many chunks of whole K steps, each chunk's
// products a program of its own (acc from 0, K ascending) storing its partial tile in a
// workspace `c_part` [split_k, M, N]; a second phase sums the partials in chunk order,
// c = ((0 + p0) + p1) + ... — a different, equally defined result.
// bf16_dot: the mma in the bf16 dot order (docs/ir.md, MMA; `fused` is then not used): each K
// step's tile contracts in blocks of 32, which AVX-512 code on an AMX host runs on AMX tiles.
// bf16_pairs: the mma in the bf16 pairs order (docs/ir.md, MMA): one chain over each K step's
// pairs, which AVX-512 code on a CPU with AVX512-BF16 runs one VDPBF16PS per pair.
dsl::BuildResult gemm(const GemmShape& shape, const GemmTiles& tiles = {}, bool trans_b = false, bool fused = true,
                      bool runtime_rows = false, dsl::FloatElem a_elem = dsl::FloatElem::F32,
                      dsl::FloatElem b_elem = dsl::FloatElem::F32, int64_t split_k = 1, bool bf16_dot = false,
                      bool bf16_pairs = false);

// The mma's order (docs/ir.md, MMA), as far as the tile rule cares.
enum class GemmOrder { Ascending, Bf16Dot, Bf16Pairs };

// The CPU the rule sizes tiles for: programs run on `threads` threads; one core's L1 data cache
// (0: taken as 32 KiB); whether a bf16 order's steps run on VDPBF16PS (`dpbf16`) and the bf16
// dot order's mmas on AMX tiles (`amx`) there (plan::dpbf16Steps, plan::amxTiles).
struct GemmCpu {
  int64_t threads = 1;
  int64_t l1d_bytes = 0;
  bool dpbf16 = false;
  bool amx = false;
};

// The library's tiles for a shape on a CPU; `rows` > 0 fixes TM (a caller that knows its row
// counts, e.g. runtime rows; rows >= M <= 4 is the skinny rule below), the rule gives the rest:
// - A skinny GEMM (M <= 4, B as K x N: decode's projections) is bound by streaming B: B's rows
//   are split into as few strips as give every thread one and keep a strip's accumulators
//   within half of L1, K in steps of 8, so that each program reads B row after row.
// - Else up to 128 rows (M split evenly into as few row tiles as that allows; fewer rows where
//   the tiles would not give each thread one) x 64 columns (four 16-lane vectors, eight 8-lane
//   ones), K in steps of up to 128: B's strip is read once per 128 rows and the accumulators
//   once per 128 K. 1 row takes 256 columns and 2 rows 128. The bf16 pairs order on VDPBF16PS
//   with 64 rows or more takes 128 columns (B's strip as pair words, 32 KiB at 128 K); the bf16
//   dot order on AMX with B as N x K takes 128 columns and K steps of up to 512.
GemmTiles defaultGemmTiles(const GemmShape& shape, bool trans_b = false, GemmOrder order = GemmOrder::Ascending,
                           const GemmCpu& cpu = {}, int64_t rows = 0);
// On a GPU of `multiprocessors` SMs (the block realization: a program is a thread block of up
// to 256 threads, each with a register tile of at most 8 x 8 outputs): the largest square tile
// of 128, 64 or 32 outputs a side that still gives a block per multiprocessor (else 32), with
// K steps of 8 (128) or 16; with M <= 16 rows, all of them (a power of two) x 32 columns with
// K steps of 32 x rows up to 128 (64 for 16 rows).
GemmTiles defaultGpuGemmTiles(const GemmShape& shape, int64_t multiprocessors);
// On such a GPU: K chunks for a skinny GEMM (M <= 16) whose output tiles are fewer than 4 per
// multiprocessor (it streams B; more blocks keep more of it in flight): enough for 4 blocks per
// multiprocessor, each chunk at least 4 K steps; else 1.
int64_t defaultGpuSplitK(const GemmShape& shape, const GemmTiles& tiles, int64_t multiprocessors);

}  // namespace kiln::kernels
