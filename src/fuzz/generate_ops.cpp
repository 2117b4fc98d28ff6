// The Gen class (generate_impl.h), continued: its f32 .. loop.
#include "fuzz/generate_impl.h"

namespace kiln::fuzz::detail {

std::string Gen::f32(const Shape& s, int depth) {
  if (auto r = reuse(Elem::F32, s, depth <= 0 || exhausted() ? 2 : 1, 3)) return *r;
  if (depth <= 0 || exhausted()) {
    switch (rng_.below(s.empty() ? 3 : 2)) {
      case 0: return load(s);
      case 1: return emit(fmt::format("const {}", f32Literal()), Elem::F32, s);
      default:
        if (!use_s_) {
          use_s_ = true;
          pool_.push_back({"%s", Elem::F32, {}, 0, false});
        }
        return "%s";
    }
  }
  int choice = static_cast<int>(rng_.below(20));
  switch (choice) {
    case 0:
    case 1:
    case 2: return load(s);
    case 3: return emit(fmt::format("const {}", f32Literal()), Elem::F32, s);
    case 4:
    case 5: {
      auto op = rng_.pick<std::string>({"neg", "abs", "exp", "log", "sqrt", "rsqrt", "tanh", "erf"});
      std::string x = f32(s, depth - 1);
      return emit(fmt::format("{} {}", op, x), Elem::F32, s);
    }
    case 6:
    case 7:
    case 8: {
      auto op = rng_.pick<std::string>({"add", "sub", "mul", "div", "max", "min"});
      std::string a = f32(s, depth - 1);
      std::string b;
      int form = static_cast<int>(rng_.below(4));
      if (form == 0 && !s.empty())
        b = f32({}, depth - 1);
      else if (form == 1)
        b = f32Literal();
      else
        b = f32(s, depth - 1);
      if (rng_.chance(1, 4) && form != 1) std::swap(a, b);
      return emit(fmt::format("{} {}, {}", op, a, b), Elem::F32, s);
    }
    case 9: {
      std::string c = i1(rng_.chance(1, 5) ? Shape{} : s, depth - 1);
      std::string a = f32(rng_.chance(1, 5) ? Shape{} : s, depth - 1);
      std::string b = f32(s, depth - 1);
      return emit(fmt::format("select {}, {}, {}", c, a, b), Elem::F32, s);
    }
    case 10: {
      std::string x = rng_.chance(3, 4) ? i64(s, depth - 1) : i1(s, depth - 1);
      return emit(fmt::format("cast {}", x), Elem::F32, s);
    }
    case 11:
      if (!s.empty()) return broadcast(Elem::F32, s, depth);
      return f32(s, depth - 1);
    case 12:
    case 13: return reduce(Elem::F32, s, depth);
    case 14:
    case 15: return mma(s, depth);
    case 16:
      if (s.empty()) return extract(Elem::F32, depth);
      return f32(s, depth - 1);
    default:
      if (loop_depth_ < kMaxLoopDepth) return loop(Elem::F32, s, depth);
      return f32(s, depth - 1);
  }
}

std::string Gen::i64(const Shape& s, int depth) {
  if (auto r = reuse(Elem::I64, s, depth <= 0 || exhausted() ? 2 : 1, 3)) return *r;
  if (depth <= 0 || exhausted()) {
    if (!s.empty() && rng_.chance(1, 2))
      return emit(fmt::format("iota along {}", dims_[static_cast<size_t>(rng_.pick(s))].name), Elem::I64, s);
    return emit(fmt::format("const {}", rng_.range(-3, 9)), Elem::I64, s);
  }
  switch (rng_.below(10)) {
    case 0:
      if (!s.empty())
        return emit(fmt::format("iota along {}", dims_[static_cast<size_t>(rng_.pick(s))].name), Elem::I64, s);
      return runtimeScalar();
    case 1: return emit(fmt::format("const {}", rng_.range(-3, 9)), Elem::I64, s);
    case 2:
    case 3: {
      auto op = rng_.pick<std::string>({"add", "sub", "mul", "div", "max", "min"});
      std::string a = i64(s, depth - 1);
      std::string b = rng_.chance(1, 3) ? std::to_string(rng_.range(-3, 5)) : i64(s, depth - 1);
      return emit(fmt::format("{} {}, {}", op, a, b), Elem::I64, s);
    }
    case 4: return emit(fmt::format("{} {}", rng_.pick<std::string>({"neg", "abs"}), i64(s, depth - 1)), Elem::I64, s);
    case 5: {
      // Scale first so that truncation toward zero meets more than the integer 0.
      std::string x = f32(s, depth - 1);
      if (rng_.chance(2, 3))
        x = emit(fmt::format("mul {}, {}", x, rng_.pick<std::string>({"7.5", "-3", "100"})), Elem::F32, s);
      return emit(fmt::format("cast {}", x), Elem::I64, s);
    }
    case 6: {
      std::string c = i1(s, depth - 1);
      return emit(fmt::format("select {}, {}, {}", c, i64(s, depth - 1), i64(s, depth - 1)), Elem::I64, s);
    }
    case 7:
      if (!s.empty()) return broadcast(Elem::I64, s, depth);
      return runtimeScalar();
    case 8: return reduce(Elem::I64, s, depth);
    default:
      if (s.empty()) return extract(Elem::I64, depth);
      return i64(s, depth - 1);
  }
}

std::string Gen::i1(const Shape& s, int depth) {
  if (auto r = reuse(Elem::I1, s, 1, 3)) return *r;
  int choice = depth <= 0 || exhausted() ? 3 : static_cast<int>(rng_.below(6));
  auto pred = rng_.pick<std::string>({"lt", "le", "gt", "ge", "eq", "ne"});
  switch (choice) {
    case 0:
    case 1:
    case 2: {
      std::string a = f32(s, depth - 1);
      std::string b = rng_.chance(1, 3) ? f32Literal() : f32(s, depth - 1);
      return emit(fmt::format("cmp {} {}, {}", pred, a, b), Elem::I1, s);
    }
    case 3:
      if (rng_.chance(1, 3)) return emit(fmt::format("const {}", rng_.below(2)), Elem::I1, s);
      return emit(fmt::format("cmp {} {}, {}", pred, i64(s, depth - 1), rng_.range(-1, 4)), Elem::I1, s);
    case 4: return emit(fmt::format("cast {}", rng_.chance(1, 2) ? f32(s, depth - 1) : i64(s, depth - 1)), Elem::I1, s);
    default: return emit(fmt::format("cmp {} {}, {}", pred, i64(s, depth - 1), i64(s, depth - 1)), Elem::I1, s);
  }
}

std::string Gen::broadcast(Elem e, const Shape& s, int depth) {
  Shape sub;
  for (int d : s)
    if (rng_.chance(1, 2)) sub.push_back(d);
  if (sub.size() == s.size()) sub.pop_back();
  if (!block_) shuffle(sub);  // the operand's dims may come in any order (the block form: in s's)
  std::string x = e == Elem::F32 ? f32(sub, depth - 1) : i64(sub, depth - 1);
  return emit(fmt::format("broadcast {}", x), e, s);
}

// An f32 reduction's init: a constant (the identities and others) or a value of shape s.
std::string Gen::reduceInit(const Shape& s, int depth) {
  if (rng_.chance(1, 2))
    return emit(fmt::format("const {}", rng_.pick<std::string>({"0", "1", "-inf", "inf", "-2"})), Elem::F32, s);
  return f32(s, depth - 1);
}

std::string Gen::reduce(Elem e, const Shape& s, int depth) {
  if (block_) return e == Elem::F32 ? blockReduce(s, depth) : i64(s, depth - 1);  // f32 only there
  std::string policy = "ordered";
  bool reducedLast = false;
  if (rng_.chance(1, 2)) {
    if (rng_.chance(1, 3)) {
      policy = "unordered_tree";
    } else if (rng_.chance(1, 2)) {
      // A partition count that is a multiple of the vector width, over the operand's last
      // dims: the lane realization folds this with the lanes as partitions (a path of its own).
      policy = fmt::format("unordered_tree({})", rng_.pick<int64_t>({4, 8, 16}));
      reducedLast = true;
    } else {
      policy = fmt::format("unordered_tree({})", rng_.range(1, 16));
    }
  }
  Shape extra = randomShape(2, s);
  if (extra.empty()) extra = randomShape(1, s);
  Shape x = s;
  Shape reduced;
  for (int d : extra) {
    Shape t = x;
    t.insert(reducedLast ? t.end() : t.begin() + rng_.below(static_cast<int64_t>(t.size()) + 1), d);
    if (elems(t) > maxTile()) continue;
    x = t;
    reduced.push_back(d);
  }
  if (reduced.empty()) return e == Elem::F32 ? f32(s, depth - 1) : i64(s, depth - 1);
  // A partition-order slip only shows on data that is not uniform: over the last dims, read
  // the operand from memory half the time.
  std::string xv =
      e == Elem::F32 ? (reducedLast && rng_.chance(1, 2) ? load(x) : f32(x, depth - 1)) : i64(x, depth - 1);
  Shape initShape = rng_.chance(1, 2) ? Shape{} : s;
  std::string init = e == Elem::F32 ? reduceInit(initShape, depth) : i64(initShape, depth - 1);
  shuffle(reduced);
  std::vector<std::string> names;
  for (int d : reduced) names.push_back(dims_[static_cast<size_t>(d)].name);
  auto op = rng_.pick<std::string>({"add", "add", "max", "min", "mul"});
  return emit(fmt::format("reduce {} {} over [{}] init {} {}", op, xv, fmt::join(names, ", "), init, policy), e, s);
}

std::string Gen::mma(const Shape& s, int depth) {
  if (block_) return blockMma(s, depth);
  // Contracted dims: one or two dims outside the accumulator, or a K = 0 dim.
  bool zeroK = rng_.chance(1, 12);
  Shape k;
  if (!zeroK) {
    Shape cand = randomShape(2, s);
    for (int d : cand)
      if (elems(k) * dims_[static_cast<size_t>(d)].extent <= 65) k.push_back(d);
    if (k.empty()) return f32(s, depth - 1);
  }
  Shape batch, aOnly, bOnly;
  for (int d : s) {
    int64_t r = rng_.below(5);
    (r == 0 ? batch : r <= 2 ? aOnly : bOnly).push_back(d);
  }
  auto operandDims = [&](const Shape& own) {
    Shape t = own;
    t.insert(t.end(), batch.begin(), batch.end());
    t.insert(t.end(), k.begin(), k.end());
    shuffle(t);
    return t;
  };
  Shape a = operandDims(aOnly), b = operandDims(bOnly);
  if (elems(a) > maxTile() || elems(b) > maxTile() || elems(s) * std::max<int64_t>(elems(k), 1) > 4096)
    return f32(s, depth - 1);
  std::string av, bv, contract;
  if (zeroK) {
    // A dim of extent 0 may only live on a value whose every use is this mma.
    auto zeroType = [&](const Shape& own) {
      std::vector<std::string> parts;
      Shape t = own;
      t.insert(t.end(), batch.begin(), batch.end());
      shuffle(t);
      size_t at = static_cast<size_t>(rng_.below(static_cast<int64_t>(t.size()) + 1));
      for (size_t i = 0; i <= t.size(); ++i) {
        if (i == at) parts.push_back("z:0");
        if (i < t.size())
          parts.push_back(
              fmt::format("{}:{}", dims_[static_cast<size_t>(t[i])].name, dims_[static_cast<size_t>(t[i])].extent));
      }
      return fmt::format("f32[{}]", fmt::join(parts, ", "));
    };
    av = fresh();
    line(fmt::format("{} = const {} : {}", av, f32Literal(), zeroType(aOnly)));
    bv = fresh();
    line(fmt::format("{} = const {} : {}", bv, f32Literal(), zeroType(bOnly)));
    contract = "z";
  } else {
    av = f32(a, depth - 1);
    bv = f32(b, depth - 1);
    Shape kk = k;
    shuffle(kk);
    std::vector<std::string> names;
    for (int d : kk) names.push_back(dims_[static_cast<size_t>(d)].name);
    contract = fmt::format("{}", fmt::join(names, ", "));
  }
  std::string acc = f32(s, depth - 1);
  std::string flags;
  if (rng_.chance(1, 8)) flags += " allow_reassociation";
  if (rng_.chance(1, 6)) flags += " allow_fma";
  if (rng_.chance(1, 4)) flags += " fused";
  if (rng_.chance(1, 4)) {
    static constexpr int kPartitions[] = {1, 2, 3, 4, 8, 16, 16};
    flags += fmt::format(" partitions({})", kPartitions[rng_.below(7)]);
  }
  if (rng_.chance(1, 10))
    flags = rng_.chance(1, 2) ? " bf16_dot" : " bf16_pairs";  // orders of their own (docs/ir.md, MMA)
  work_ += elems(s) * std::max<int64_t>(elems(k), 1) * trips_;
  return emit(fmt::format("mma {}, {}, {} contract [{}]{}", av, bv, acc, contract, flags), Elem::F32, s);
}

// The block family's reduction: over one dim whose insertion into s keeps a block tile (the
// column, where s has none, or a row dim in its place among the rows).
std::string Gen::blockReduce(const Shape& s, int depth) {
  std::vector<Shape> xs;
  std::vector<bool> last;
  const bool hasColumn = !s.empty() && std::find(cols_.begin(), cols_.end(), s.back()) != cols_.end();
  if (!hasColumn)
    for (int c : cols_) {
      Shape x = s;
      x.push_back(c);
      xs.push_back(x), last.push_back(true);
    }
  for (size_t r = 0; r < rows_.size(); ++r) {
    if (std::find(s.begin(), s.end(), rows_[r]) != s.end()) continue;
    Shape x;
    for (size_t q = 0; q < rows_.size(); ++q)
      if (q == r || std::find(s.begin(), s.end(), rows_[q]) != s.end()) x.push_back(rows_[q]);
    if (hasColumn) x.push_back(s.back());
    xs.push_back(x), last.push_back(false);
  }
  std::vector<size_t> fit;
  for (size_t i = 0; i < xs.size(); ++i)
    if (elems(xs[i]) <= maxTile()) fit.push_back(i);
  if (fit.empty()) return f32(s, depth - 1);
  const size_t i = rng_.pick(fit);
  const Shape& x = xs[i];
  int reducedDim = -1;
  for (int d : x)
    if (std::find(s.begin(), s.end(), d) == s.end()) reducedDim = d;
  std::string policy = "ordered";
  if (rng_.chance(1, 2)) {
    if (last[i] && rng_.chance(1, 2))
      policy = fmt::format("unordered_tree({})", rng_.pick<int64_t>({4, 8, 16}));
    else if (rng_.chance(1, 2))
      policy = "unordered_tree";
    else
      policy = fmt::format("unordered_tree({})", rng_.range(1, 16));
  }
  std::string xv = rng_.chance(1, 2) ? load(x) : f32(x, depth - 1);
  const Shape initShape = rng_.chance(1, 2) ? Shape{} : s;
  std::string init = reduceInit(initShape, depth);
  auto op = rng_.pick<std::string>({"add", "add", "max", "min", "mul"});
  return emit(fmt::format("reduce {} {} over [{}] init {} {}", op, xv, dims_[static_cast<size_t>(reducedDim)].name,
                          init, policy),
              Elem::F32, s);
}

// The block family's mma: s is [rows, column]; one contracted dim: a free dim with both operands
// loads that only the mma reads, [rows with K among them] and [K, column] in either order, or
// another column dim with a computed [rows, that column] operand (as attention's P) and a
// loaded [K, column] one.
std::string Gen::blockMma(const Shape& s, int depth) {
  if (!isBlockAccumulator(s)) return f32(s, depth - 1);
  const int column = s.back();
  std::vector<int> computedK;
  for (int c : cols_)
    if (c != column && elems(rows_) * dims_[static_cast<size_t>(c)].extent <= maxTile()) computedK.push_back(c);
  const bool computed = !computedK.empty() && rng_.chance(1, 2);
  const int k = computed ? rng_.pick(computedK) : rng_.pick(free_);
  Shape a, b = {k, column};
  if (rng_.chance(1, 3)) std::swap(b[0], b[1]);
  std::string av;
  if (computed) {
    a = rows_;
    a.push_back(k);
    av = f32(a, depth - 1);
  } else {
    a = rows_;
    a.insert(a.begin() + rng_.below(static_cast<int64_t>(a.size()) + 1), k);
    if (elems(a) > maxTile()) return f32(s, depth - 1);
    av = load(a, false);
  }
  if (elems(b) > maxTile()) return f32(s, depth - 1);
  std::string bv = load(b, false);
  if (rng_.chance(1, 4)) std::swap(av, bv);
  std::string acc = f32(s, depth - 1);
  std::string flags;
  if (rng_.chance(1, 3)) flags += " fused";
  if (rng_.chance(1, 16)) flags += " allow_fma";  // not bit-exact by definition: compared in f64
  work_ += elems(s) * dims_[static_cast<size_t>(k)].extent * trips_;
  return emit(fmt::format("mma {}, {}, {} contract [{}]{}", av, bv, acc, dims_[static_cast<size_t>(k)].name, flags),
              Elem::F32, s);
}

std::string Gen::extract(Elem e, int depth) {
  if (block_) return e == Elem::F32 ? f32({}, depth - 1) : i64({}, depth - 1);  // no tile is one thread's
  Shape t = randomShape(2);
  if (t.empty()) t = randomShape(1);
  if (t.empty()) return e == Elem::F32 ? f32({}, depth - 1) : i64({}, depth - 1);
  std::string x = e == Elem::F32 ? f32(t, depth - 1) : i64(t, depth - 1);
  std::vector<std::string> ix;
  for (int d : t) {
    int64_t ext = dims_[static_cast<size_t>(d)].extent;
    // Runtime indices may fall outside the dim (the element reads 0); literals may not.
    ix.push_back(rng_.chance(1, 2) ? std::to_string(rng_.range(0, ext - 1)) : runtimeScalar());
  }
  return emit(fmt::format("extract {}[{}]", x, fmt::join(ix, ", ")), e, {});
}

std::string Gen::load(const Shape& s, bool pooled) {
  // Read back this program's own slab of a stored view (a store then a load in one program).
  std::vector<const View*> outs;
  for (const View& v : views_)
    if (v.root_rank > 0 && static_cast<int>(v.shape.size()) - v.root_rank >= static_cast<int>(s.size()))
      outs.push_back(&v);
  std::vector<std::string> origin, access;
  const View* view = nullptr;
  if (!outs.empty() && rng_.chance(1, 5)) {
    view = rng_.pick(outs);
    for (int i = 0; i < view->root_rank; ++i) {
      origin.push_back(root_ivs_[static_cast<size_t>(i)]);
      access.push_back("_");
    }
    accessEntries(*view, view->root_rank, s, origin, access);
  } else {
    std::vector<const View*> ins;
    for (const View& v : views_)
      if (v.root_rank == 0 && v.shape.size() >= s.size()) ins.push_back(&v);
    if (!ins.empty() && (views_.size() >= kMaxViews || rng_.chance(1, 3))) {
      view = rng_.pick(ins);
    } else {
      View v;
      v.name = fmt::format("%x{}", views_.size());
      v.root_rank = 0;
      int squeezed = s.size() < 3 && rng_.chance(1, 3) ? 1 : 0;
      std::vector<int64_t> named;
      for (int d : s) named.push_back(raggedExtent(dims_[static_cast<size_t>(d)].extent));
      size_t at = static_cast<size_t>(rng_.below(static_cast<int64_t>(named.size()) + 1));
      for (size_t i = 0; i <= named.size(); ++i) {
        if (i == at && squeezed) v.shape.push_back(rng_.range(1, 3));
        if (i < named.size()) v.shape.push_back(named[i]);
      }
      if (v.shape.empty()) v.shape.push_back(rng_.range(1, 4));
      views_.push_back(v);
      view = &views_.back();
    }
    accessEntries(*view, 0, s, origin, access);
  }
  std::string fill = rng_.chance(1, 2) ? "0" : f32Literal();
  return emit(
      fmt::format("load {}[{}] as [{}] fill {}", view->name, fmt::join(origin, ", "), fmt::join(access, ", "), fill),
      Elem::F32, s, pooled);
}

int64_t Gen::raggedExtent(int64_t e) {
  switch (rng_.below(4)) {
    case 0: return std::max<int64_t>(1, e - rng_.range(1, 3));  // a ragged tail: the tile overhangs
    case 1: return e + rng_.range(1, 5);
    default: return e;
  }
}

void Gen::accessEntries(const View& v, int first, const Shape& s, std::vector<std::string>& origin,
                        std::vector<std::string>& access) {
  int n = static_cast<int>(v.shape.size()) - first;
  std::vector<int> positions(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) positions[static_cast<size_t>(i)] = i;
  shuffle(positions);
  positions.resize(s.size());
  std::sort(positions.begin(), positions.end());
  size_t next = 0;
  for (int i = 0; i < n; ++i) {
    int64_t ext = v.shape[static_cast<size_t>(first + i)];
    if (next < positions.size() && positions[next] == i) {
      const DimInfo& d = dims_[static_cast<size_t>(s[next])];
      origin.push_back(rng_.chance(2, 3) ? "0" : index(-2, std::max<int64_t>(0, ext - d.extent) + 2));
      access.push_back(fmt::format("{}:{}", d.name, d.extent));
      ++next;
    } else {
      origin.push_back(rng_.chance(3, 4) ? std::to_string(rng_.range(0, ext - 1)) : index(-1, ext));
      access.push_back("_");
    }
  }
}

void Gen::storeValue(const std::string& value, const Shape& s) {
  std::vector<const View*> outs;
  for (const View& v : views_)
    if (v.root_rank > 0 && static_cast<int>(v.shape.size()) - v.root_rank >= static_cast<int>(s.size()))
      outs.push_back(&v);
  const View* view;
  if (!outs.empty() && (views_.size() >= kMaxViews || rng_.chance(1, 3))) {
    view = rng_.pick(outs);
  } else {
    View v;
    v.name = fmt::format("%y{}", views_.size());
    v.root_rank = static_cast<int>(root_ext_.size());
    v.shape = root_ext_;
    int squeezed = s.size() < 3 && rng_.chance(1, 4) ? 1 : 0;
    for (int d : s) v.shape.push_back(std::max<int64_t>(1, dims_[static_cast<size_t>(d)].extent + rng_.range(-2, 2)));
    if (squeezed) v.shape.push_back(rng_.range(1, 2));
    if (s.empty() && !squeezed) v.shape.push_back(1);
    views_.push_back(v);
    view = &views_.back();
  }
  std::vector<std::string> origin, access;
  for (int i = 0; i < view->root_rank; ++i) {
    origin.push_back(root_ivs_[static_cast<size_t>(i)]);
    access.push_back("_");
  }
  // The tile's dims may be named in any order in a store.
  Shape perm = s;
  if (rng_.chance(1, 3)) shuffle(perm);
  accessEntries(*view, view->root_rank, perm, origin, access);
  line(fmt::format("store {}, {}[{}] as [{}]", value, view->name, fmt::join(origin, ", "), fmt::join(access, ", ")));
  ++ops_;
}

void Gen::statementList(int n) {
  for (int i = 0; i < n; ++i) {
    int64_t r = rng_.below(20);
    if (r < 9) {
      store(randomShape(3), 3);
    } else if (r < 13 && loop_depth_ < kMaxLoopDepth && !exhausted()) {
      Shape s = randomShape(2);
      std::string v = loop(Elem::F32, s, 3);
      if (rng_.chance(3, 4)) {
        pool_.push_back({v, Elem::F32, s, scope_, true});
        store(s, 0);
        pool_.pop_back();
      }
    } else {
      f32(randomShape(3), 3);
    }
  }
}

std::string Gen::loop(Elem e, const Shape& s, int depth) {
  bool pipeline = rng_.chance(1, 3) && !block_;  // pipelines have no block form
  int64_t step = rng_.chance(3, 4) ? 1 : 2;
  int64_t trips = loop_depth_ == 0 ? rng_.range(0, 3) : rng_.range(1, 2);
  if (rng_.chance(1, 10)) trips = 0;
  std::string lower, upper;
  int64_t lo = rng_.range(-1, 2);
  lower = std::to_string(lo);
  if (rng_.chance(1, 3)) {
    // A runtime bound that never exceeds the literal one: min(program index + c, lo + trips * step).
    std::string base = runtimeScalar();
    std::string rt = emit(fmt::format("add {}, {}", base, rng_.range(0, 2)), Elem::I64, {});
    upper = emit(fmt::format("min {}, {}", rt, lo + trips * step), Elem::I64, {});
  } else {
    upper = std::to_string(lo + trips * step);
  }
  // Carried values: the wanted one plus up to two others (f32 scalars and tiles, i64 scalars).
  std::vector<std::pair<Elem, Shape>> types = {{e, s}};
  int more = static_cast<int>(rng_.range(0, 2));
  for (int i = 0; i < more; ++i) {
    if (rng_.chance(1, 4))
      types.push_back({Elem::I64, {}});
    else
      types.push_back({Elem::F32, randomShape(2)});
  }
  std::vector<std::string> inits;
  for (auto& [te, ts] : types) inits.push_back(te == Elem::F32 ? f32(ts, depth - 1) : i64(ts, depth - 1));
  std::string iv = fmt::format("%i{}", counter_++);
  std::vector<std::string> args, results, typeTexts;
  for (size_t i = 0; i < types.size(); ++i) {
    args.push_back(fmt::format("%c{} = {}", counter_++, inits[i]));
    results.push_back(fresh());
    typeTexts.push_back(typeText(types[i].first, types[i].second));
  }
  line(fmt::format("{} = {} {} = {} to {} step {} iter({}) : {} {{", fmt::join(results, ", "),
                   pipeline ? "pipeline" : "serial", iv, lower, upper, step, fmt::join(args, ", "),
                   fmt::join(typeTexts, ", ")));
  ++ops_;
  // The body.
  size_t poolMark = pool_.size();
  ++scope_;
  ++loop_depth_;
  ++indent_;
  int64_t savedTrips = trips_;
  trips_ *= std::max<int64_t>(trips, 1);
  pool_.push_back({iv, Elem::I64, {}, scope_, true});
  for (size_t i = 0; i < types.size(); ++i)
    pool_.push_back({args[i].substr(0, args[i].find(' ')), types[i].first, types[i].second, scope_, true});
  if (pipeline) line("stage 0");
  statementList(static_cast<int>(rng_.range(0, 2)));
  if (pipeline) line("stage 1");
  std::vector<std::string> yields;
  for (auto& [te, ts] : types) yields.push_back(te == Elem::F32 ? f32(ts, depth) : i64(ts, depth));
  if (rng_.chance(1, 2)) storeUnused(1);
  line(fmt::format("yield {}", fmt::join(yields, ", ")));
  --indent_;
  line("}");
  trips_ = savedTrips;
  --loop_depth_;
  --scope_;
  pool_.resize(poolMark);
  for (size_t i = 0; i < types.size(); ++i)
    pool_.push_back({results[i], types[i].first, types[i].second, scope_, false});
  return results[0];
}

}  // namespace kiln::fuzz::detail
