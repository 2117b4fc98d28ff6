// GEMM in the DSL; see gemm.h for the contract.
#include "kernels/gemm.h"

#include <algorithm>

namespace kiln::kernels {

using namespace kiln::dsl;

GemmTiles defaultGemmTiles(const GemmShape& s, bool trans_b, GemmOrder order, const GemmCpu& cpu, int64_t rows) {
  auto up16 = [](int64_t n) { return (n + 15) / 16 * 16; };
  auto cdiv = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
  // Decode-like: B's rows read whole or in few strips, so that the hardware prefetcher streams
  // them (1x5632x2048 on an Intel Xeon, 1 thread: 28 GB/s, 0.66x the time of 1x512x8, which
  // reads 8 rows' 2 KB at a time; two threads, half a row each: 62 GB/s, 0.60x of 1x256x32).
  // The accumulators are loaded and stored every K step: within half of L1 (4x4096x8, 64 KB of
  // them, took 1.39x the time of 4x512x8).
  if ((rows <= 0 || rows >= s.M) && s.M <= 4 && !trans_b) {
    const int64_t budget = (cpu.l1d_bytes > 0 ? cpu.l1d_bytes : 32768) / 2 / 4;  // f32 accumulators
    const int64_t strips = std::max({cpu.threads, (s.M * s.N + budget - 1) / budget, int64_t{1}});
    const int64_t tn = std::min(up16((s.N + strips - 1) / strips), kMaxGemmTileOutputs / s.M);
    return GemmTiles{s.M, tn, std::clamp<int64_t>(s.K, 1, 8)};
  }
  // Rows: up to 128 a tile, M split evenly; 64 columns, K steps of 128 (measured against the
  // 64 x 64 x 64 of before and other tiles, AVX-512 and AVX2 code: docs/kernels.md, gemm). The
  // columns and K step for a tile of `tm` rows:
  auto widths = [&](int64_t tm) {
    int64_t tn = tm == 1 ? 256 : tm == 2 ? 128 : 64;
    int64_t tk = 128;
    // B's strips as pair words (docs/backend.md) fit L1 at 128 columns x 128 K: the bf16 pairs
    // order on VDPBF16PS takes 128 columns from 64 rows (docs/kernels.md, gemm).
    if (order == GemmOrder::Bf16Pairs && cpu.dpbf16 && tm >= 64) tn = 128;
    if (order == GemmOrder::Bf16Dot && cpu.amx && trans_b) {
      tn = 128;
      tk = 512;
    }
    return std::pair{std::min<int64_t>(tn, up16(s.N)), tk};
  };
  int64_t tm = rows > 0 ? std::min(rows, s.M) : cdiv(s.M, cdiv(s.M, 128));
  if (rows <= 0)  // fewer rows while the tiles (at the columns those rows take) leave a thread idle
    while (tm > 8 && cdiv(s.M, tm) * cdiv(s.N, widths(tm).first) < cpu.threads) tm = cdiv(tm, 2);
  const auto [tn, tk] = widths(tm);
  return GemmTiles{tm, tn, std::clamp<int64_t>(s.K, 1, tk)};
}

GemmTiles defaultGpuGemmTiles(const GemmShape& s, int64_t multiprocessors) {
  if (s.M <= 16) {
    // Skinny (decode-like): bound by streaming B. Every row of A in one tile, a strip of 32
    // columns per block, and long K steps, so that each trip's loads are many and in flight
    // together (a trip per 16 K was latency-bound: 127 us for 4x4096x4096 on an H200); at most
    // 32 of a trip's B elements per thread (32 x TM threads), 128 K, and the stages within
    // shared memory (64 K for 16 rows).
    int64_t tm = 1;
    while (tm < s.M) tm *= 2;
    return GemmTiles{tm, 32, std::min<int64_t>(32 * tm, tm <= 8 ? 128 : 64)};
  }
  for (int64_t side : {128, 64, 32}) {
    const int64_t blocks = ((s.M + side - 1) / side) * ((s.N + side - 1) / side);
    if (blocks >= multiprocessors || side == 32) return GemmTiles{side, side, side == 128 ? 8 : 16};
  }
  return GemmTiles{32, 32, 16};
}

int64_t defaultGpuSplitK(const GemmShape& s, const GemmTiles& t, int64_t multiprocessors) {
  if (s.M > 16) return 1;
  const int64_t tiles = ((s.M + t.TM - 1) / t.TM) * ((s.N + t.TN - 1) / t.TN);
  const int64_t nK = (s.K + t.TK - 1) / t.TK;
  const int64_t want = 4 * multiprocessors;
  if (tiles >= want) return 1;
  return std::max<int64_t>(1, std::min((want + tiles - 1) / tiles, nK / 4));
}

BuildResult gemm(const GemmShape& s, const GemmTiles& t, bool trans_b, bool fused, bool runtime_rows, FloatElem a_elem,
                 FloatElem b_elem, int64_t split_k, bool bf16_dot, bool bf16_pairs) {
  KernelBuilder kb(trans_b ? "gemm_tn" : "gemm");
  if (s.M < 1 || s.N < 1 || s.K < 0 || t.TM < 1 || t.TN < 1 || t.TK < 1) {
    kb.error("bad-shape", "gemm needs M, N >= 1, K >= 0 and tile sizes >= 1");
    return kb.finish();
  }
  View a = kb.view("a", {s.M, s.K}, a_elem);
  View b = trans_b ? kb.view("b", {s.N, s.K}, b_elem) : kb.view("b", {s.K, s.N}, b_elem);
  View c = kb.view("c", {s.M, s.N});
  const int64_t nM = (s.M + t.TM - 1) / t.TM, nN = (s.N + t.TN - 1) / t.TN, nK = (s.K + t.TK - 1) / t.TK;
  MmaFlags flags = fused ? fusedMma : MmaFlags{};
  if (bf16_dot) flags = MmaFlags{.bf16_dot = true};
  if (bf16_pairs) flags = MmaFlags{.bf16_pairs = true};

  // The K loop of one output tile at (m0, n0): tiles of A and B, K ascending from step lo to hi.
  auto accumulate = [&](Idx m0, Idx n0, IdxArg lo, IdxArg hi) {
    Carry acc0{"acc", kb.zeros({{"m", t.TM}, {"n", t.TN}})};
    auto [acc] = kb.serial("kk", lo, hi, {acc0}, [&](Idx kk, Tile acc) {
      Idx k0 = (kk * t.TK).as("k0");
      Tile at = load(a, {m0, k0}, {{"m", t.TM}, {"k", t.TK}}).as("at");
      Tile bt = trans_b ? load(b, {n0, k0}, {{"n", t.TN}, {"k", t.TK}}) : load(b, {k0, n0}, {{"k", t.TK}, {"n", t.TN}});
      return mma(at, bt.as("bt"), acc, {"k"}, flags).as("acc_next");
    });
    return acc;
  };

  if (runtime_rows) {
    // Rows at launch: the row tiles of `rows` rows. Every tile is computed whole (the rows of a
    // partial last tile past `rows` read A's rows there, or 0 past M; each output row depends on
    // its own A row only). A whole tile is stored as a tile; a partial one goes to a workspace
    // slot of its column tile and from there row by row into C, so that rows of C from `rows`
    // on are never written while B is still read once per tile.
    Idx rows = kb.scalarI64("rows", Range{0, s.M});
    View part = kb.workspace("c_part", {nN, t.TM, t.TN});
    kb.parallel({kb.runtimeAxis("i", rows, t.TM), {"j", nN}}, [&](Idx i, Idx j) {
      Idx m0 = (i * t.TM).as("m0");
      Idx n0 = (j * t.TN).as("n0");
      Idx left = (rows - m0).as("rows_left");            // >= 1 in the domain
      Idx whole = minIndex(left / t.TM, 1).as("whole");  // 1: a full tile
      Idx tail = (left - whole * left).as("tail_rows");  // its rows otherwise
      Tile acc = accumulate(m0, n0, 0, nK);
      kb.serial("full", 0, whole, [&](Idx) { store(acc, c, {m0, n0}, {{"m", t.TM}, {"n", t.TN}}); });
      kb.serial("partial", 0, minIndex(tail, 1).as("is_partial"), [&](Idx) {
        store(acc, part, {j, 0, 0}, {_, {"m", t.TM}, {"n", t.TN}});
        kb.serial("r", 0, tail, [&](Idx r) {
          Tile row = load(part, {j, r, 0}, {_, _, {"n", t.TN}}).as("c_row");
          store(row, c, {(m0 + r).as("row"), n0}, {_, {"n", t.TN}});
        });
      });
    });
    return kb.finish();
  }

  if (split_k > 1 && nK > 1) {
    // Chunk q walks K steps [q·CB, q·CB + CB), the last one [q·CB, nK): (q+1)/S is 1 only there.
    const int64_t CB = (nK + split_k - 1) / split_k, S = (nK + CB - 1) / CB;
    View part = kb.workspace("c_part", {S, s.M, s.N});
    kb.parallel({{"i", nM}, {"j", nN}, {"q", S}}, [&](Idx i, Idx j, Idx q) {
      Idx m0 = (i * t.TM).as("m0");
      Idx n0 = (j * t.TN).as("n0");
      Idx lo = (q * CB).as("lo");
      Idx hi = ((lo + CB) - ((q + 1) / S) * (S * CB - nK)).as("hi");
      store(accumulate(m0, n0, lo, hi), part, {q, m0, n0}, {_, {"m", t.TM}, {"n", t.TN}});
    });
    kb.parallel({{"i", nM}, {"j", nN}}, [&](Idx i, Idx j) {
      Idx m0 = (i * t.TM).as("m0");
      Idx n0 = (j * t.TN).as("n0");
      Carry sum0{"sum", kb.zeros({{"m", t.TM}, {"n", t.TN}})};
      auto [sum] = kb.serial("q", 0, S, {sum0}, [&](Idx q, Tile sum) {
        Tile p = load(part, {q, m0, n0}, {_, {"m", t.TM}, {"n", t.TN}}).as("c_chunk");
        return (sum + p).as("sum_next");
      });
      store(sum, c, {m0, n0}, {{"m", t.TM}, {"n", t.TN}});
    });
    return kb.finish();
  }

  kb.parallel({{"i", nM}, {"j", nN}}, [&](Idx i, Idx j) {
    Idx m0 = (i * t.TM).as("m0");
    Idx n0 = (j * t.TN).as("n0");
    store(accumulate(m0, n0, 0, nK), c, {m0, n0}, {{"m", t.TM}, {"n", t.TN}});
  });
  return kb.finish();
}

}  // namespace kiln::kernels
