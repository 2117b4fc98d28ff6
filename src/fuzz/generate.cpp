
#include "fuzz/generate_impl.h"

namespace kiln::fuzz {
namespace detail {

Program Gen::run() {
  Program p;
  specials_ = rng_.chance(1, 4);
  p.specials = specials_;
  if (block_)
    pickBlockDims();
  else
    pickDims();
  int rootRank = static_cast<int>(rng_.range(1, 2));
  int64_t programs = 1;
  for (int i = 0; i < rootRank; ++i) {
    int64_t e = rng_.pick<int64_t>({1, 2, 3, 5, 7, 8, 9, 17});
    if (programs * e > 40) e = 1;
    programs *= e;
    root_ext_.push_back(e);
    root_ivs_.push_back(fmt::format("%p{}", i));
    pool_.push_back({root_ivs_.back(), Elem::I64, {}, 0, false});
  }
  indent_ = 2;
  if (block_) blockAnchors();
  int statements = static_cast<int>(rng_.range(2, 5));
  statementList(statements);
  // At least one store, preferring values made so far.
  int stores = 0;
  for (const std::string& l : lines_) stores += l.find("store ") != std::string::npos;
  if (stores == 0 || rng_.chance(1, 2)) store(randomShape(3), 2);
  storeUnused(3);

  // Each view's storage (docs/ir.md, "16-bit views"), from a stream of its own so that the
  // programs of every seed stay as they were: f32 mostly, f16 or bf16 one time in four each
  // (loads convert exactly, stores and fills round to the type).
  Rng storage(seed_ ^ 0x5F16B16Full);
  std::vector<std::string> params;
  for (const View& v : views_) {
    std::vector<std::string> ext;
    for (int64_t e : v.shape) ext.push_back(std::to_string(e));
    const char* elem = storage.pick<const char*>({"f32", "f32", "f16", "bf16"});
    params.push_back(fmt::format("{}: view<{}>[{}]", v.name, elem, fmt::join(ext, ", ")));
  }
  // Lengths at launch, drawn from a stream of their own so that the programs of every other
  // seed stay as they were: the runtime scalar %n as a per-program integer read from a
  // view<i32> shaped like the domain (a bound or origin that differs between the lanes of a
  // packet), and the first root axis as a runtime extent (docs/ir.md).
  Rng side(seed_ ^ 0x1E4637A5ull);
  const bool perProgramN = use_n_ && side.chance(1, 3);
  std::vector<std::string> head;
  if (perProgramN) {
    std::vector<std::string> shape, at, access;
    for (size_t i = 0; i < root_ext_.size(); ++i) {
      shape.push_back(std::to_string(root_ext_[i]));
      at.push_back(root_ivs_[i]);
      access.push_back(i + 1 == root_ext_.size() ? "one:1" : "_");
    }
    params.push_back(fmt::format("%nv: view<i32>[{}] in [-1, 4]", fmt::join(shape, ", ")));
    head.push_back(
        fmt::format("    %nt = load %nv[{}] as [{}] : i64[one:1]", fmt::join(at, ", "), fmt::join(access, ", ")));
    head.push_back("    %n = extract %nt[0] : i64");
  } else if (use_n_) {
    params.push_back("%n: i64");
  }
  if (use_s_) params.push_back("%s: f32");
  std::vector<std::string> ivs(root_ivs_.begin(), root_ivs_.end());
  std::vector<std::string> ext;
  for (int64_t e : root_ext_) ext.push_back(std::to_string(e));
  if (side.chance(1, 4)) {
    const int64_t divisor = side.chance(1, 2) ? 1 : side.range(2, 3);
    params.push_back(fmt::format("%len: i64 in [0, {}]", root_ext_[0] * divisor));
    ext[0] = divisor == 1 ? std::string("%len") : fmt::format("cdiv(%len, {})", divisor);
  }
  std::string text =
      fmt::format("# kiln fuzz program, seed {:#x}\nkernel @fuzz({}) {{\n", seed_, fmt::join(params, ", "));
  text += fmt::format("  parallel ({}) in ({}) {{\n", fmt::join(ivs, ", "), fmt::join(ext, ", "));
  for (const std::string& l : head) text += l + "\n";
  for (const std::string& l : lines_) text += l + "\n";
  text += "  }\n}\n";
  p.text = std::move(text);
  return p;
}

namespace {
const std::vector<std::string> kDimNames = {"a", "b", "c", "d", "e", "f"};
}  // namespace

void Gen::pickDims() {
  static const std::vector<int64_t> extents = {1, 2, 3, 5, 7, 8, 15, 16, 17, 31, 33, 64, 65};
  int n = static_cast<int>(rng_.range(3, 6));
  for (int i = 0; i < n; ++i) {
    // Small extents most of the time; the big ones appear alone in a tile (maxTile()).
    int64_t e = rng_.chance(2, 3) ? rng_.pick<int64_t>({1, 2, 3, 4, 5, 7, 8, 16}) : rng_.pick(extents);
    dims_.push_back({kDimNames[static_cast<size_t>(i)], e});
  }
}

void Gen::pickBlockDims() {
  auto add = [&](int64_t extent) {
    dims_.push_back({kDimNames[dims_.size()], extent});
    return static_cast<int>(dims_.size()) - 1;
  };
  const int nRows = static_cast<int>(rng_.range(1, 2)), nCols = static_cast<int>(rng_.range(1, 2));
  int64_t rows = 1;
  for (int i = 0; i < nRows; ++i) {
    int64_t e = rng_.pick<int64_t>({1, 2, 3, 4, 5, 7, 8, 16});
    if (rows * e > 32) e = 1;
    rows *= e;
    rows_.push_back(add(e));
  }
  // Columns whose common power-of-two factor gives the threads a warp (the planner's grid: powers
  // of two dividing the columns, or their largest divisor), at times one that does not (33).
  for (int i = 0; i < nCols; ++i) {  // the whole rows by a column fit one tile
    int64_t e = rng_.pick<int64_t>({32, 32, 64, 64, 96, 128, 48, 33, 40, 256});
    while (rows * e > maxTile()) e = std::max<int64_t>(1, e / 2);
    cols_.push_back(add(e));
  }
  const int nFree = static_cast<int>(rng_.range(1, 2));
  for (int i = 0; i < nFree; ++i) {
    int64_t e = rng_.pick<int64_t>({1, 2, 3, 5, 8, 16, 17, 33});
    while (std::max(rows, elems({cols_.back()})) * e > maxTile()) e = std::max<int64_t>(1, e / 2);
    free_.push_back(add(e));
  }
  block_mmas_ = rng_.chance(2, 3);
  if (!block_mmas_) cols_.resize(1);  // without an mma the block's one column is the widest tile's last dim
}

bool Gen::isBlockAccumulator(const Shape& s) const {
  if (!block_mmas_ || s.size() != rows_.size() + 1 || !std::equal(rows_.begin(), rows_.end(), s.begin())) return false;
  return std::find(cols_.begin(), cols_.end(), s.back()) != cols_.end();
}

void Gen::blockAnchors() {
  if (!block_mmas_) {  // the first tile of the highest rank: all the rows and the column
    Shape full = rows_;
    full.push_back(cols_[0]);
    storeValue(load(full), full);
    return;
  }
  for (int c : cols_) {  // an mma per column dim (a computed operand may read an earlier one's)
    Shape acc = rows_;
    acc.push_back(c);
    storeValue(blockMma(acc, 2), acc);
  }
}

int64_t Gen::elems(const Shape& s) const {
  int64_t n = 1;
  for (int d : s) n *= dims_[static_cast<size_t>(d)].extent;
  return n;
}

Shape Gen::randomShape(int maxRank, const Shape& exclude) {
  if (block_) {  // some of the rows in their order, then a column dim two times in three
    auto excluded = [&](int d) { return std::find(exclude.begin(), exclude.end(), d) != exclude.end(); };
    Shape s;
    for (int d : rows_)
      if (!excluded(d) && static_cast<int>(s.size()) < maxRank && rng_.chance(1, 2)) s.push_back(d);
    const int c = rng_.pick(cols_);
    if (!excluded(c) && static_cast<int>(s.size()) < maxRank && rng_.chance(2, 3)) s.push_back(c);
    while (elems(s) > maxTile()) s.erase(s.begin());
    return s;
  }
  std::vector<int> order;
  for (int i = 0; i < static_cast<int>(dims_.size()); ++i)
    if (std::find(exclude.begin(), exclude.end(), i) == exclude.end() && dims_[static_cast<size_t>(i)].extent > 0)
      order.push_back(i);
  shuffle(order);
  int rank = static_cast<int>(rng_.range(0, maxRank));
  if (rank == 0 && rng_.chance(2, 3)) rank = 1;  // scalars are common enough through extract/reduce
  Shape s;
  for (int d : order) {
    if (static_cast<int>(s.size()) == rank) break;
    Shape t = s;
    t.push_back(d);
    if (elems(t) <= maxTile()) s = t;
  }
  return s;
}

std::string Gen::typeText(Elem e, const Shape& s) const {
  std::string t(ir::elemName(e));
  if (s.empty()) return t;
  std::vector<std::string> parts;
  for (int d : s)
    parts.push_back(fmt::format("{}:{}", dims_[static_cast<size_t>(d)].name, dims_[static_cast<size_t>(d)].extent));
  return fmt::format("{}[{}]", t, fmt::join(parts, ", "));
}

void Gen::line(const std::string& text) {
  lines_.push_back(std::string(static_cast<size_t>(indent_) * 2, ' ') + text);
  // Every value the line reads is used (not what it defines).
  size_t from = text.rfind('%', 0) == 0 ? text.find(" = ") : 0;
  for (size_t p = text.find('%', from); p != std::string::npos; p = text.find('%', p + 1)) {
    size_t e = p + 1;
    while (e < text.size() && (std::isalnum(static_cast<unsigned char>(text[e])) || text[e] == '_')) ++e;
    used_.insert(text.substr(p, e - p));
  }
}

void Gen::storeUnused(int max) {
  std::vector<Val> unused;
  for (const Val& v : pool_)
    if (v.scope == scope_ && v.elem == Elem::F32 && !used_.count(v.name) && v.name[1] == 'v') unused.push_back(v);
  shuffle(unused);
  for (int i = 0; i < max && i < static_cast<int>(unused.size()); ++i)
    storeValue(unused[static_cast<size_t>(i)].name, unused[static_cast<size_t>(i)].dims);
}

std::string Gen::emit(const std::string& rhs, Elem e, const Shape& s, bool pooled) {
  std::string name = fresh();
  line(fmt::format("{} = {} : {}", name, rhs, typeText(e, s)));
  if (pooled) pool_.push_back({name, e, s, scope_, false});
  ++ops_;
  work_ += elems(s) * trips_;
  return name;
}

std::optional<std::string> Gen::reuse(Elem e, const Shape& s, int num, int den) {
  std::vector<const Val*> found, carried;
  for (const Val& v : pool_)
    if (v.elem == e && v.dims == s) (v.carried ? carried : found).push_back(&v);
  if (!carried.empty() && rng_.chance(2, 3)) return rng_.pick(carried)->name;
  if (!found.empty() && rng_.chance(num, den)) return rng_.pick(found)->name;
  if (!carried.empty() && rng_.chance(num, den)) return rng_.pick(carried)->name;
  return std::nullopt;
}

std::string Gen::f32Literal() {
  if (specials_ && rng_.chance(1, 5)) return rng_.pick<std::string>({"inf", "-inf", "nan", "1e-40", "-0"});
  return rng_.pick<std::string>({"0", "1", "-1", "0.5", "2", "-0.25", "3.5", "0.001", "100", "-7"});
}

std::string Gen::index(int64_t lo, int64_t hi, bool runtime) {
  if (!runtime || rng_.chance(1, 2)) return std::to_string(rng_.range(lo, hi));
  return runtimeScalar();
}

std::string Gen::runtimeScalar() {
  std::vector<std::string> scalars;
  for (const Val& v : pool_)
    if (v.elem == Elem::I64 && v.dims.empty()) scalars.push_back(v.name);
  if (!use_n_ && rng_.chance(1, 8)) {
    use_n_ = true;
    pool_.push_back({"%n", Elem::I64, {}, 0, false});
    scalars.push_back("%n");
  }
  std::string base = rng_.pick(scalars);
  if (rng_.chance(1, 2)) return base;
  return emit(fmt::format("{} {}, {}", rng_.pick<std::string>({"add", "sub", "mul"}), base, rng_.range(-2, 3)),
              Elem::I64, {});
}

}  // namespace detail

using detail::Gen;

uint64_t programSeed(uint64_t runSeed, uint64_t index) {
  Rng r(runSeed ^ (index * 0xD1B54A32D192ED03ull));
  return r.next();
}

std::optional<Family> familyNamed(const std::string& name) {
  if (name == "any") return Family::Any;
  if (name == "block") return Family::Block;
  return std::nullopt;
}

Program generateText(uint64_t seed, Family family) {
  Program p = Gen(seed, family).run();
  p.seed = seed;
  return p;
}

std::optional<std::string> generate(uint64_t seed, Program& out, Family family) {
  out = generateText(seed, family);
  ir::DiagEngine diag;
  out.kernel = ir::parseKernel(out.text, fmt::format("fuzz-{:#x}.tile", seed), diag);
  if (out.kernel && !diag.hasErrors() && ir::verify(*out.kernel, diag) && !diag.hasErrors()) return std::nullopt;
  out.kernel.reset();
  return fmt::format("generator bug: the program of seed {:#x} does not verify:\n{}\n{}", seed, diag.str(), out.text);
}

}  // namespace kiln::fuzz
