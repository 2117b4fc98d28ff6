// The lane realization's mma: conversions (transposed panels), register-blocked outer products,
// the fused transpose of decode's Q·Kᵀ, and the partitioned orders (dot and element forms).
#include "codegen/lanes/lane_emitter.h"

#include <fmt/format.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsX86.h>

#include <array>
#include <cstring>

namespace kiln::codegen {

using ir::Elem;
using ir::Op;
using ir::OpKind;
using plan::LaneRep;

// W values of x's dim `li` from lb*W (clamped to its last index), at coords `xcs` otherwise,
// chunk xc of x's lane dim: W vectors loaded, then transposed in registers, so vector j holds
// lane-dim value xc*W + j for W consecutive values of dim li.
std::vector<llvm::Value*> LaneEmitter::transposedBlock(const ir::Value* x, int li, Ix lb, Coords xcs, Ix xc) {
  const ir::Type& xt = x->type;
  const int64_t extL = xt.dims[li].extent;
  std::vector<llvm::Value*> r(w_);
  for (unsigned i = 0; i < w_; ++i) {
    xcs[li] = lanePosition(lb, i, extL);
    r[i] = vec(x, rowOf(xt, xcs), xc);
  }
  transposeInRegisters(r);
  return r;
}

// bf16 words, a whole chunk xc of x's lane dim inside the view: the W/2 words (two adjacent
// elements each, the first in the low half) of each of the W values of L from lb*W, transposed
// in registers so that vector j holds word j of the W values of L in order (transposeWords). A
// word's low half moved to the top of a float and its high half with the low bits cleared are
// its elements widened exactly (as widenLoaded does one by one), so vector t of the result holds
// lane-dim value xc*W + t.
std::vector<llvm::Value*> LaneEmitter::transposedWordBlock(const ir::Value* x, int li, Ix lb, Coords xcs, Ix xc,
                                                           bool unpack) {
  const ir::Type& xt = x->type;
  const int64_t extL = xt.dims[li].extent;
  const unsigned half = w_ / 2;
  auto words = [&](unsigned i) {  // L value lb*W + i (clamped to its last index)
    xcs[li] = lanePosition(lb, i, extL);
    return loadWords(x->def, rowOf(xt, xcs), xc);
  };
  std::vector<llvm::Value*> r = transposeWords(words, unpack);
  llvm::Type* wordsTy = r[0]->getType();
  llvm::Value* sixteen = llvm::ConstantInt::get(wordsTy, 16);
  llvm::Value* high = llvm::ConstantInt::get(wordsTy, 0xffff0000u);
  std::vector<llvm::Value*> out;
  for (unsigned j = 0; j < half; ++j) {
    out.push_back(b_.CreateBitCast(b_.CreateShl(r[j], sixteen), vty(Elem::F32)));
    out.push_back(b_.CreateBitCast(b_.CreateAnd(r[j], high), vty(Elem::F32)));
  }
  return out;
}

// The W/2 words of each of W rows (words(i): row i's, a half vector) transposed: vector j of the
// result holds word j of rows 0 .. W-1 in lane order. By transposeInRegisters' swaps, rows i and
// W/2 + i joined in one vector and transposed within the halves; or (`unpack`, W = 8 or 16,
// where a row's words fill whole 4-word lanes) rows i and i + 4 (and 8 + i, 12 + i) joined, two
// rounds of interleaves within 4-word lanes (32-bit, then 64-bit: x86's vpunpck[lh]dq and
// vpunpck[lh]qdq) leave each lane with one word of four consecutive rows, and at W = 16 one round
// of 128-bit lane selections (vshufi64x2) puts the lanes in row order. As many shuffles either
// way; the swaps' first and last rounds are two-source permutations across lanes (vpermt2d,
// vpermt2q), which share the multiply pipes on AMD Zen 5 (docs/backend.md).
std::vector<llvm::Value*> LaneEmitter::transposeWords(const std::function<llvm::Value*(unsigned)>& words, bool unpack) {
  const unsigned half = w_ / 2;
  std::vector<int> both(w_);
  for (unsigned k = 0; k < w_; ++k) both[k] = static_cast<int>(k);
  std::vector<llvm::Value*> r(half);
  if (!unpack || (w_ != 8 && w_ != 16)) {
    for (unsigned i = 0; i < half; ++i) r[i] = b_.CreateShuffleVector(words(i), words(half + i), both);
    transposeInRegisters(r);
    return r;
  }
  // A two-source shuffle of whole vectors, inserted as an instruction (counted, as in
  // transposeInRegisters); pick(k): the source lane of lane k (W + lane: the second vector).
  const int W = static_cast<int>(w_);
  auto shuffle = [&](llvm::Value* a, llvm::Value* b, const std::function<int(int)>& pick) {
    std::vector<int> m(w_);
    for (int k = 0; k < W; ++k) m[k] = pick(k);
    return b_.Insert(new llvm::ShuffleVectorInst(a, b, m));
  };
  // Within each 4-word lane: `size` words of a, then of b, alternating, from the lane's low or
  // high half (size 1: a0 b0 a1 b1; size 2: a0 a1 b0 b1).
  auto interleave = [&](llvm::Value* a, llvm::Value* b, int size, bool high) {
    return shuffle(a, b, [&](int k) {
      const int lane = k & ~3, at = k & 3;
      return lane + at % size + (at / (2 * size)) * size + (high ? 2 : 0) + ((at / size) % 2 ? W : 0);
    });
  };
  // Group g (rows 8g .. 8g + 7; W = 8: the one group): vector i joins rows 8g + i and 8g + 4 + i;
  // t[g][c]: lane l holds word c of the lane's four rows (W = 16: word 4 + c in odd lanes).
  std::vector<std::vector<llvm::Value*>> t(w_ / 8);
  for (unsigned g = 0; g < t.size(); ++g) {
    std::vector<llvm::Value*> z(4);
    for (unsigned i = 0; i < 4; ++i) z[i] = b_.CreateShuffleVector(words(8 * g + i), words(8 * g + 4 + i), both);
    llvm::Value* lo01 = interleave(z[0], z[1], 1, false);
    llvm::Value* hi01 = interleave(z[0], z[1], 1, true);
    llvm::Value* lo23 = interleave(z[2], z[3], 1, false);
    llvm::Value* hi23 = interleave(z[2], z[3], 1, true);
    t[g] = {interleave(lo01, lo23, 2, false), interleave(lo01, lo23, 2, true), interleave(hi01, hi23, 2, false),
            interleave(hi01, hi23, 2, true)};
  }
  if (w_ == 8) return t[0];
  // W = 16: word j of rows 0-3, 4-7 (group 0's lanes 0, 2 or 1, 3), then 8-11, 12-15 (group 1's).
  for (unsigned j = 0; j < half; ++j) {
    const int odd = j >= 4 ? 1 : 0;
    r[j] = shuffle(t[0][j % 4], t[1][j % 4], [&](int k) {
      const int lane = k / 4, at = k % 4;
      return (lane >= 2 ? W : 0) + 4 * (2 * (lane % 2) + odd) + at;
    });
  }
  return r;
}

// Transpose of `x` so that `to_lane_dim` (L) lies along the lanes: W source vectors (W
// consecutive values of L, one chunk of x's own lane dim) are loaded, transposed in registers
// (log2 W stages of two-source shuffles, each swapping the off-diagonal blocks) and stored as
// W target vectors. Never element by element.
void LaneEmitter::emitConversion(const plan::Conversion& c) {
  if (c.kind == plan::ConversionKind::Bf16Words) {
    emitBf16Words(c);
    return;
  }
  const ir::Value* x = c.value;
  const ir::Type& xt = x->type;
  const plan::Layout& xl = lp_.layout[x->id];
  const int li = xt.findDim(c.to_lane_dim);
  const int last = xt.rank() - 1;
  const int64_t extLast = xt.dims[last].extent;
  ir::Type outerT = ir::Type::tile(xt.elem, {});
  for (int d = 0; d < last; ++d)
    if (d != li) outerT.dims.push_back(xt.dims[d]);
  outerT.dims.push_back(ir::Dim{"", 1});  // the lane slot rowCoords/rowOf skip
  const int64_t lBlocks = c.chunks, xChunks = xl.chunks;
  Elem e = xt.elem;
  // A tile read straight from its view: a fast copy of the transpose when the whole tile lies
  // inside the view (no per-row bounds), the guarded one otherwise.
  const Op* load = c.edge_copy ? x->def : nullptr;
  llvm::BasicBlock* done = nullptr;
  llvm::BasicBlock* slow = nullptr;
  if (load) {
    llvm::BasicBlock* fast = llvm::BasicBlock::Create(c_, "transpose.inside", f_);
    slow = llvm::BasicBlock::Create(c_, "transpose.edge", f_);
    done = llvm::BasicBlock::Create(c_, "transpose.done", f_);
    b_.CreateCondBr(tileInside(load), fast, slow);
    b_.SetInsertPoint(fast);
    inside_ = {load};
  }
  for (int pass = 0; pass < (load ? 2 : 1); ++pass) {
    if (pass == 1) {
      b_.CreateBr(done);
      b_.SetInsertPoint(slow);
      inside_.clear();
    }
    // `n` blocks: (outer rows) x (blocks of L) x `per` chunks of x's lane dim from chunk `from`,
    // as bf16 words (whole chunks inside the view) or loaded vectors.
    auto walk = [&](int64_t n, bool rolled, int64_t from, int64_t per, bool words) {
      if (per <= 0) return;
      forEach(n, rolled, [&](Ix it) {
        Ix xc = add(Ix{nullptr, from}, rem(it, per)), rest = div(it, per);
        Ix lb = rem(rest, lBlocks), o = div(rest, lBlocks);
        Coords oc = rowCoords(outerT, o);
        Coords xcs = mapCoords(xt, outerT, oc);
        std::vector<llvm::Value*> r =
            words ? transposedWordBlock(x, li, lb, xcs, xc, c.word_unpack) : transposedBlock(x, li, lb, xcs, xc);
        // Target row: x's dims without L, row-major (x's lane dim innermost); target chunk: lb.
        Ix oRow = rowOf(outerT, oc);
        if (c.pair_words) {
          storePairWords(c, x, r, mul(xc, w_), extLast, lb);
          return;
        }
        for (unsigned t = 0; t < r.size(); ++t) {
          Ix lastCoord = add(mul(xc, w_), Ix{nullptr, t});
          if (lastCoord.isConst() && lastCoord.c >= extLast) break;
          Ix vi = add(mul(add(mul(oRow, extLast), lastCoord), lBlocks), lb);
          // Whole chunks (bf16 words; any chunk when W divides the extent) are stored whole.
          if (lastCoord.isConst() || words || extLast % static_cast<int64_t>(w_) == 0) {
            b_.CreateStore(r[t], slotPtr(c.slot, e, vi));
            continue;
          }
          // A runtime chunk of x's lane dim: lanes past its extent are not stored.
          llvm::BasicBlock* st = llvm::BasicBlock::Create(c_, "transpose.store", f_);
          llvm::BasicBlock* nx = llvm::BasicBlock::Create(c_, "transpose.next", f_);
          b_.CreateCondBr(b_.CreateICmpULT(lastCoord.v, b_.getInt64(extLast)), st, nx);
          b_.SetInsertPoint(st);
          b_.CreateStore(r[t], slotPtr(c.slot, e, vi));
          b_.CreateBr(nx);
          b_.SetInsertPoint(nx);
        }
      });
    };
    if (pass == 0 && c.words) {
      walk(c.word_iterations, c.word_rolled, 0, c.word_chunks, true);
      walk(c.tail_iterations, c.tail_rolled, c.word_chunks, xChunks - c.word_chunks, false);
    } else {
      walk(c.iterations, c.rolled, 0, xChunks, false);
    }
  }
  inside_.clear();
  if (load) {
    b_.CreateBr(done);
    b_.SetInsertPoint(done);
  }
}

// Two f32 vectors of x's values as VDPBF16PS's pairs (32-bit lanes, i32): lo's bf16 word in
// the low half, hi's in the high (+0 without hi); each rounded to bf16 (to nearest even) unless
// x's values are bf16 already (then its top half, exactly).
llvm::Value* LaneEmitter::packPairWords(const ir::Value* x, llvm::Value* lo, llvm::Value* hi) {
  llvm::Type* i32v = llvm::FixedVectorType::get(b_.getInt32Ty(), w_);
  const bool exact = exactBf16(x);
  auto low = [&](llvm::Value* v) {  // v's bf16 word in each lane's low half
    return exact ? b_.CreateLShr(b_.CreateBitCast(v, i32v), 16) : b_.CreateZExt(ew_.bf16Bits(v), i32v);
  };
  llvm::Value* w = low(lo);
  return hi ? b_.CreateOr(w, b_.CreateShl(low(hi), 16)) : w;
}

// A contribution alone (words `w`, i32 lanes or scalar, with +0 in the high half) as operand
// `i` of VDPBF16PS: a's high half -0, b's +0, so the pair's other product is -0 x +0 = -0, which
// adds nothing to any chain (docs/backend.md).
llvm::Value* LaneEmitter::aloneWords(llvm::Value* w, int i) {
  return i == 0 ? b_.CreateOr(w, 0x80000000u) : w;
}

llvm::Value* LaneEmitter::bf16Pairs(llvm::Value* words) {
  return b_.CreateBitCast(words, llvm::FixedVectorType::get(b_.getBFloatTy(), 2 * w_));
}

llvm::Value* LaneEmitter::dpbf16(llvm::Value* c, llvm::Value* a, llvm::Value* b) {
  return b_.CreateIntrinsic(llvm::Intrinsic::x86_avx512bf16_dpbf16ps_512, {}, {c, a, b});
}

// The broadcast operand `i` of a bf16_pairs mma at accumulator row coords rc and K value kc
// (and kc + 1 when `two`) as VDPBF16PS's pair in every lane: read from its bf16 words
// (ConversionKind::Bf16Words) when it has them, else its elements packed; one K value alone has
// -0 (operand a) or +0 (b) in the high half.
llvm::Value* LaneEmitter::splatPair(const Op* op, int i, const Coords& rc, const Coords& kc, bool two) {
  const ir::Value* x = op->operands[i];
  const ir::Type& at = op->operands[2]->type;
  const ir::Type ct = contractedType(op);
  const plan::LaneMma& lm = lp_.mma.at(op);
  llvm::Value* w = nullptr;
  if (x->type.isScalar()) {
    llvm::Value* v = splat(scalar(x));
    w = b_.CreateExtractElement(packPairWords(x, v, two ? v : nullptr), uint64_t{0});
  } else {
    Coords xc = mapCoords(x->type, at, rc, &kc, &ct);
    if (lm.conversion[i] >= 0) {
      const plan::Conversion& c = lp_.conversions[lm.conversion[i]];
      llvm::Value* ptr = b_.CreateInBoundsGEP(b_.getInt16Ty(), slots_[c.slot],
                                              val(add(mul(rowOf(x->type, xc), c.chunks * w_), xc.back())));
      w = two ? b_.CreateAlignedLoad(b_.getInt32Ty(), ptr, llvm::Align(2))
              : b_.CreateZExt(b_.CreateLoad(b_.getInt16Ty(), ptr), b_.getInt32Ty());
    } else {
      llvm::Value* lo = splat(elem(x, xc));
      llvm::Value* hi = nullptr;
      if (two) {
        xc.back() = add(xc.back(), Ix{nullptr, 1});
        hi = splat(elem(x, xc));
      }
      w = b_.CreateExtractElement(packPairWords(x, lo, hi), uint64_t{0});
    }
  }
  if (!two) w = aloneWords(w, i);
  return bf16Pairs(b_.CreateVectorSplat(w_, w));
}

// A pair-word transpose's block (plan::Conversion::pair_words): the W transposed vectors `r`
// of rows first .. first + W - 1 (x's last dim, the mma's K) as W / 2 rows of 32-bit words,
// row 2t's bf16 in the low half and 2t + 1's in the high (+0 past the extent), each rounded to
// bf16 unless it is one already; rows past the extent are not stored.
void LaneEmitter::storePairWords(const plan::Conversion& c, const ir::Value* x, const std::vector<llvm::Value*>& r,
                                 Ix first, int64_t ext, Ix chunk) {
  for (unsigned t = 0; 2 * t < r.size(); ++t) {
    Ix row = add(first, Ix{nullptr, 2 * int64_t{t}});
    if (row.isConst() && row.c >= ext) break;
    Ix next = add(row, Ix{nullptr, 1});
    llvm::Value* pw = packPairWords(x, r[2 * t], next.isConst() && next.c >= ext ? nullptr : r[2 * t + 1]);
    if (!next.isConst())
      pw = b_.CreateSelect(b_.CreateICmpULT(next.v, b_.getInt64(ext)), pw, packPairWords(x, r[2 * t], nullptr));
    llvm::Value* words = b_.CreateBitCast(pw, vty(Elem::F32));
    Ix vi = add(mul(div(row, 2), c.chunks), chunk);
    if (row.isConst() || (ext % 2 == 0 && ext % static_cast<int64_t>(w_) == 0)) {
      b_.CreateStore(words, slotPtr(c.slot, Elem::F32, vi));
      continue;
    }
    llvm::BasicBlock* st = llvm::BasicBlock::Create(c_, "pairs.store", f_);
    llvm::BasicBlock* nx = llvm::BasicBlock::Create(c_, "pairs.next", f_);
    b_.CreateCondBr(b_.CreateICmpULT(row.v, b_.getInt64(ext)), st, nx);
    b_.SetInsertPoint(st);
    b_.CreateStore(words, slotPtr(c.slot, Elem::F32, vi));
    b_.CreateBr(nx);
    b_.SetInsertPoint(nx);
  }
}

// A bf16_pairs mma's broadcast operand as bf16 words (plan::ConversionKind::Bf16Words): each
// vector of x rounded to bf16 (a bf16 value as it is) and its W 16-bit words stored in lane
// order, row after row, so that contributions k and k + 1 of a row are one 32-bit word.
void LaneEmitter::emitBf16Words(const plan::Conversion& c) {
  const ir::Value* x = c.value;
  const plan::Layout& xl = lp_.layout[x->id];
  llvm::Type* i32v = llvm::FixedVectorType::get(b_.getInt32Ty(), w_);
  llvm::Type* i16v = llvm::FixedVectorType::get(b_.getInt16Ty(), w_);
  const bool exact = exactBf16(x);
  forEachVector(xl, [&](Ix row, Ix chunk) {
    llvm::Value* v = vec(x, row, chunk);
    llvm::Value* bits = exact ? b_.CreateTrunc(b_.CreateLShr(b_.CreateBitCast(v, i32v), 16), i16v) : ew_.bf16Bits(v);
    b_.CreateStore(bits, b_.CreateInBoundsGEP(i16v, slots_[c.slot], val(add(mul(row, xl.chunks), chunk))));
  });
}

// A value whose every element is a bf16 value: a load from a bf16 view with a bf16 fill.
bool LaneEmitter::exactBf16(const ir::Value* x) {
  const Op* def = x->def;
  if (!def || def->kind != ir::OpKind::Load || def->operands[0]->type.elem != Elem::BF16) return false;
  const float fill = static_cast<float>(def->fconst);
  uint32_t bits = 0;
  std::memcpy(&bits, &fill, sizeof bits);
  return (bits & 0xFFFFu) == 0;
}

// The function compiles for `feature` too (added to its target-features, kept by later calls).
void LaneEmitter::requireFeature(const std::string& feature) {
  std::string features = f_->getFnAttribute("target-features").getValueAsString().str();
  if (features.find(feature) != std::string::npos) return;
  f_->addFnAttr("target-features", features.empty() ? feature : features + "," + feature);
}

LaneEmitter::MmaParts LaneEmitter::mmaParts(const Op* op) const {
  return {op->operands[0], op->operands[1], op->operands[2], op->results[0], p_.mma.at(op), lp_.mma.at(op)};
}

// An mma reading tiles straight from their views runs twice over: a copy for the common case
// where every such tile lies inside its view (plain loads and broadcasts from memory), and the
// guarded copy for edges; registers meet in phis.
void LaneEmitter::emitMma(const Op* op) {
  const plan::LaneMma& lm = lp_.mma.at(op);
  const ir::Value* r = op->results[0];
  if (!lm.edge_copy) {
    emitMmaTiles(op);
    return;
  }
  std::vector<const Op*> direct;
  for (int i = 0; i < 2; ++i) {
    const ir::Value* x = op->operands[i];
    if (lp_.layout[x->id].rep == LaneRep::Direct && (lm.conversion[i] < 0 || lm.fused_transpose))
      direct.push_back(x->def);
  }
  llvm::Value* in = b_.getTrue();
  for (const Op* l : direct) in = b_.CreateAnd(in, tileInside(l));
  llvm::BasicBlock* fast = llvm::BasicBlock::Create(c_, "mma.inside", f_);
  llvm::BasicBlock* slow = llvm::BasicBlock::Create(c_, "mma.edge", f_);
  llvm::BasicBlock* done = llvm::BasicBlock::Create(c_, "mma.done", f_);
  b_.CreateCondBr(in, fast, slow);
  b_.SetInsertPoint(fast);
  inside_ = direct;
  emitMmaTiles(op);
  inside_.clear();
  std::vector<llvm::Value*> fastVals = vecs_[r->id];
  llvm::BasicBlock* fastEnd = b_.GetInsertBlock();
  b_.CreateBr(done);
  b_.SetInsertPoint(slow);
  emitMmaTiles(op);
  std::vector<llvm::Value*> slowVals = vecs_[r->id];
  llvm::BasicBlock* slowEnd = b_.GetInsertBlock();
  b_.CreateBr(done);
  b_.SetInsertPoint(done);
  for (size_t i = 0; i < fastVals.size(); ++i) {
    llvm::PHINode* phi = b_.CreatePHI(fastVals[i]->getType(), 2);
    phi->addIncoming(fastVals[i], fastEnd);
    phi->addIncoming(slowVals[i], slowEnd);
    vecs_[r->id][i] = phi;
  }
}

// Fused transpose (decode's Q·Kᵀ): for each lane chunk of the accumulator (W values of L), the
// converted operand x[L, K] is read W x W at a time, transposed in registers, and each of the
// W transposed vectors (one K value, W values of L) is consumed at once by every accumulator row
// of that chunk: acc = fma(splat(other[row, k]), t, acc), K ascending for every element, the
// same operations as the panel path in the same order, without the panel's stores and loads.
// LaneMma::fused_group chunks of L go together (their rows' FMA chains interleave); inside the
// view, bf16 K's whole chunks come from words (transposedWordBlock).
void LaneEmitter::emitMmaFusedTranspose(const Op* op) {
  const plan::LaneMma& lm = lp_.mma.at(op);
  const int xi = lm.broadcast[0] ? 1 : 0;  // the transposed operand; the other is broadcast
  const ir::Value* x = op->operands[xi];
  const ir::Value* y = op->operands[1 - xi];
  const ir::Value* acc = op->operands[2];
  const ir::Value* r = op->results[0];
  const ir::Type& xt = x->type;
  const ir::Type& at = acc->type;
  const plan::Conversion& c = lp_.conversions[lm.conversion[xi]];
  const plan::Layout& al = lp_.layout[acc->id];
  const plan::Layout& rl = lp_.layout[r->id];
  const int li = xt.findDim(c.to_lane_dim), last = xt.rank() - 1;
  const int64_t K = xt.dims[last].extent;
  const int64_t full = K / w_, tail = K % w_;
  ir::Type ct = ir::Type::tile(Elem::F32, {});  // the contracted dim
  ct.dims.push_back(xt.dims[last]);
  if (rl.rep == LaneRep::Vectors) vecs_[r->id].assign(rl.vectors(), nullptr);
  std::vector<Coords> rcs;
  for (int64_t row = 0; row < al.rows; ++row) rcs.push_back(rowCoords(at, Ix{nullptr, row}));
  const bool words = isInside(x->def) && c.words;  // whole K chunks as bf16 words
  const bool pairs = op->mma_policy.bf16_pairs;    // planned on VDPBF16PS only (LaneMma::dpbf16)
  if (pairs) requireFeature("+avx512bf16");
  for (int64_t lb0 = 0; lb0 < al.chunks; lb0 += lm.fused_group) {
    const int64_t g = std::min(lm.fused_group, al.chunks - lb0);  // chunks of L: g x rows FMA chains
    // K chunk kc, of which `count` K values are used, for each of the g chunks of L.
    auto steps = [&](Ix kc, int64_t count, std::vector<llvm::Value*> s, bool asWords) {
      // t[i][j]: K value kc*W + j for the W values of L of chunk lb0 + i (other dims of extent 1).
      const Coords none(xt.rank(), Ix{nullptr, 0});
      std::vector<std::vector<llvm::Value*>> t;
      for (int64_t i = 0; i < g; ++i)
        t.push_back(asWords ? transposedWordBlock(x, li, Ix{nullptr, lb0 + i}, none, kc, c.word_unpack)
                            : transposedBlock(x, li, Ix{nullptr, lb0 + i}, none, kc));
      if (pairs) {
        // bf16_pairs on VDPBF16PS (docs/ir.md, MMA): per pair of K values one instruction per
        // accumulator, the transposed pair as words (packPairWords), the other operand's pair
        // broadcast (splatPair); an odd count's last value alone, a's high half -0.
        for (int64_t j = 0; j < count; j += 2) {
          const bool two = j + 1 < count;
          Coords kcoord = {add(mul(kc, w_), Ix{nullptr, j})};
          std::vector<llvm::Value*> words;
          for (int64_t i = 0; i < g; ++i) {
            llvm::Value* w = packPairWords(x, t[i][j], two ? t[i][j + 1] : nullptr);
            words.push_back(bf16Pairs(two ? w : aloneWords(w, xi)));
          }
          for (int64_t row = 0; row < al.rows; ++row) {
            llvm::Value* other = splatPair(op, 1 - xi, rcs[row], kcoord, two);
            // The broadcast last, where the instruction takes memory (a 32-bit broadcast): the
            // pair's two products are each a's by b's, so the operands' order changes no bit.
            for (int64_t i = 0; i < g; ++i) s[i * al.rows + row] = dpbf16(s[i * al.rows + row], words[i], other);
          }
        }
        return s;
      }
      for (int64_t j = 0; j < count; ++j) {
        Coords kcoord = {add(mul(kc, w_), Ix{nullptr, j})};
        for (int64_t row = 0; row < al.rows; ++row) {
          llvm::Value* other = y->type.isScalar() ? scalar(y) : elem(y, mapCoords(y->type, at, rcs[row], &kcoord, &ct));
          for (int64_t i = 0; i < g; ++i)
            s[i * al.rows + row] = ew_.multiplyAdd(splat(other), t[i][j], s[i * al.rows + row], op->mma_policy);
        }
      }
      return s;
    };
    std::vector<llvm::Value*> cur;
    for (int64_t i = 0; i < g; ++i)
      for (int64_t row = 0; row < al.rows; ++row) cur.push_back(vec(acc, Ix{nullptr, row}, Ix{nullptr, lb0 + i}));
    if (pairs && K > 0)  // the bf16 orders' accumulators flushed (K = 0 gives them as they are)
      for (llvm::Value*& c : cur) c = ew_.flushTiny(c);
    if (lm.k_loop) {
      cur = loop(b_.getInt64(0), b_.getInt64(full), 1, cur, [&](llvm::Value* kc, const std::vector<llvm::Value*>& s) {
        return steps(Ix{kc, 0}, w_, s, words);
      });
    } else {
      for (int64_t kc = 0; kc < full; ++kc) cur = steps(Ix{nullptr, kc}, w_, cur, words);
    }
    if (tail > 0) cur = steps(Ix{nullptr, full}, tail, cur, false);
    for (int64_t i = 0; i < g; ++i)
      for (int64_t row = 0; row < al.rows; ++row) {
        const int64_t vi = row * al.chunks + lb0 + i;
        if (rl.rep == LaneRep::Vectors)
          vecs_[r->id][vi] = cur[i * al.rows + row];
        else
          b_.CreateStore(cur[i * al.rows + row], slotPtr(rl.slot, Elem::F32, Ix{nullptr, vi}));
      }
  }
}

ir::Type LaneEmitter::contractedType(const Op* op) {
  const ir::Type& at = op->operands[0]->type;
  ir::Type ct = ir::Type::tile(Elem::F32, {});
  for (const std::string& d : op->dims) ct.dims.push_back(at.dims[at.findDim(d)]);
  return ct;
}

LaneEmitter::Coords LaneEmitter::contractionCoords(const ir::Type& ct, Ix k) {
  Coords kc(ct.dims.size(), Ix{nullptr, 0});
  for (int i = static_cast<int>(ct.dims.size()) - 1; i >= 0; --i) {
    kc[i] = rem(k, ct.dims[i].extent);
    k = div(k, ct.dims[i].extent);
  }
  return kc;
}

Ix LaneEmitter::lanePosition(Ix chunk, unsigned j, int64_t extent) {
  Ix at = add(mul(chunk, w_), Ix{nullptr, j});
  // Lanes past the extent repeat the last element (their results are never stored).
  if (at.isConst()) return Ix{nullptr, std::min<int64_t>(at.c, extent - 1)};
  return Ix{b_.CreateBinaryIntrinsic(llvm::Intrinsic::umin, at.v, b_.getInt64(extent - 1)), 0};
}

// docs/ir.md, MMA, partitions(P): partition q = k mod P starts from its first product; later
// contributions fold in ascending k (whole rounds of P by a loop when LaneMma::k_loop); then
// the accumulator merges partitions 0..min(P, K)-1 in order.
llvm::Value* LaneEmitter::partitionedElement(const Op* op, llvm::Value* acc, const Coords& rc) {
  const ir::Value* a = op->operands[0];
  const ir::Value* bv = op->operands[1];
  const ir::Type& at = op->operands[2]->type;
  const plan::MmaPlan& mp = p_.mma.at(op);
  const plan::LaneMma& lm = lp_.mma.at(op);
  const ir::MmaPolicy& pol = op->mma_policy;
  const int64_t P = pol.partitions, K = mp.k, parts = std::min(P, K), rounds = P > 0 ? K / P : 0;
  if (K == 0) return acc;
  const ir::Type ct = contractedType(op);
  auto term = [&](Ix k) {
    Coords kc = contractionCoords(ct, k);
    auto one = [&](const ir::Value* x) {
      return x->type.isScalar() ? scalar(x) : elem(x, mapCoords(x->type, at, rc, &kc, &ct));
    };
    return std::pair{one(a), one(bv)};
  };
  if (ir::bf16Order(pol)) return bf16DotChain(op, acc, term);
  std::vector<llvm::Value*> part(parts);
  for (int64_t q = 0; q < parts; ++q) {
    auto [x, y] = term(Ix{nullptr, q});
    part[q] = ew_.mmaProduct(x, y, pol);
  }
  auto fold = [&](Ix k, int64_t q, std::vector<llvm::Value*>& cur) {
    auto [x, y] = term(k);
    cur[q] = ew_.multiplyAdd(x, y, cur[q], pol);
  };
  int64_t next = parts;
  if (lm.k_loop) {
    part = loop(b_.getInt64(1), b_.getInt64(rounds), 1, part, [&](llvm::Value* t, const std::vector<llvm::Value*>& c) {
      std::vector<llvm::Value*> cur = c;
      for (int64_t q = 0; q < P; ++q) fold(add(mul(Ix{t, 0}, P), Ix{nullptr, q}), q, cur);
      return cur;
    });
    next = rounds * P;
  }
  for (int64_t k = next; k < K; ++k) fold(Ix{nullptr, k}, k % P, part);
  for (int64_t q = 0; q < parts; ++q) acc = ew_.mmaMerge(acc, part[q], pol);
  return acc;
}

// docs/ir.md, MMA, bf16_dot or bf16_pairs, for one output (term(k): contribution k's operands):
// rounds of 32 or 2 (whole rounds by a loop when LaneMma::k_loop); bf16_dot's last block
// completed with +0 products, per block an even and an odd chain from +0, then the merge;
// bf16_pairs' pairs one chain, k+1 before k.
llvm::Value* LaneEmitter::bf16DotChain(const Op* op, llvm::Value* acc,
                                       const std::function<std::pair<llvm::Value*, llvm::Value*>(Ix)>& term) {
  const int64_t R = ir::mmaRound(op->mma_policy), K = p_.mma.at(op).k, full = K / R, tail = K % R;
  if (K == 0) return acc;
  auto block = [&](Ix k0, int64_t count, llvm::Value* c) {
    return ew_.bf16Round(op->mma_policy, {c}, count, [&](int64_t j) {
      auto [x, y] = term(add(k0, Ix{nullptr, j}));
      return std::vector<std::pair<llvm::Value*, llvm::Value*>>{{x, y}};
    })[0];
  };
  acc = ew_.flushTiny(acc);
  int64_t done = 0;
  if (lp_.mma.at(op).k_loop) {
    acc = loop(b_.getInt64(0), b_.getInt64(full), 1, {acc}, [&](llvm::Value* t, const std::vector<llvm::Value*>& c) {
      return std::vector<llvm::Value*>{block(mul(Ix{t, 0}, R), R, c[0])};
    })[0];
    done = full;
  }
  for (int64_t t = done; t < full; ++t) acc = block(Ix{nullptr, t * R}, R, acc);
  if (tail > 0) acc = block(Ix{nullptr, full * R}, tail, acc);
  return acc;
}

// Form "elements": each output element in the partitioned order, as scalars.
void LaneEmitter::emitMmaElements(const Op* op) {
  const ir::Value* acc = op->operands[2];
  const ir::Value* r = op->results[0];
  const ir::Type& at = acc->type;
  const int64_t laneExt = at.dims.back().extent;
  define(r, [&](Ix row, Ix chunk) {
    Coords rc = rowCoords(at, row);
    llvm::Value* v = llvm::Constant::getNullValue(vty(Elem::F32));
    for (unsigned j = 0; j < w_; ++j) {
      if (chunk.isConst() && chunk.c * static_cast<int64_t>(w_) + j >= laneExt) break;
      rc.back() = lanePosition(chunk, j, laneExt);
      v = b_.CreateInsertElement(v, partitionedElement(op, elem(acc, rc), rc), uint64_t(j));
    }
    return v;
  });
}

// Form "dot" (docs/backend.md): lanes along K hold the partitions. For each of the W outputs of
// an accumulator vector, A = P/W accumulators over K's vectors (lane k of accumulator a' holds
// partition a'*W + k): the first A vectors' products, then later vectors folded in ascending
// order; the W outputs' accumulators are transposed in registers so that vector k holds
// partition k of each output, and the accumulator vector merges them in order: per lane the
// partitioned element's operations in its order, W outputs per instruction.
void LaneEmitter::emitMmaDot(const Op* op) {
  const auto [a, bv, acc, r, mp, lm] = mmaParts(op);
  const ir::Type& at = acc->type;
  const ir::MmaPolicy& pol = op->mma_policy;
  const int64_t P = pol.partitions, A = P / w_, rounds = mp.k / P;
  const int64_t laneExt = at.dims.back().extent;
  ir::Type ct = ir::Type::tile(Elem::F32, {});
  ct.dims.push_back(a->type.dims.back());
  auto alongK = [&](const ir::Value* x, const Coords& rc, Ix v) {
    Coords kc = {Ix{nullptr, 0}};
    Coords xc = mapCoords(x->type, at, rc, &kc, &ct);
    return vec(x, rowOf(x->type, xc), v);
  };
  auto partials = [&](const Coords& rc) {
    std::vector<llvm::Value*> p(A);
    for (int64_t i = 0; i < A; ++i)
      p[i] = ew_.mmaProduct(alongK(a, rc, Ix{nullptr, i}), alongK(bv, rc, Ix{nullptr, i}), pol);
    auto step = [&](Ix t, std::vector<llvm::Value*> cur) {
      for (int64_t i = 0; i < A; ++i) {
        Ix v = add(mul(t, A), Ix{nullptr, i});
        cur[i] = ew_.multiplyAdd(alongK(a, rc, v), alongK(bv, rc, v), cur[i], pol);
      }
      return cur;
    };
    if (lm.k_loop)
      return loop(b_.getInt64(1), b_.getInt64(rounds), 1, p, [&](llvm::Value* t, const std::vector<llvm::Value*>& cur) {
        return step(Ix{t, 0}, cur);
      });
    for (int64_t t = 1; t < rounds; ++t) p = step(Ix{nullptr, t}, p);
    return p;
  };
  define(r, [&](Ix row, Ix chunk) {
    Coords rc = rowCoords(at, row);
    std::vector<std::vector<llvm::Value*>> parts(w_);
    for (unsigned j = 0; j < w_; ++j) {
      rc.back() = lanePosition(chunk, j, laneExt);
      parts[j] = partials(rc);
    }
    llvm::Value* s = vec(acc, row, chunk);
    for (int64_t i = 0; i < A; ++i) {
      std::vector<llvm::Value*> block(w_);
      for (unsigned j = 0; j < w_; ++j) block[j] = parts[j][i];
      transposeInRegisters(block);
      for (unsigned k = 0; k < w_; ++k) s = ew_.mmaMerge(s, block[k], pol);
    }
    return s;
  });
}

void LaneEmitter::emitMmaTiles(const Op* op) {
  const plan::LaneMma& form = lp_.mma.at(op);
  if (form.form == plan::MmaForm::Amx) {
    emitMmaAmx(op);
    return;
  }
  if (form.fused_transpose) {
    emitMmaFusedTranspose(op);
    return;
  }
  if (form.form == plan::MmaForm::Dot) {
    emitMmaDot(op);
    return;
  }
  if (form.form == plan::MmaForm::Elements) {
    emitMmaElements(op);
    return;
  }
  if (form.form == plan::MmaForm::Scalar && ir::mmaRound(op->mma_policy) > 0) {
    scalars_[op->results[0]->id] = partitionedElement(op, scalar(op->operands[2]), {});
    return;
  }
  const auto [a, bv, acc, r, mp, lm] = mmaParts(op);
  const ir::Type& at = acc->type;
  const ir::Type ct = contractedType(op);
  auto kCoords = [&](Ix k) { return contractionCoords(ct, k); };
  if (lm.form == plan::MmaForm::Scalar) {
    llvm::Value* s = scalar(acc);
    auto step = [&](Ix k, llvm::Value* c) {
      Coords kc = kCoords(k);
      llvm::Value* av = a->type.isScalar() ? scalar(a) : elem(a, mapCoords(a->type, ct, kc));
      llvm::Value* bw = bv->type.isScalar() ? scalar(bv) : elem(bv, mapCoords(bv->type, ct, kc));
      return ew_.multiplyAdd(av, bw, c, op->mma_policy);
    };
    if (lm.k_loop) {
      s = loop(b_.getInt64(0), b_.getInt64(mp.k), 1, {s}, [&](llvm::Value* k, const std::vector<llvm::Value*>& cur) {
        return std::vector<llvm::Value*>{step(Ix{k, 0}, cur[0])};
      })[0];
    } else {
      for (int64_t k = 0; k < mp.k; ++k) s = step(Ix{nullptr, k}, s);
    }
    scalars_[r->id] = s;
    return;
  }
  const plan::Layout& al = lp_.layout[acc->id];
  const plan::Layout& rl = lp_.layout[r->id];
  if (rl.rep == LaneRep::Vectors) vecs_[r->id].assign(rl.vectors(), nullptr);
  const ir::Value* ops[2] = {a, bv};
  // The K-step operand of one accumulator (row coords rc, chunk): a splat or a lane vector.
  auto operand = [&](int i, const Coords& rc, const Coords& kc, Ix chunk) -> llvm::Value* {
    const ir::Value* x = ops[i];
    if (x->type.isScalar()) return splat(scalar(x));
    Coords xc = mapCoords(x->type, at, rc, &kc, &ct);
    if (lm.broadcast[i]) return splat(elem(x, xc));
    if (lm.conversion[i] < 0) {
      return vec(x, rowOf(x->type, xc), chunk);
    }
    const plan::Conversion& c = lp_.conversions[lm.conversion[i]];
    ir::Type rowsT = ir::Type::tile(x->type.elem, {});
    Coords rcs;
    for (size_t d = 0; d < x->type.dims.size(); ++d)
      if (x->type.dims[d].name != c.to_lane_dim) {
        rowsT.dims.push_back(x->type.dims[d]);
        rcs.push_back(xc[d]);
      }
    rowsT.dims.push_back(ir::Dim{c.to_lane_dim, 1});
    rcs.push_back(Ix{nullptr, 0});
    Ix vi = add(mul(rowOf(rowsT, rcs), c.chunks), chunk);
    return b_.CreateLoad(vty(x->type.elem), slotPtr(c.slot, x->type.elem, vi));
  };
  // A bf16_pairs pair of a splat operand on VDPBF16PS read straight from its bf16 view, where
  // the contracted dim runs along the view's contiguous last dim and the tile lies inside the
  // view (the mma's unguarded copy): contributions k and k + 1 are adjacent words, one 32-bit
  // load (k's word in the low half, as the instruction takes it), broadcast. Emitted as such,
  // not left to LLVM to merge two 16-bit loads, which it does not where the row's address is
  // a runtime product (gemm with 512 rows at launch: 54 instructions a pair against 33).
  // nullptr where the operand is read otherwise.
  auto directPair = [&](int i, const Coords& rc, const Coords& kc) -> llvm::Value* {
    const ir::Value* x = ops[i];
    const ir::Op* ld = x->def;
    if (!lm.dpbf16 || !op->mma_policy.bf16_pairs || x->type.isScalar() || lp_.layout[x->id].rep != LaneRep::Direct ||
        !ld || ld->kind != ir::OpKind::Load || ld->operands[0]->type.elem != Elem::BF16 || !isInside(ld))
      return nullptr;
    const std::string& kd = x->type.dims.back().name;
    if (op->dims.size() != 1 || kd != op->dims[0] || ld->access.empty() || ld->access.back().name != kd) return nullptr;
    Coords xc = mapCoords(x->type, at, rc, &kc, &ct);
    llvm::Value* inb = nullptr;
    llvm::Value* ptr = elementPointer(ld, x->type, xc, xc.back(), inb);
    llvm::Value* w = b_.CreateAlignedLoad(b_.getInt32Ty(), ptr, llvm::Align(2));
    return b_.CreateBitCast(b_.CreateVectorSplat(w_, w), llvm::FixedVectorType::get(b_.getBFloatTy(), 2 * w_));
  };
  // One register tile of nr rows from row r0 (a constant, or a runtime row in a rolled loop).
  auto tileRows = [&](Ix r0, int64_t nr) {
    for (int64_t c0 = 0; c0 < al.chunks; c0 += lm.block_chunks) {
      const int64_t nc = std::min(lm.block_chunks, al.chunks - c0);
      std::vector<Coords> rcs;
      for (int64_t i = 0; i < nr; ++i) rcs.push_back(rowCoords(at, add(r0, Ix{nullptr, i})));
      std::vector<llvm::Value*> cur;
      for (int64_t i = 0; i < nr; ++i)
        for (int64_t j = 0; j < nc; ++j) cur.push_back(vec(acc, add(r0, Ix{nullptr, i}), Ix{nullptr, c0 + j}));
      // Contributions ks (one, or bf16_pairs' pair) for the register tile: use(q, x, y) per
      // accumulator q = ri * nc + j, with its operands' values as `prep` makes them of the values
      // read at each of ks. Values shared across the tile (one per row for splats, one per chunk
      // for row-shared lane operands) are read and prepared once (bf16: rounded and flushed).
      using Prep = std::function<llvm::Value*(const std::vector<llvm::Value*>&)>;
      using Use = std::function<void(size_t, llvm::Value*, llvm::Value*)>;
      llvm::Type* i32v = llvm::FixedVectorType::get(b_.getInt32Ty(), w_);
      auto words = [&](llvm::Value* w) { return bf16Pairs(w); };  // 32-bit lanes as VDPBF16PS's pairs
      auto operands = [&](const std::vector<Ix>& ks, const std::array<Prep, 2>& prep, const Use& use) {
        std::vector<Coords> kcs;
        for (const Ix& k : ks) kcs.push_back(kCoords(k));
        auto read = [&](int i, const Coords& rc, Ix chunk) -> llvm::Value* {
          if (const plan::Layout& xl = lp_.layout[ops[i]->id]; xl.pair_words) {
            // A pair-word panel (plan::Layout::pair_words): row k / 2 holds contributions k and
            // k + 1 (or k alone, +0 beside it) as VDPBF16PS takes them.
            llvm::Value* w =
                b_.CreateLoad(vty(Elem::F32), slotPtr(xl.slot, Elem::F32, add(mul(div(ks[0], 2), xl.chunks), chunk)));
            return b_.CreateBitCast(w, llvm::FixedVectorType::get(b_.getBFloatTy(), 2 * w_));
          }
          if (lm.conversion[i] >= 0) {
            const plan::Conversion& c = lp_.conversions[lm.conversion[i]];
            if (c.pair_words) {
              // A pair-word transpose (plan::Conversion::pair_words): row k / 2 holds k and k + 1.
              llvm::Value* w =
                  b_.CreateLoad(vty(Elem::F32), slotPtr(c.slot, Elem::F32, add(mul(div(ks[0], 2), c.chunks), chunk)));
              return words(kcs.size() == 2 || i == 1 ? w : aloneWords(b_.CreateBitCast(w, i32v), i));
            }
            if (c.kind == plan::ConversionKind::Bf16Words) return splatPair(op, i, rc, kcs[0], kcs.size() == 2);
          }
          if (llvm::Value* w = kcs.size() == 2 && lm.broadcast[i] ? directPair(i, rc, kcs[0]) : nullptr) return w;
          std::vector<llvm::Value*> vals;
          for (const Coords& kc : kcs) vals.push_back(operand(i, rc, kc, chunk));
          return prep[i](vals);
        };
        std::vector<std::vector<llvm::Value*>> rowVals(2);
        for (int i = 0; i < 2; ++i)
          if (lm.broadcast[i])
            for (int64_t q = 0; q < nr; ++q) rowVals[i].push_back(read(i, rcs[q], Ix{nullptr, 0}));
        std::vector<std::vector<llvm::Value*>> shared(2, std::vector<llvm::Value*>(nc, nullptr));
        for (int64_t ri = 0; ri < nr; ++ri)
          for (int64_t j = 0; j < nc; ++j) {
            llvm::Value* x[2];
            for (int i = 0; i < 2; ++i) {
              if (lm.broadcast[i]) {
                x[i] = rowVals[i][ri];
              } else if (lm.row_shared[i]) {
                // A lane operand without the row's dims is shared by every row: read once (with
                // its prefetch, which LLVM does not merge as it merges loads).
                if (!shared[i][j]) shared[i][j] = read(i, rcs[ri], Ix{nullptr, c0 + j});
                x[i] = shared[i][j];
              } else {
                x[i] = read(i, rcs[ri], Ix{nullptr, c0 + j});
              }
            }
            use(ri * nc + j, x[0], x[1]);
          }
      };
      // The bf16 orders' operands (docs/ir.md, MMA): one contribution's value as a step takes it,
      // rounded to bf16 and flushed (a bf16 view's values are bf16 already: flushed only); with
      // VDPBF16PS (LaneMma::dpbf16) its bf16 bits in the low half of each 32-bit lane, a's with -0
      // (0x8000) in the high half and b's with +0, so the pair's other product is -0 and adds
      // nothing (docs/backend.md).
      const bool exact[2] = {exactBf16(a), exactBf16(bv)};
      auto value = [&](int i) {
        return [&, i](const std::vector<llvm::Value*>& v) -> llvm::Value* {
          if (!lm.dpbf16) return exact[i] ? ew_.flushTiny(v[0]) : ew_.bf16Operand(v[0]);
          return words(aloneWords(packPairWords(ops[i], v[0], nullptr), i));
        };
      };
      // A splat operand last, where VDPBF16PS takes memory (a 32-bit broadcast, which LLVM folds
      // where it has one use): each product is a's by b's either way, the same bits.
      auto dp = [&](llvm::Value* c, llvm::Value* x, llvm::Value* y) {
        return lm.broadcast[0] && !lm.broadcast[1] ? dpbf16(c, y, x) : dpbf16(c, x, y);
      };
      auto bf16Start = [&] {  // a bf16 order's accumulators flushed; K = 0 gives them as they are
        if (lm.dpbf16) requireFeature("+avx512bf16");
        if (mp.k > 0)
          for (llvm::Value*& c : cur) c = ew_.flushTiny(c);
      };
      if (op->mma_policy.bf16_pairs) {
        // docs/ir.md, MMA, bf16_pairs, for the whole register tile at once: one chain per
        // accumulator; per pair k+1's step, then k's (with VDPBF16PS one instruction: each 32-bit
        // lane holds the pair's bf16 words, k's in the low half, and the instruction adds the high
        // half's product first); whole pairs by a loop when planned; an odd count's last
        // contribution alone (VDPBF16PS with a -0 x +0 partner, as bf16_dot's).
        auto pairWords = [&](int i) {  // VDPBF16PS's operand for contributions k (low) and k+1 (high)
          return [&, i](const std::vector<llvm::Value*>& v) -> llvm::Value* {
            return words(packPairWords(ops[i], v[0], v[1]));
          };
        };
        auto single = [&](Ix k, std::vector<llvm::Value*> c) {
          operands({k}, {value(0), value(1)}, [&](size_t q, llvm::Value* x, llvm::Value* y) {
            c[q] = lm.dpbf16 ? dp(c[q], x, y) : ew_.bf16Step(c[q], x, y);
          });
          return c;
        };
        auto pair = [&](Ix k, std::vector<llvm::Value*> c) {
          if (!lm.dpbf16) return single(k, single(add(k, Ix{nullptr, 1}), std::move(c)));
          operands({k, add(k, Ix{nullptr, 1})}, {pairWords(0), pairWords(1)},
                   [&](size_t q, llvm::Value* x, llvm::Value* y) { c[q] = dp(c[q], x, y); });
          return c;
        };
        bf16Start();
        const int64_t pairs = mp.k / 2;
        int64_t done = 0;
        if (lm.k_loop) {
          cur =
              loop(b_.getInt64(0), b_.getInt64(pairs), 1, cur, [&](llvm::Value* t, const std::vector<llvm::Value*>& s) {
                return pair(mul(Ix{t, 0}, 2), s);
              });
          done = pairs;
        }
        for (int64_t t = done; t < pairs; ++t) cur = pair(Ix{nullptr, 2 * t}, cur);
        if (mp.k % 2) cur = single(Ix{nullptr, mp.k - 1}, cur);
      } else if (op->mma_policy.bf16_dot) {
        // docs/ir.md, MMA, bf16_dot, for the whole register tile at once: per block of 32 an
        // even and an odd chain per accumulator from +0, each operand rounded once per use
        // across the tile; whole blocks by a loop when planned, the last completed with +0.
        auto step = [&](llvm::Value* e, llvm::Value* x, llvm::Value* y) {
          return lm.dpbf16 ? dp(e, x, y) : ew_.bf16Step(e, x, y);
        };
        bf16Start();
        // A block's contributions two at a time (an even and an odd step) by a loop over the
        // pairs, so that a tile's code holds two steps, not 32; an odd count's last step after
        // it; then the +0 padding (once per chain that gets any: x + 0 twice is x + 0).
        auto block = [&](Ix k0, int64_t count, std::vector<llvm::Value*> s) {
          const size_t n = s.size();
          std::vector<llvm::Value*> chain(2 * n, llvm::Constant::getNullValue(vty(Elem::F32)));
          auto steps = [&](Ix k, int64_t parity, std::vector<llvm::Value*> c) {
            operands({k}, {value(0), value(1)}, [&](size_t q, llvm::Value* x, llvm::Value* y) {
              c[2 * q + parity] = step(c[2 * q + parity], x, y);
            });
            return c;
          };
          const int64_t pairs = count / 2;
          if (pairs > 1) {
            chain = loop(b_.getInt64(0), b_.getInt64(pairs), 1, chain,
                         [&](llvm::Value* t, const std::vector<llvm::Value*>& c) {
                           Ix k = add(k0, mul(Ix{t, 0}, 2));
                           return steps(add(k, Ix{nullptr, 1}), 1, steps(k, 0, c));
                         });
          } else if (pairs == 1) {
            chain = steps(add(k0, Ix{nullptr, 1}), 1, steps(k0, 0, chain));
          }
          if (count % 2) chain = steps(add(k0, Ix{nullptr, count - 1}), 0, chain);
          for (size_t q = 0; q < n; ++q) {
            if (count <= 30) chain[2 * q] = ew_.bf16Pad(chain[2 * q]);
            if (count <= 31) chain[2 * q + 1] = ew_.bf16Pad(chain[2 * q + 1]);
            s[q] = ew_.bf16Merge(s[q], chain[2 * q], chain[2 * q + 1]);
          }
          return s;
        };
        const int64_t full = mp.k / 32, tail = mp.k % 32;
        int64_t done = 0;
        if (lm.k_loop) {
          cur =
              loop(b_.getInt64(0), b_.getInt64(full), 1, cur, [&](llvm::Value* t, const std::vector<llvm::Value*>& s) {
                return block(mul(Ix{t, 0}, 32), 32, s);
              });
          done = full;
        }
        for (int64_t t = done; t < full; ++t) cur = block(Ix{nullptr, t * 32}, 32, cur);
        if (tail > 0) cur = block(Ix{nullptr, full * 32}, tail, cur);
      } else {
        auto body = [&](Ix k, std::vector<llvm::Value*> s) {
          auto same = [](const std::vector<llvm::Value*>& v) { return v[0]; };
          operands({k}, {same, same}, [&](size_t q, llvm::Value* x, llvm::Value* y) {
            s[q] = ew_.multiplyAdd(x, y, s[q], op->mma_policy);
          });
          return s;
        };
        if (lm.k_loop) {
          cur =
              loop(b_.getInt64(0), b_.getInt64(mp.k), 1, cur, [&](llvm::Value* k, const std::vector<llvm::Value*>& s) {
                return body(Ix{k, 0}, s);
              });
        } else {
          for (int64_t k = 0; k < mp.k; ++k) cur = body(Ix{nullptr, k}, cur);
        }
      }
      for (int64_t i = 0; i < nr; ++i)
        for (int64_t j = 0; j < nc; ++j) {
          Ix vi = add(mul(add(r0, Ix{nullptr, i}), al.chunks), Ix{nullptr, c0 + j});
          if (rl.rep == LaneRep::Vectors)
            vecs_[r->id][vi.c] = cur[i * nc + j];
          else
            b_.CreateStore(cur[i * nc + j], slotPtr(rl.slot, Elem::F32, vi));
        }
    }
  };
  // The full register tiles run as a loop over tiles when the plan says so (LaneMma::tiles_rolled):
  // one copy of the tile's code instead of one per tile. Register values on the way (e.g. a
  // per-row rescale broadcast into the accumulator) are copied to the stack before the loop.
  int64_t r0 = 0;
  if (lm.tiles_rolled) {
    for (const ir::Value* x : lm.spilled) spill(x);
    forEach(lm.full_tiles, true, [&](Ix t) { tileRows(mul(t, lm.block_rows), lm.block_rows); });
    for (const ir::Value* x : lm.spilled) spilled_.erase(x->id);
    r0 = lm.full_tiles * lm.block_rows;
  }
  for (; r0 < al.rows; r0 += lm.block_rows) tileRows(Ix{nullptr, r0}, std::min(lm.block_rows, al.rows - r0));
}

}  // namespace kiln::codegen
