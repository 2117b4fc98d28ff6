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

void LaneEmitter::emitMmaAmx(const Op* op) {
  const auto [a, bv, acc, r, mp, lm] = mmaParts(op);
  (void)lm;
  const ir::Type& at = acc->type;
  const int64_t M = at.dims[0].extent, N = at.dims[1].extent, K = mp.k;
  const int64_t M16 = roundUp(M, 16), N16 = roundUp(N, 16), Kp = roundUp(std::max<int64_t>(K, 1), 32);
  const int64_t chunksK = (K + w_ - 1) / w_, chunksN = (N + w_ - 1) / w_;
  // Rows of the A and B buffers a line longer than their data (bf16 words of A, 32-bit words of
  // B): a power-of-two row stride would put a tile's 16 rows in a few cache sets.
  const int64_t aRow = Kp + 32, bRow = N16 + 16;
  f_->addFnAttr("target-features", "+amx-tile,+amx-bf16,+avx512bf16");

  // Whole 16 x 16 tiles of a result in memory: the C tiles are the result's own rows (a panel is
  // row-major, N floats a row), the accumulator copied there first unless it is the same panel
  // (a loop's carried accumulator, updated in place); else through a tile buffer.
  const plan::Layout& al = lp_.layout[acc->id];
  const plan::Layout& rl = lp_.layout[r->id];
  const bool inPlace = M == M16 && N == N16 && al.rep == plan::LaneRep::Panel && rl.rep == plan::LaneRep::Panel;
  llvm::Value *abuf = nullptr, *bbuf = nullptr, *cbuf = nullptr;
  {
    llvm::IRBuilder<>::InsertPointGuard g(b_);
    b_.SetInsertPoint(entry_, entry_->getFirstInsertionPt());
    auto buffer = [&](llvm::Type* t, int64_t n) {
      auto* x = b_.CreateAlloca(llvm::ArrayType::get(t, static_cast<uint64_t>(n)));
      x->setAlignment(llvm::Align(64));
      return x;
    };
    abuf = buffer(b_.getInt16Ty(), M16 * aRow);
    bbuf = buffer(b_.getInt32Ty(), Kp / 2 * bRow);
    if (!inPlace) cbuf = buffer(b_.getFloatTy(), M16 * N16);
  }
  if (inPlace) {
    cbuf = slotPtr(rl.slot, Elem::F32, Ix{nullptr, 0});
    if (al.slot != rl.slot)
      b_.CreateMemCpy(cbuf, llvm::MaybeAlign(4), slotPtr(al.slot, Elem::F32, Ix{nullptr, 0}), llvm::MaybeAlign(4),
                      M * N * 4);
  }
  requestTileState();
  // Padding (rows past M, K past its extent, columns past N) must hold zeros.
  if (M16 != M || K % 32 != 0) b_.CreateMemSet(abuf, b_.getInt8(0), M16 * aRow * 2, llvm::Align(64));
  if (N16 != N || K % 32 != 0) b_.CreateMemSet(bbuf, b_.getInt8(0), Kp / 2 * bRow * 4, llvm::Align(64));

  // A vector of an operand as bf16 bits: a bf16 view's read at use as they are (its values are
  // bf16 already), anything else rounded.
  auto bits = [&](const ir::Value* x, Ix row, Ix chunk) {
    const ir::Op* def = x->def;
    if (lp_.layout[x->id].rep == plan::LaneRep::Direct && def && def->kind == ir::OpKind::Load &&
        def->operands[0]->type.elem == Elem::BF16)
      return loadMemoryVector(def, row, chunk);
    return bf16Vector(vec(x, row, chunk));
  };
  // A chunk of K of a row of an operand (rows by their first dim), past K's extent zero, as bf16.
  auto packed = [&](const ir::Value* x, Ix row, int64_t chunk) {
    Coords cs = {row, Ix{nullptr, 0}};
    llvm::Value* v = bits(x, rowOf(x->type, cs), Ix{nullptr, chunk});
    if ((chunk + 1) * static_cast<int64_t>(w_) > K)
      v = b_.CreateSelect(laneMask(K - chunk * static_cast<int64_t>(w_)), v,
                          llvm::Constant::getNullValue(v->getType()));
    return v;
  };
  auto gep = [&](llvm::Type* t, llvm::Value* base, llvm::Value* index) { return b_.CreateInBoundsGEP(t, base, index); };
  if (K > 0) {
    forEach(M, true, [&](Ix m) {
      for (int64_t c = 0; c < chunksK; ++c)
        b_.CreateAlignedStore(packed(a, m, c), gep(b_.getInt16Ty(), abuf, val(add(mul(m, aRow), Ix{nullptr, c * w_}))),
                              llvm::Align(2));
    });
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
      // b[n, k]: the words of 16 rows are a 16 x 16 block of 32-bit words, transposed in
      // registers (four rounds of two-source shuffles) and stored as 16 rows of the words; the
      // last rows of N not a multiple of 16 word by word.
      auto words32 = [&](llvm::Value* lo, llvm::Value* hi) {  // two chunks of 16 bf16: 16 words
        std::vector<int> both(2 * w_);
        for (unsigned j = 0; j < 2 * w_; ++j) both[j] = static_cast<int>(j);
        return b_.CreateBitCast(b_.CreateShuffleVector(lo, hi, both), llvm::FixedVectorType::get(b_.getInt32Ty(), w_));
      };
      auto transposeStore = [&](std::vector<llvm::Value*> t, Ix n0, Ix kp0) {
        for (unsigned h = 8; h >= 1; h /= 2) {
          std::vector<int> lo(16), hi(16);
          for (unsigned j = 0; j < 16; ++j) {
            lo[j] = static_cast<int>((j & h) ? 16 + j - h : j);
            hi[j] = static_cast<int>((j & h) ? 16 + j : j + h);
          }
          for (unsigned i = 0; i < 16; ++i)
            if (!(i & h)) {
              llvm::Value* x = t[i];
              t[i] = b_.CreateShuffleVector(x, t[i + h], lo);
              t[i + h] = b_.CreateShuffleVector(x, t[i + h], hi);
            }
        }
        for (unsigned j = 0; j < 16; ++j)
          b_.CreateAlignedStore(t[j], gep(b_.getInt32Ty(), bbuf, val(add(mul(add(kp0, Ix{nullptr, j}), bRow), n0))),
                                llvm::Align(4));
      };
      const int64_t pairs = K / 32;  // pairs of chunks inside K; the last, partial one masked
      if (w_ == 16 && N >= 16)
        forEach(N / 16, true, [&](Ix nb) {
          Ix n0 = mul(nb, 16);
          auto rowAt = [&](unsigned i) {
            Coords cs = {add(n0, Ix{nullptr, i}), Ix{nullptr, 0}};
            return rowOf(bv->type, cs);
          };
          forEach(pairs, pairs > 1, [&](Ix pr) {
            std::vector<llvm::Value*> t;
            for (unsigned i = 0; i < 16; ++i)
              t.push_back(words32(bits(bv, rowAt(i), mul(pr, 2)), bits(bv, rowAt(i), add(mul(pr, 2), Ix{nullptr, 1}))));
            transposeStore(t, n0, mul(pr, 16));
          });
          if (K % 32 != 0) {
            const int64_t c = 2 * pairs;
            std::vector<llvm::Value*> t;
            for (unsigned i = 0; i < 16; ++i) {
              llvm::Value* lo = packed(bv, add(n0, Ix{nullptr, i}), c);
              llvm::Value* hi = c + 1 < chunksK ? packed(bv, add(n0, Ix{nullptr, i}), c + 1)
                                                : llvm::Constant::getNullValue(lo->getType());
              t.push_back(words32(lo, hi));
            }
            transposeStore(t, n0, Ix{nullptr, pairs * 16});
          }
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
    llvm::Value* i16 = b_.getInt16(16);
    llvm::Value* b64 = b_.getInt16(64);
    auto tileLoad = [&](llvm::Value* ptr, int64_t strideBytes) {
      return b_.CreateIntrinsic(llvm::Intrinsic::x86_tileloadd64_internal, {},
                                {i16, b64, ptr, b_.getInt64(strideBytes)});
    };
    const int64_t blocks = Kp / 32, group = std::min<int64_t>(8, blocks), groups = blocks / group,
                  rest = blocks % group;
    // Output tiles two by two where they pair (2 x 2: 4 C, 2 A and 2 B tiles, the 8 tile
    // registers): each A and B tile loaded serves two products.
    auto square = [&](int64_t i0, int64_t ni, int64_t j0, int64_t nj, Ix first, int64_t count) {
      std::vector<llvm::Value*> cptr;
      for (int64_t i = i0; i < i0 + ni; ++i)
        for (int64_t j = j0; j < j0 + nj; ++j)
          cptr.push_back(gep(b_.getFloatTy(), cbuf, b_.getInt64(i * 16 * N16 + j * 16)));
      std::vector<llvm::Value*> c;
      for (llvm::Value* p : cptr) c.push_back(tileLoad(p, N16 * 4));
      for (int64_t q = 0; q < count; ++q) {
        Ix kb = add(first, Ix{nullptr, q});
        std::vector<llvm::Value*> ta, tb;
        for (int64_t i = i0; i < i0 + ni; ++i)
          ta.push_back(
              tileLoad(gep(b_.getInt16Ty(), abuf, val(add(Ix{nullptr, i * 16 * aRow}, mul(kb, 32)))), aRow * 2));
        for (int64_t j = j0; j < j0 + nj; ++j)
          tb.push_back(
              tileLoad(gep(b_.getInt32Ty(), bbuf, val(add(Ix{nullptr, j * 16}, mul(kb, 16 * bRow)))), bRow * 4));
        for (int64_t i = 0; i < ni; ++i)
          for (int64_t j = 0; j < nj; ++j)
            c[i * nj + j] = b_.CreateIntrinsic(llvm::Intrinsic::x86_tdpbf16ps_internal, {},
                                               {i16, b64, b64, c[i * nj + j], ta[i], tb[j]});
      }
      for (size_t t = 0; t < c.size(); ++t)
        b_.CreateIntrinsic(llvm::Intrinsic::x86_tilestored64_internal, {},
                           {i16, b64, cptr[t], b_.getInt64(N16 * 4), c[t]});
    };
    const int64_t ti = M16 / 16, tj = N16 / 16;
    auto squares = [&](Ix first, int64_t count) {
      for (int64_t i = 0; i < ti; i += 2)
        for (int64_t j = 0; j < tj; j += 2)
          square(i, std::min<int64_t>(2, ti - i), j, std::min<int64_t>(2, tj - j), first, count);
    };
    forEach(groups, groups > 1, [&](Ix g) { squares(mul(g, group), group); });
    if (rest > 0) squares(Ix{nullptr, groups * group}, rest);
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

}  // namespace kiln::codegen
