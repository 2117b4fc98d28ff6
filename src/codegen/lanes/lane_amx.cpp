// The lane realization's mma form "amx" (plan::MmaForm::Amx; docs/backend.md, "MMA, bf16_dot on
// AMX"): an mma in the bf16 dot order on AMX tile instructions, whose arithmetic the order is
// (docs/ir.md, MMA), so the bits are the interpreter's. c[r, n] += a[r, k] b[n, k]:
//   - a is packed as bf16 rows (r, k) and b as TDPBF16PS's B operand: 32-bit words of two
//     consecutive k, word kp of row n at [kp][n]; both zero past their extents (rows to a multiple
//     of 16, K to one of 32: the padding's products are the +0 contributions that complete the
//     last block), rounded to bf16 by vcvtneps2bf16 (the instruction flushes subnormal operands
//     itself); b[n, k]'s words 16 rows at a time, a 16 x 16 block transposed in registers;
//   - C tiles are the accumulator panel's rows (whole 16 x 16 tiles) or a tile buffer's; K in
//     groups of up to 8 blocks of 32, every output tile per group, the C tile held in a tile
//     register, loaded and stored per group.
// The first AMX mma of a process asks Linux for the tile state (arch_prctl ARCH_REQ_XCOMP_PERM,
// once: a flag in the module), so an object runs in any process on an AMX host.
#include <llvm/IR/InlineAsm.h>
#include <llvm/IR/IntrinsicsX86.h>

#include "codegen/lanes/lane_emitter.h"

namespace kiln::codegen {

using ir::Elem;
using ir::Op;

namespace {
int64_t roundUp(int64_t x, int64_t m) {
  return (x + m - 1) / m * m;
}

// The rows of a 16 x 16 block of 32-bit words, transposed in registers: four rounds of
// two-source shuffles (rows h apart exchange their h-wide halves of columns).
void transpose16(llvm::IRBuilder<>& b, std::vector<llvm::Value*>& t) {
  for (unsigned h = 8; h >= 1; h /= 2) {
    std::vector<int> lo(16), hi(16);
    for (unsigned j = 0; j < 16; ++j) {
      lo[j] = static_cast<int>((j & h) ? 16 + j - h : j);
      hi[j] = static_cast<int>((j & h) ? 16 + j : j + h);
    }
    for (unsigned i = 0; i < 16; ++i)
      if (!(i & h)) {
        llvm::Value* x = t[i];
        t[i] = b.CreateShuffleVector(x, t[i + h], lo);
        t[i + h] = b.CreateShuffleVector(x, t[i + h], hi);
      }
  }
}

// Two chunks of 16 bf16 (k and k + 16 on) as the 16 words of 16 pairs of k.
llvm::Value* words32(llvm::IRBuilder<>& b, llvm::Value* lo, llvm::Value* hi) {
  std::vector<int> both(32);
  for (unsigned j = 0; j < 32; ++j) both[j] = static_cast<int>(j);
  return b.CreateBitCast(b.CreateShuffleVector(lo, hi, both), llvm::FixedVectorType::get(b.getInt32Ty(), 16));
}
}  // namespace

void LaneEmitter::requestTileState() {
  llvm::Module& m = *f_->getParent();
  auto* flag = m.getGlobalVariable("kiln.amx_granted", true);
  if (!flag)
    flag = new llvm::GlobalVariable(m, b_.getInt8Ty(), false, llvm::GlobalValue::InternalLinkage, b_.getInt8(0),
                                    "kiln.amx_granted");
  llvm::Value* granted = b_.CreateICmpNE(b_.CreateLoad(b_.getInt8Ty(), flag), b_.getInt8(0));
  llvm::BasicBlock* ask = llvm::BasicBlock::Create(c_, "amx.ask", f_);
  llvm::BasicBlock* done = llvm::BasicBlock::Create(c_, "amx.granted", f_);
  b_.CreateCondBr(granted, done, ask);
  b_.SetInsertPoint(ask);
  // syscall(SYS_arch_prctl = 158, ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18)
  auto* ty = llvm::FunctionType::get(b_.getInt64Ty(), {b_.getInt64Ty(), b_.getInt64Ty(), b_.getInt64Ty()}, false);
  auto* sys = llvm::InlineAsm::get(ty, "syscall", "={rax},{rax},{rdi},{rsi},~{rcx},~{r11},~{memory}", true);
  b_.CreateCall(ty, sys, {b_.getInt64(158), b_.getInt64(0x1023), b_.getInt64(18)});
  b_.CreateStore(b_.getInt8(1), flag);
  b_.CreateBr(done);
  b_.SetInsertPoint(done);
}

// 16 floats to bf16 bits by AVX-512 BF16's vcvtneps2bf16: to nearest even, like the definition,
// except that a subnormal input gives a zero where the definition gives a bf16 subnormal, which
// TDPBF16PS then reads as zero; a zero operand's sign never shows (the chains start from +0).
llvm::Value* LaneEmitter::bf16Vector(llvm::Value* v) {
  llvm::Value* h = b_.CreateIntrinsic(llvm::Intrinsic::x86_avx512bf16_cvtneps2bf16_512, {}, {v});
  return b_.CreateBitCast(h, llvm::FixedVectorType::get(b_.getInt16Ty(), w_));
}

// A stack buffer of n elements, 64-byte aligned, in the function's entry block.
llvm::Value* LaneEmitter::amxBuffer(llvm::Type* t, int64_t n) {
  llvm::IRBuilder<>::InsertPointGuard g(b_);
  b_.SetInsertPoint(entry_, entry_->getFirstInsertionPt());
  auto* x = b_.CreateAlloca(llvm::ArrayType::get(t, static_cast<uint64_t>(n)));
  x->setAlignment(llvm::Align(64));
  return x;
}

// A 16 x 64-byte tile from ptr, rows strideBytes apart; stored back; C += A . B (TDPBF16PS).
llvm::Value* LaneEmitter::amxLoad(llvm::Value* ptr, llvm::Value* strideBytes) {
  return b_.CreateIntrinsic(llvm::Intrinsic::x86_tileloadd64_internal, {},
                            {b_.getInt16(16), b_.getInt16(64), ptr, strideBytes});
}
void LaneEmitter::amxStore(llvm::Value* ptr, llvm::Value* strideBytes, llvm::Value* tile) {
  b_.CreateIntrinsic(llvm::Intrinsic::x86_tilestored64_internal, {},
                     {b_.getInt16(16), b_.getInt16(64), ptr, strideBytes, tile});
}
llvm::Value* LaneEmitter::amxDot(llvm::Value* c, llvm::Value* a, llvm::Value* b) {
  return b_.CreateIntrinsic(llvm::Intrinsic::x86_tdpbf16ps_internal, {},
                            {b_.getInt16(16), b_.getInt16(64), b_.getInt16(64), c, a, b});
}

// K's blocks of 32 in groups of up to 8, one C load and store per group: body(first block,
// blocks in the group), whole groups in a loop, the rest after it.
void LaneEmitter::amxKGroups(int64_t Kp, const std::function<void(Ix, int64_t)>& body) {
  const int64_t blocks = Kp / 32, group = std::min<int64_t>(8, blocks), groups = blocks / group, rest = blocks % group;
  forEach(groups, groups > 1, [&](Ix g) { body(mul(g, group), group); });
  if (rest > 0) body(Ix{nullptr, groups * group}, rest);
}

// A vector of an operand as bf16 bits: a bf16 view's read at use as they are (its values are
// bf16 already), anything else rounded.
llvm::Value* LaneEmitter::amxBits(const ir::Value* x, Ix row, Ix chunk) {
  const ir::Op* def = x->def;
  if (lp_.layout[x->id].rep == plan::LaneRep::Direct && def && def->kind == ir::OpKind::Load &&
      def->operands[0]->type.elem == Elem::BF16)
    return loadMemoryVector(def, row, chunk);
  return bf16Vector(vec(x, row, chunk));
}

// A chunk of K of a row of an operand (rows by their first dim), past K's extent zero, as bf16.
llvm::Value* LaneEmitter::amxChunk(const ir::Value* x, Ix row, int64_t chunk, int64_t K) {
  Coords cs = {row, Ix{nullptr, 0}};
  llvm::Value* v = amxBits(x, rowOf(x->type, cs), Ix{nullptr, chunk});
  if ((chunk + 1) * static_cast<int64_t>(w_) > K)
    v = b_.CreateSelect(laneMask(K - chunk * static_cast<int64_t>(w_)), v, llvm::Constant::getNullValue(v->getType()));
  return v;
}

// The 32-bit words (two consecutive k) of 16 rows of x (rows by their first dim: row(i), or none
// for a row of zeros), K's chunks two at a time, transposed in registers: store(t, kp0) gets
// vector j = word kp0 + j of the 16 rows. Whole pairs of chunks in a loop, read as they are; a
// last, partial pair masked past K.
void LaneEmitter::amxWordPairs(const ir::Value* x, const std::function<std::optional<Ix>(unsigned)>& row, int64_t K,
                               const std::function<void(const std::vector<llvm::Value*>&, Ix)>& store) {
  const int64_t pairs = K / 32, chunksK = (K + w_ - 1) / w_;
  llvm::Value* zero = llvm::Constant::getNullValue(llvm::FixedVectorType::get(b_.getInt32Ty(), 16));
  auto pair = [&](Ix pr, bool partial) {
    std::vector<llvm::Value*> t;
    for (unsigned i = 0; i < 16; ++i) {
      const std::optional<Ix> r = row(i);
      if (!r) {
        t.push_back(zero);
        continue;
      }
      llvm::Value *lo, *hi;
      if (!partial) {
        Coords cs = {*r, Ix{nullptr, 0}};
        lo = amxBits(x, rowOf(x->type, cs), mul(pr, 2));
        hi = amxBits(x, rowOf(x->type, cs), add(mul(pr, 2), Ix{nullptr, 1}));
      } else {
        const int64_t c = 2 * pairs;
        lo = amxChunk(x, *r, c, K);
        hi = c + 1 < chunksK ? amxChunk(x, *r, c + 1, K) : llvm::Constant::getNullValue(lo->getType());
      }
      t.push_back(words32(b_, lo, hi));
    }
    transpose16(b_, t);
    store(t, mul(pr, 16));
  };
  forEach(pairs, pairs > 1, [&](Ix pr) { pair(pr, false); });
  if (K % 32 != 0) pair(Ix{nullptr, pairs}, true);
}

// The rows of x (rows x K, K last) as TDPBF16PS's A operand: straight from x's bf16 view when
// the tile lies inside it in whole 16-row tiles and blocks of 32 (tileloadd takes the view's row
// stride), else `copy` puts them in buf, bufRowBytes apart. Returns the first row's address and
// the rows' stride in bytes.
std::pair<llvm::Value*, llvm::Value*> LaneEmitter::amxRows(const ir::Value* x, int64_t rows, int64_t K,
                                                           llvm::Value* buf, int64_t bufRowBytes,
                                                           const std::function<void()>& copy) {
  const ir::Op* load = x->def;
  const ir::Type& t = x->type;
  if (K <= 0) return {buf, b_.getInt64(bufRowBytes)};
  if (!(lp_.layout[x->id].rep == plan::LaneRep::Direct && load && load->kind == ir::OpKind::Load &&
        load->operands[0]->type.elem == Elem::BF16 && load->access.back().name == t.dims.back().name && K % 32 == 0 &&
        rows % 16 == 0)) {
    copy();
    return {buf, b_.getInt64(bufRowBytes)};
  }
  llvm::BasicBlock* fast = llvm::BasicBlock::Create(c_, "amx.rows.view", f_);
  llvm::BasicBlock* slow = llvm::BasicBlock::Create(c_, "amx.rows.copy", f_);
  llvm::BasicBlock* done = llvm::BasicBlock::Create(c_, "amx.rows.ready", f_);
  b_.CreateCondBr(tileInside(load), fast, slow);
  b_.SetInsertPoint(fast);
  inside_ = {load};
  llvm::Value* inb = nullptr;
  llvm::Value* row0 = elementPointer(load, t, rowCoords(t, Ix{nullptr, 0}), Ix{nullptr, 0}, inb);
  llvm::Value* row1 = elementPointer(load, t, rowCoords(t, Ix{nullptr, 1}), Ix{nullptr, 0}, inb);
  inside_.clear();
  llvm::Value* stride =
      b_.CreateSub(b_.CreatePtrToInt(row1, b_.getInt64Ty()), b_.CreatePtrToInt(row0, b_.getInt64Ty()));
  llvm::BasicBlock* fastEnd = b_.GetInsertBlock();
  b_.CreateBr(done);
  b_.SetInsertPoint(slow);
  copy();
  llvm::BasicBlock* slowEnd = b_.GetInsertBlock();
  b_.CreateBr(done);
  b_.SetInsertPoint(done);
  auto* base = b_.CreatePHI(row0->getType(), 2);
  base->addIncoming(row0, fastEnd);
  base->addIncoming(buf, slowEnd);
  auto* step = b_.CreatePHI(b_.getInt64Ty(), 2);
  step->addIncoming(stride, fastEnd);
  step->addIncoming(b_.getInt64(bufRowBytes), slowEnd);
  return {base, step};
}

void LaneEmitter::emitMmaAmx(const Op* op) {
  if (lp_.mma.at(op).amx_b_first) return emitMmaAmxBFirst(op);
  const auto [a, bv, acc, r, mp, lm] = mmaParts(op);
  (void)lm;
  const ir::Type& at = acc->type;
  const int64_t M = at.dims[0].extent, N = at.dims[1].extent, K = mp.k;
  const int64_t M16 = roundUp(M, 16), N16 = roundUp(N, 16), Kp = roundUp(std::max<int64_t>(K, 1), 32);
  const int64_t chunksK = (K + w_ - 1) / w_, chunksN = (N + w_ - 1) / w_;
  // Rows of the A and B buffers a line longer than their data (bf16 words of A, 32-bit words of
  // B): a power-of-two row stride would put a tile's 16 rows in a few cache sets.
  const int64_t aRow = Kp + 32, bRow = N16 + 16;
  requireFeature("+amx-tile,+amx-bf16,+avx512bf16");

  // Whole 16 x 16 tiles of a result in memory: the C tiles are the result's own rows (a panel is
  // row-major, N floats a row), the accumulator copied there first unless it is the same panel
  // (a loop's carried accumulator, updated in place); else through a tile buffer.
  const plan::Layout& al = lp_.layout[acc->id];
  const plan::Layout& rl = lp_.layout[r->id];
  const bool inPlace = M == M16 && N == N16 && al.rep == plan::LaneRep::Panel && rl.rep == plan::LaneRep::Panel;
  llvm::Value* abuf = amxBuffer(b_.getInt16Ty(), M16 * aRow);
  llvm::Value* bbuf = amxBuffer(b_.getInt32Ty(), Kp / 2 * bRow);
  llvm::Value* cbuf = inPlace ? nullptr : amxBuffer(b_.getFloatTy(), M16 * N16);
  if (inPlace) {
    cbuf = slotPtr(rl.slot, Elem::F32, Ix{nullptr, 0});
    if (al.slot != rl.slot)
      b_.CreateMemCpy(cbuf, llvm::MaybeAlign(4), slotPtr(al.slot, Elem::F32, Ix{nullptr, 0}), llvm::MaybeAlign(4),
                      M * N * 4);
  }
  requestTileState();
  // Padding (rows past M, K past its extent, columns past N) must hold zeros.
  if (N16 != N || K % 32 != 0) b_.CreateMemSet(bbuf, b_.getInt8(0), Kp / 2 * bRow * 4, llvm::Align(64));

  auto bits = [&](const ir::Value* x, Ix row, Ix chunk) { return amxBits(x, row, chunk); };
  auto packed = [&](const ir::Value* x, Ix row, int64_t chunk) { return amxChunk(x, row, chunk, K); };
  auto gep = [&](llvm::Type* t, llvm::Value* base, llvm::Value* index) { return b_.CreateInBoundsGEP(t, base, index); };
  // a's tiles: rows of bf16 from aBase, aRows bytes apart: its bf16 view's own, or a copy in
  // abuf (zero past M and past K).
  const auto [aBase, aRows] = amxRows(a, M, K, abuf, aRow * 2, [&] {
    if (M16 != M || K % 32 != 0) b_.CreateMemSet(abuf, b_.getInt8(0), M16 * aRow * 2, llvm::Align(64));
    forEach(M, true, [&](Ix m) {
      for (int64_t c = 0; c < chunksK; ++c)
        b_.CreateAlignedStore(packed(a, m, c), gep(b_.getInt16Ty(), abuf, val(add(mul(m, aRow), Ix{nullptr, c * w_}))),
                              llvm::Align(2));
    });
  });
  if (K > 0) {
    if (bv->type.dims[0].name == op->dims[0]) {
      // b[k, n]: rows 2kp and 2kp + 1 interleaved element by element are row kp of the words.
      auto row = [&](Ix k, int64_t c, bool inside) -> llvm::Value* {
        if (!inside) return llvm::Constant::getNullValue(llvm::FixedVectorType::get(b_.getInt16Ty(), w_));
        Coords cs = {k, Ix{nullptr, 0}};
        return bits(bv, rowOf(bv->type, cs), Ix{nullptr, c});
      };
      std::vector<int> mix;
      for (unsigned j = 0; j < w_; ++j) mix.push_back(static_cast<int>(j)), mix.push_back(static_cast<int>(j + w_));
      auto pairRow = [&](Ix kp, bool oddInside) {
        for (int64_t c = 0; c < chunksN; ++c) {
          llvm::Value* v =
              b_.CreateShuffleVector(row(mul(kp, 2), c, true), row(add(mul(kp, 2), Ix{nullptr, 1}), c, oddInside), mix);
          b_.CreateAlignedStore(v, gep(b_.getInt16Ty(), bbuf, val(add(mul(kp, 2 * bRow), Ix{nullptr, 2 * c * w_}))),
                                llvm::Align(4));
        }
      };
      forEach(K / 2, true, [&](Ix kp) { pairRow(kp, true); });
      if (K % 2) pairRow(Ix{nullptr, K / 2}, false);
    } else {
      // b[n, k]: the words of 16 rows at a time (amxWordPairs), stored as rows kp of the
      // words; the last rows of N not a multiple of 16 word by word.
      if (w_ == 16 && N >= 16)
        forEach(N / 16, true, [&](Ix nb) {
          Ix n0 = mul(nb, 16);
          amxWordPairs(
              bv,
              [&](unsigned i) {
                return std::optional<Ix>(add(n0, Ix{nullptr, i}));
              },
              K,
              [&](const std::vector<llvm::Value*>& t, Ix kp0) {
                for (unsigned j = 0; j < 16; ++j)
                  b_.CreateAlignedStore(t[j],
                                        gep(b_.getInt32Ty(), bbuf, val(add(mul(add(kp0, Ix{nullptr, j}), bRow), n0))),
                                        llvm::Align(4));
              });
        });
      const int64_t nWords = w_ == 16 ? N / 16 * 16 : 0;
      forEach(N - nWords, true, [&](Ix nr) {
        Ix n = add(nr, Ix{nullptr, nWords});
        for (int64_t c = 0; c < chunksK; ++c) {
          llvm::Value* words = b_.CreateBitCast(packed(bv, n, c), llvm::FixedVectorType::get(b_.getInt32Ty(), w_ / 2));
          for (unsigned j = 0; j < w_ / 2; ++j) {
            Ix at = add(Ix{nullptr, (c * w_ / 2 + j) * bRow}, n);
            b_.CreateAlignedStore(b_.CreateExtractElement(words, uint64_t(j)), gep(b_.getInt32Ty(), bbuf, val(at)),
                                  llvm::Align(4));
          }
        }
      });
    }
  }
  // The accumulator into the tile buffer (columns past N hold whatever the last vector had).
  if (!inPlace)
    forEach(M, true, [&](Ix m) {
      Coords cs = {m, Ix{nullptr, 0}};
      for (int64_t c = 0; c < chunksN; ++c)
        b_.CreateAlignedStore(vec(acc, rowOf(at, cs), Ix{nullptr, c}),
                              gep(b_.getFloatTy(), cbuf, val(add(mul(m, N16), Ix{nullptr, c * w_}))), llvm::Align(4));
    });
  if (K > 0) {
    // Output tiles two by two where they pair (2 x 2: 4 C, 2 A and 2 B tiles, the 8 tile
    // registers): each A and B tile loaded serves two products.
    auto square = [&](int64_t i0, int64_t ni, int64_t j0, int64_t nj, Ix first, int64_t count) {
      std::vector<llvm::Value*> cptr;
      for (int64_t i = i0; i < i0 + ni; ++i)
        for (int64_t j = j0; j < j0 + nj; ++j)
          cptr.push_back(gep(b_.getFloatTy(), cbuf, b_.getInt64(i * 16 * N16 + j * 16)));
      std::vector<llvm::Value*> c;
      for (llvm::Value* p : cptr) c.push_back(amxLoad(p, b_.getInt64(N16 * 4)));
      for (int64_t q = 0; q < count; ++q) {
        Ix kb = add(first, Ix{nullptr, q});
        std::vector<llvm::Value*> ta, tb;
        for (int64_t i = i0; i < i0 + ni; ++i)
          ta.push_back(amxLoad(
              gep(b_.getInt8Ty(), aBase, b_.CreateAdd(b_.CreateMul(b_.getInt64(i * 16), aRows), val(mul(kb, 64)))),
              aRows));
        for (int64_t j = j0; j < j0 + nj; ++j)
          tb.push_back(amxLoad(gep(b_.getInt32Ty(), bbuf, val(add(Ix{nullptr, j * 16}, mul(kb, 16 * bRow)))),
                               b_.getInt64(bRow * 4)));
        for (int64_t i = 0; i < ni; ++i)
          for (int64_t j = 0; j < nj; ++j) c[i * nj + j] = amxDot(c[i * nj + j], ta[i], tb[j]);
      }
      for (size_t t = 0; t < c.size(); ++t) amxStore(cptr[t], b_.getInt64(N16 * 4), c[t]);
    };
    const int64_t ti = M16 / 16, tj = N16 / 16;
    auto squares = [&](Ix first, int64_t count) {
      for (int64_t i = 0; i < ti; i += 2)
        for (int64_t j = 0; j < tj; j += 2)
          square(i, std::min<int64_t>(2, ti - i), j, std::min<int64_t>(2, tj - j), first, count);
    };
    amxKGroups(Kp, squares);
  }
  // The result from the tile buffer (plan: in memory).
  if (inPlace) return;
  forEach(M, true, [&](Ix m) {
    Coords cs = {m, Ix{nullptr, 0}};
    for (int64_t c = 0; c < chunksN; ++c) {
      llvm::Value* v = b_.CreateAlignedLoad(
          vty(Elem::F32), gep(b_.getFloatTy(), cbuf, val(add(mul(m, N16), Ix{nullptr, c * w_}))), llvm::Align(4));
      b_.CreateStore(v, slotPtr(rl.slot, Elem::F32, vindex(r, rowOf(r->type, cs), Ix{nullptr, c})));
    }
  });
}

// LaneMma::amx_b_first: c[r, n] += a[r, k] b[n, k] with at most 16 rows r, computed as its
// transpose c^T[n, r] += b[n, k] a[r, k]^T, the same products in the same order (the dot is
// symmetric in its operands): b's rows are TDPBF16PS's A operand as they are (copied as bf16 rows,
// zero past the extents), a's rows its B (their words transposed, 16 rows with zeros past r);
// the C tiles hold c^T, 16 columns of n a tile, transposed in from the accumulator and out to the
// result.
void LaneEmitter::emitMmaAmxBFirst(const Op* op) {
  const auto [a, bv, acc, r, mp, lm] = mmaParts(op);
  (void)lm;
  const ir::Type& at = acc->type;
  const int64_t M = at.dims[0].extent, N = at.dims[1].extent, K = mp.k;
  const int64_t N16 = roundUp(N, 16), Kp = roundUp(std::max<int64_t>(K, 1), 32);
  const int64_t chunksK = (K + w_ - 1) / w_, tiles = N16 / 16;
  // b's rows a cache line longer than their data (a power-of-two stride puts a tile's rows in a
  // few cache sets); a^T's rows are 16 words, one line each, in order.
  const int64_t bRow = Kp + 32;
  requireFeature("+amx-tile,+amx-bf16,+avx512bf16");
  const plan::Layout& rl = lp_.layout[r->id];
  llvm::Value* bbuf = amxBuffer(b_.getInt16Ty(), N16 * bRow);
  llvm::Value* abuf = amxBuffer(b_.getInt32Ty(), Kp / 2 * 16);
  llvm::Value* cbuf = amxBuffer(b_.getFloatTy(), N16 * 16);
  requestTileState();
  auto gep = [&](llvm::Type* t, llvm::Value* base, llvm::Value* index) { return b_.CreateInBoundsGEP(t, base, index); };
  auto i32s = [&](llvm::Value* v) { return b_.CreateBitCast(v, llvm::FixedVectorType::get(b_.getInt32Ty(), 16)); };
  llvm::Value* zero = llvm::Constant::getNullValue(llvm::FixedVectorType::get(b_.getInt32Ty(), 16));
  auto rowOfA = [&](const ir::Type& t, int64_t i) {
    Coords cs = {Ix{nullptr, i}, Ix{nullptr, 0}};
    return rowOf(t, cs);
  };
  // b's tiles: rows of bf16, from bBase, bRows bytes apart: the view's own or a copy in bbuf,
  // zero past N and past K (to the last block's end).
  const auto [bBase, bRows] = amxRows(bv, N, K, bbuf, bRow * 2, [&] {
    if (N16 != N || K % 32 != 0) b_.CreateMemSet(bbuf, b_.getInt8(0), N16 * bRow * 2, llvm::Align(64));
    forEach(N, true, [&](Ix n) {
      for (int64_t c = 0; c < chunksK; ++c)
        b_.CreateAlignedStore(amxChunk(bv, n, c, K),
                              gep(b_.getInt16Ty(), bbuf, val(add(mul(n, bRow), Ix{nullptr, c * w_}))), llvm::Align(2));
    });
  });
  if (K > 0) {
    // a^T's words: row kp holds (a[i, 2kp], a[i, 2kp + 1]) at column i, rows of a past M zero.
    amxWordPairs(
        a,
        [&](unsigned i) {
          return i < M ? std::optional<Ix>(Ix{nullptr, i}) : std::nullopt;
        },
        K,
        [&](const std::vector<llvm::Value*>& t, Ix kp0) {
          for (unsigned j = 0; j < 16; ++j)
            b_.CreateAlignedStore(t[j], gep(b_.getInt32Ty(), abuf, val(mul(add(kp0, Ix{nullptr, j}), 16))),
                                  llvm::Align(64));
        });
  }
  // The accumulator's transpose into the C buffer: tile j holds c^T[16j + q, i] at row 16j + q.
  forEach(tiles, true, [&](Ix j) {
    std::vector<llvm::Value*> t;
    for (int64_t i = 0; i < 16; ++i) t.push_back(i < M ? i32s(vec(acc, rowOfA(at, i), j)) : zero);
    transpose16(b_, t);
    for (unsigned q = 0; q < 16; ++q)
      b_.CreateAlignedStore(t[q], gep(b_.getFloatTy(), cbuf, val(mul(add(mul(j, 16), Ix{nullptr, q}), 16))),
                            llvm::Align(64));
  });
  if (K > 0) {
    // Two C tiles at a time (32 rows of b streaming at once: the hardware prefetcher keeps up
    // with them; 4 tiles' 64 rows took 2.3x the time, 1 x 5632 x 2048 from DRAM, tile 1x64x1024),
    // K in groups of up to 8 blocks per C load and store; a^T's tile serves both products.
    auto run = [&](Ix j0, int64_t nt) {
      auto block = [&](Ix first, int64_t count) {
        std::vector<llvm::Value*> cptr, c;
        for (int64_t q = 0; q < nt; ++q) {
          cptr.push_back(gep(b_.getFloatTy(), cbuf, val(mul(add(j0, Ix{nullptr, q}), 256))));
          c.push_back(amxLoad(cptr.back(), b_.getInt64(64)));
        }
        for (int64_t u = 0; u < count; ++u) {
          Ix kb = add(first, Ix{nullptr, u});
          llvm::Value* tb = amxLoad(gep(b_.getInt32Ty(), abuf, val(mul(kb, 256))), b_.getInt64(64));
          for (int64_t q = 0; q < nt; ++q) {
            llvm::Value* at16 = b_.CreateMul(val(mul(add(j0, Ix{nullptr, q}), 16)), bRows);
            llvm::Value* ta = amxLoad(gep(b_.getInt8Ty(), bBase, b_.CreateAdd(at16, val(mul(kb, 64)))), bRows);
            c[q] = amxDot(c[q], ta, tb);
          }
        }
        for (int64_t q = 0; q < nt; ++q) amxStore(cptr[q], b_.getInt64(64), c[q]);
      };
      amxKGroups(Kp, block);
    };
    forEach(tiles / 2, tiles / 2 > 1, [&](Ix g) { run(mul(g, 2), 2); });
    if (tiles % 2) run(Ix{nullptr, tiles / 2 * 2}, 1);
  }
  // The result: each C tile transposed back, its first M rows (plan: in memory).
  forEach(tiles, true, [&](Ix j) {
    std::vector<llvm::Value*> t;
    for (unsigned q = 0; q < 16; ++q)
      t.push_back(b_.CreateAlignedLoad(llvm::FixedVectorType::get(b_.getInt32Ty(), 16),
                                       gep(b_.getFloatTy(), cbuf, val(mul(add(mul(j, 16), Ix{nullptr, q}), 16))),
                                       llvm::Align(64)));
    transpose16(b_, t);
    for (int64_t i = 0; i < M; ++i) {
      Coords cs = {Ix{nullptr, i}, Ix{nullptr, 0}};
      b_.CreateStore(b_.CreateBitCast(t[i], vty(Elem::F32)),
                     slotPtr(rl.slot, Elem::F32, vindex(r, rowOf(r->type, cs), j)));
    }
  });
}

}  // namespace kiln::codegen
