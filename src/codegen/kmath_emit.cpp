#include "codegen/kmath_emit.h"

#include <fmt/format.h>

#include "math/kmath_constants.h"

namespace kiln::codegen {
namespace {

namespace km = kiln::math;

// Straight-line builder over one vector type; each method is one IEEE (or bit) operation.
class V {
 public:
  V(llvm::IRBuilder<>& b, llvm::VectorType* fty) : b_(b), fty_(fty) {
    ity_ = llvm::VectorType::get(b.getInt32Ty(), fty->getElementCount());
  }
  llvm::Value* f(float c) { return llvm::ConstantFP::get(fty_, c); }
  llvm::Value* i(int64_t c) { return llvm::ConstantInt::get(ity_, static_cast<uint64_t>(c), true); }
  llvm::Value* add(llvm::Value* a, llvm::Value* c) { return b_.CreateFAdd(a, c); }
  llvm::Value* sub(llvm::Value* a, llvm::Value* c) { return b_.CreateFSub(a, c); }
  llvm::Value* mul(llvm::Value* a, llvm::Value* c) { return b_.CreateFMul(a, c); }
  llvm::Value* div(llvm::Value* a, llvm::Value* c) { return b_.CreateFDiv(a, c); }
  llvm::Value* sel(llvm::Value* c, llvm::Value* a, llvm::Value* d) { return b_.CreateSelect(c, a, d); }
  llvm::Value* gt(llvm::Value* a, llvm::Value* c) { return b_.CreateFCmpOGT(a, c); }
  llvm::Value* ge(llvm::Value* a, llvm::Value* c) { return b_.CreateFCmpOGE(a, c); }
  llvm::Value* lt(llvm::Value* a, llvm::Value* c) { return b_.CreateFCmpOLT(a, c); }
  llvm::Value* eq(llvm::Value* a, llvm::Value* c) { return b_.CreateFCmpOEQ(a, c); }
  llvm::Value* isNaN(llvm::Value* a) { return b_.CreateFCmpUNO(a, a); }
  llvm::Value* bits(llvm::Value* a) { return b_.CreateBitCast(a, ity_); }
  llvm::Value* flt(llvm::Value* a) { return b_.CreateBitCast(a, fty_); }
  llvm::IRBuilder<>& b() { return b_; }
  // Horner: ((c[0] * x + c[1]) * x + c[2]) ... one rounding per step, coefficients high first.
  llvm::Value* horner(llvm::Value* x, std::initializer_list<float> cs) {
    auto it = cs.begin();
    llvm::Value* p = mul(f(*it++), x);
    for (; it != cs.end(); ++it) {
      p = add(p, f(*it));
      if (it + 1 != cs.end()) p = mul(p, x);
    }
    return p;
  }

  llvm::Value* exp(llvm::Value* x) {
    llvm::Value* in = gt(x, f(km::kExpMinInput));
    llvm::Value* xc = sel(in, x, f(0.0f));
    xc = sel(lt(xc, f(km::kExpMaxInput)), xc, f(km::kExpMaxInput));
    llvm::Value* z = mul(xc, f(km::kExpLog2e));
    llvm::Value* t = add(z, f(km::kExpRoundMagic));
    llvm::Value* kf = sub(t, f(km::kExpRoundMagic));
    llvm::Value* h = mul(kf, f(km::kExpLn2Hi));
    llvm::Value* r = sub(xc, h);
    llvm::Value* l = mul(kf, f(km::kExpLn2Lo));
    r = sub(r, l);
    llvm::Value* q = horner(r, {km::kExpC6, km::kExpC5, km::kExpC4, km::kExpC3, km::kExpC2});
    llvm::Value* r2 = mul(r, r);
    llvm::Value* u = mul(r2, q);
    u = add(r, u);
    llvm::Value* p = add(f(1.0f), u);
    llvm::Value* k = b_.CreateFPToSI(kf, ity_);
    llvm::Value* k1 = b_.CreateAShr(k, i(1));
    llvm::Value* k2 = b_.CreateSub(k, k1);
    llvm::Value* s1 = flt(b_.CreateShl(b_.CreateAdd(k1, i(km::kExpBias)), i(23)));
    llvm::Value* s2 = flt(b_.CreateShl(b_.CreateAdd(k2, i(km::kExpBias)), i(23)));
    llvm::Value* y = mul(p, s1);
    y = mul(y, s2);
    y = sel(in, y, f(0.0f));
    return sel(isNaN(x), x, y);
  }

  llvm::Value* log(llvm::Value* x) {
    llvm::Value* c = lt(x, f(km::kLogMinNormal));
    llvm::Value* xs = mul(x, f(km::kLogSubnormalScale));
    xs = sel(c, xs, x);
    llvm::Value* ea = sel(c, i(km::kLogSubnormalExpAdjust), i(0));
    llvm::Value* bb = bits(xs);
    llvm::Value* e = b_.CreateSub(b_.CreateAnd(b_.CreateLShr(bb, i(23)), i(0xff)), i(127));
    llvm::Value* m = flt(b_.CreateOr(b_.CreateAnd(bb, i(km::kLogMantissaMask)), i(km::kLogOneBits)));
    llvm::Value* g = gt(m, f(km::kLogSqrt2));
    llvm::Value* mh = mul(m, f(0.5f));
    m = sel(g, mh, m);
    e = sel(g, b_.CreateAdd(e, i(1)), e);
    e = b_.CreateAdd(e, ea);
    llvm::Value* ef = b_.CreateSIToFP(e, fty_);
    llvm::Value* fm = sub(m, f(1.0f));
    llvm::Value* d = add(f(2.0f), fm);
    llvm::Value* s = div(fm, d);
    llvm::Value* z = mul(s, s);
    llvm::Value* R = horner(z, {km::kLogC3, km::kLogC2, km::kLogC1});
    R = mul(R, z);
    llvm::Value* ff = mul(fm, fm);
    llvm::Value* hf = mul(f(0.5f), ff);
    llvm::Value* y = add(hf, R);
    y = mul(s, y);
    llvm::Value* l = mul(ef, f(km::kLogLn2Lo));
    y = add(y, l);
    y = sub(hf, y);
    y = sub(fm, y);
    llvm::Value* h = mul(ef, f(km::kLogLn2Hi));
    y = add(h, y);
    float inf = std::numeric_limits<float>::infinity();
    y = sel(eq(x, f(inf)), f(inf), y);
    y = sel(eq(x, f(0.0f)), f(-inf), y);
    y = sel(lt(x, f(0.0f)), flt(i(km::kQuietNaNBits)), y);
    return sel(isNaN(x), x, y);
  }

  llvm::Value* tanh(llvm::Value* x) {
    llvm::Value* bb = bits(x);
    llvm::Value* sg = b_.CreateAnd(bb, i(km::kSignMask));
    llvm::Value* a = flt(b_.CreateAnd(bb, i(km::kAbsMask)));
    llvm::Value* z = mul(a, a);
    llvm::Value* P = horner(z, {km::kTanhC4, km::kTanhC3, km::kTanhC2, km::kTanhC1, km::kTanhC0});
    llvm::Value* u = mul(z, P);
    u = mul(a, u);
    llvm::Value* ys = add(a, u);
    llvm::Value* a2 = add(a, a);
    llvm::Value* E = exp(a2);
    llvm::Value* d = add(E, f(1.0f));
    llvm::Value* q = div(f(2.0f), d);
    llvm::Value* yb = sub(f(1.0f), q);
    llvm::Value* y = sel(lt(a, f(km::kTanhSmall)), ys, yb);
    return flt(b_.CreateOr(bits(y), sg));
  }

  llvm::Value* erf(llvm::Value* x) {
    llvm::Value* bb = bits(x);
    llvm::Value* sg = b_.CreateAnd(bb, i(km::kSignMask));
    llvm::Value* a = flt(b_.CreateAnd(bb, i(km::kAbsMask)));
    llvm::Value* z = mul(a, a);
    llvm::Value* P = horner(z, {km::kErfP6, km::kErfP5, km::kErfP4, km::kErfP3, km::kErfP2, km::kErfP1, km::kErfP0});
    llvm::Value* u = mul(a, P);
    llvm::Value* ys = add(a, u);
    llvm::Value* ac = sel(gt(a, f(km::kErfClamp)), f(km::kErfClamp), a);
    llvm::Value* t = sub(ac, f(km::kErfCenter));
    llvm::Value* Q = horner(t, {km::kErfQ8, km::kErfQ7, km::kErfQ6, km::kErfQ5, km::kErfQ4, km::kErfQ3, km::kErfQ2,
                                km::kErfQ1, km::kErfQ0});
    llvm::Value* w = mul(ac, ac);
    w = b_.CreateFNeg(w);
    llvm::Value* E = exp(w);
    llvm::Value* v = mul(E, Q);
    llvm::Value* yb = sub(f(1.0f), v);
    llvm::Value* y = sel(lt(a, f(1.0f)), ys, yb);
    y = sel(ge(a, f(km::kErfOne)), f(1.0f), y);
    return flt(b_.CreateOr(bits(y), sg));
  }

 private:
  llvm::IRBuilder<>& b_;
  llvm::VectorType* fty_;
  llvm::VectorType* ity_;
};

}  // namespace

llvm::Value* emitKilnMath(llvm::IRBuilder<>& b, llvm::Module& m, ir::OpKind kind, llvm::Value* x) {
  auto* vty = llvm::cast<llvm::VectorType>(x->getType());
  unsigned w = llvm::cast<llvm::FixedVectorType>(vty)->getNumElements();
  std::string name = fmt::format("kiln.{}.v{}f32", ir::opName(kind), w);
  llvm::Function* fn = m.getFunction(name);
  if (!fn) {
    auto* fty = llvm::FunctionType::get(vty, {vty}, false);
    fn = llvm::Function::Create(fty, llvm::Function::InternalLinkage, name, m);
    fn->addFnAttr(llvm::Attribute::AlwaysInline);
    fn->addFnAttr(llvm::Attribute::NoUnwind);
    llvm::IRBuilder<> fb(llvm::BasicBlock::Create(m.getContext(), "entry", fn));
    // No fast-math flags here, ever: the range reduction relies on exact rounding steps
    // ((z + magic) - magic) that reassociation would fold away.
    V v(fb, vty);
    llvm::Value* arg = fn->getArg(0);
    llvm::Value* r = nullptr;
    switch (kind) {
      case ir::OpKind::Exp: r = v.exp(arg); break;
      case ir::OpKind::Log: r = v.log(arg); break;
      case ir::OpKind::Tanh: r = v.tanh(arg); break;
      default: r = v.erf(arg); break;
    }
    fb.CreateRet(r);
  }
  return b.CreateCall(fn, {x});
}

}  // namespace kiln::codegen
