// RoPE in the DSL; see rope.h.
#include "kernels/rope.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <numbers>
#include <string>
#include <vector>

namespace kiln::kernels {

using namespace kiln::dsl;

namespace {

// Splits c (cycles per position, in (0, 1)) into pieces whose products with any integer
// position < 2^pos_bits are exact in f32 (each piece has at most 24 - pos_bits significant
// bits). The split stops where the remainder times the largest position is below 2^-26
// cycles; that remainder becomes a last piece whose product may round (by < 2^-50).
std::vector<double> cyclePieces(double c, int pos_bits) {
  std::vector<double> pieces;
  const int bits = 24 - pos_bits;
  double rem = c;
  while (rem > 0) {
    int e = 0;
    std::frexp(rem, &e);  // rem in [2^(e-1), 2^e)
    if (e + pos_bits < -26) {
      pieces.push_back(static_cast<float>(rem));
      break;
    }
    const double unit = std::ldexp(1.0, e - bits);
    const double piece = std::floor(rem / unit) * unit;
    pieces.push_back(piece);
    rem -= piece;
  }
  return pieces;
}

// x - trunc(x) for x >= 0: exact in f32.
Tile frac(const Tile& x) {
  return x - toF32(toI64(x));
}

struct CosSin {
  Tile cos, sin;
};

// cos and sin of 2pi * a for a in [0, 1), in f32 with precise ops only.
CosSin cosSin2Pi(const Tile& a) {
  Tile k = toI64(a * 4.0 + 0.5).as("quadrant");                               // 0..4
  Tile theta = ((a - toF32(k) * 0.25) * (2 * std::numbers::pi)).as("theta");  // |theta| <= pi/4
  Tile z = (theta * theta).as("theta_sq");
  Tile s = theta + theta * z * (z * (z * (z * (1.0 / 362880) - 1.0 / 5040) + 1.0 / 120) - 1.0 / 6);
  Tile c = z * (z * (z * (z * (z * (-1.0 / 3628800) + 1.0 / 40320) - 1.0 / 720) + 1.0 / 24) - 0.5) + 1.0;
  // angle = theta + k pi/2 (k = 4 is a full turn).
  Tile cosA = select(eq(k, 1), -s, select(eq(k, 2), -c, select(eq(k, 3), s, c))).as("cos");
  Tile sinA = select(eq(k, 1), c, select(eq(k, 2), -s, select(eq(k, 3), -c, s))).as("sin");
  return {cosA, sinA};
}

}  // namespace

BuildResult rope(int64_t tokens, int64_t heads, int64_t head_dim, bool neox, double base, int64_t positions,
                 bool runtime_rows, FloatElem io) {
  KernelBuilder kb("rope");
  if (tokens < 1 || tokens > kMaxRopeTokens || heads < 1 || head_dim < 2 || head_dim % 2 != 0 || !(base > 1.0) ||
      positions < 0 || positions > kMaxRopeTokens) {
    kb.error("bad-shape", "rope needs 1 <= tokens <= " + std::to_string(kMaxRopeTokens) +
                              ", heads >= 1, an even head_dim >= 2, base > 1 and positions 0.." +
                              std::to_string(kMaxRopeTokens));
    return kb.finish();
  }
  const int64_t half = head_dim / 2;
  const int64_t most_position = (positions > 0 ? positions : tokens) - 1;
  const int pos_bits = std::max(1, static_cast<int>(std::bit_width(static_cast<uint64_t>(most_position))));
  View x = kb.view("x", {tokens, heads, head_dim}, io);
  View y = kb.view("y", {tokens, heads, head_dim}, io);
  View posView;
  if (positions > 0) posView = kb.intView("positions", {tokens}, IntElem::I32, Range{0, most_position});
  const Dim domain = runtime_rows ? kb.runtimeAxis("t", kb.scalarI64("rows", Range{0, tokens})) : Dim{"t", tokens};
  const std::vector<Access> headsAt = {_, {"h", heads}, _};
  // Every frequency j at once: the cycle pieces of each j (fewer for some j: a zero piece
  // leaves `a` unchanged, frac(a + 0) = a exactly) as [j:half] constant tiles.
  std::vector<std::vector<double>> pieces(static_cast<size_t>(half));
  size_t most = 0;
  for (int64_t j = 0; j < half; ++j) {
    const double cycles =
        std::pow(base, -2.0 * static_cast<double>(j) / static_cast<double>(head_dim)) / (2 * std::numbers::pi);
    pieces[j] = cyclePieces(cycles, pos_bits);
    most = std::max(most, pieces[j].size());
  }
  kb.parallel({domain}, [&](Idx t) {
    Tile pos = toF32(positions > 0 ? extractIndex(load(posView, {t}, {{"one", 1}}).as("pos_t"), {0}) : t).as("pos");
    Tile iotaJ = kb.iota({{"j", half}}, "j");
    Tile a = kb.zeros({{"j", half}});
    for (size_t k = 0; k < most; ++k) {
      Tile piece = kb.zeros({{"j", half}});
      for (int64_t j = 0; j < half; ++j)
        if (k < pieces[j].size()) piece = select(eq(iotaJ, j), pieces[j][k], piece);
      a = frac(a + frac(pos * piece.as("piece")));
    }
    CosSin cs = cosSin2Pi(a.as("cycles"));
    if (neox) {
      // The pairs (j, j + half): two contiguous [heads, half] tiles.
      const std::vector<Access> rowsAt = {_, {"h", heads}, {"j", half}};
      Tile x1 = load(x, {t, 0, 0}, rowsAt).as("x1");
      Tile x2 = load(x, {t, 0, half}, rowsAt).as("x2");
      store((x1 * cs.cos - x2 * cs.sin).as("y1"), y, {t, 0, 0}, rowsAt);
      store((x2 * cs.cos + x1 * cs.sin).as("y2"), y, {t, 0, half}, rowsAt);
      return;
    }
    // Interleaved pairs (2j, 2j + 1): per j, along the heads.
    for (int64_t j = 0; j < half; ++j) {
      Tile c = extract(cs.cos, {j}), sn = extract(cs.sin, {j});
      Tile x1 = load(x, {t, 0, 2 * j}, headsAt).as("x1");
      Tile x2 = load(x, {t, 0, 2 * j + 1}, headsAt).as("x2");
      store((x1 * c - x2 * sn).as("y1"), y, {t, 0, 2 * j}, headsAt);
      store((x2 * c + x1 * sn).as("y2"), y, {t, 0, 2 * j + 1}, headsAt);
    }
  });
  return kb.finish();
}

}  // namespace kiln::kernels
