// Parser: text form (docs/ir.md) -> Kernel, built through ir::Builder, then verified.
// Syntax errors stop the parse (one diagnostic); type, scope and literal errors are reported
// and parsing goes on (the op's results become "poisoned" names whose uses stay silent), up
// to kMaxErrors diagnostics. Only region nesting recurses, bounded by kMaxDepth.

#include "ir/parser_impl.h"

namespace kiln::ir {
namespace detail {

std::unique_ptr<Kernel> Parser::run() {
  auto kernel = std::make_unique<Kernel>();
  k_ = kernel.get();
  Builder builder(*kernel, diag_);
  builder.setUniquifyNames(false);
  b_ = &builder;
  try {
    bump();
    parseKernel();
  } catch (const Stop&) {
  }
  if (errors() > 0) return nullptr;
  nameLiterals();
  if (!verify(*kernel, diag_) || errors() > 0) return nullptr;
  return kernel;
}

void Parser::bump() {
  prevLine_ = tok_.line;
  tok_ = lex_.next();
  if (tok_.kind == Tok::Error) {
    diag_.error(loc(tok_), "syntax", tok_.error);
    throw Stop{};
  }
}

Token Parser::take() {
  Token t = tok_;
  bump();
  return t;
}

void Parser::error(const Loc& at, const char* code, std::string message) {
  diag_.error(at, code, std::move(message));
  checkLimit();
}

void Parser::checkLimit() {
  if (errors() >= kMaxErrors) {
    diag_.error(loc(tok_), "too-many-errors", fmt::format("stopping after {} errors", errors()));
    throw Stop{};
  }
}

[[noreturn]] void Parser::syntax(const Token& at, std::string_view expected) {
  diag_.error(loc(at), "syntax", fmt::format("expected {}, got {}", expected, describe(at)));
  throw Stop{};
}

Token Parser::expect(Tok kind, std::string_view expected) {
  if (tok_.kind != kind) syntax(tok_, expected);
  return take();
}

void Parser::expectWord(std::string_view w, std::string_view expected) {
  if (!atWord(w)) syntax(tok_, expected);
  bump();
}

std::optional<int64_t> Parser::toInt(const Token& t) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
  if (ec != std::errc() || p != t.text.data() + t.text.size()) {
    error(loc(t), "literal", fmt::format("integer literal {} does not fit in i64", describe(t)));
    return std::nullopt;
  }
  return v;
}

Token Parser::expectInt(std::string_view expected) {
  if (tok_.kind != Tok::Int) syntax(tok_, expected);
  return take();
}

std::optional<float> Parser::toF32(const Token& t) {
  if (t.text == "inf") return std::numeric_limits<float>::infinity();
  if (t.text == "-inf") return -std::numeric_limits<float>::infinity();
  if (t.text == "nan") return std::numeric_limits<float>::quiet_NaN();
  float f = 0;
  auto [p, ec] = std::from_chars(t.text.data(), t.text.data() + t.text.size(), f);
  if (ec == std::errc() && p == t.text.data() + t.text.size() && std::isfinite(f)) return f;
  // Out of f32 range: a magnitude below 1 underflows to zero, anything else is an error.
  double d = 0;
  bool tiny = std::from_chars(t.text.data(), t.text.data() + t.text.size(), d).ec == std::errc()
                  ? std::fabs(d) < 1.0
                  : t.text.find("e-") != std::string_view::npos || t.text.find("E-") != std::string_view::npos;
  if (tiny) return t.text[0] == '-' ? -0.0f : 0.0f;
  error(loc(t), "literal", fmt::format("literal {} is out of range for f32", describe(t)));
  return std::nullopt;
}

const Parser::Binding* Parser::lookup(std::string_view name) const {
  std::string key(name);
  for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
    auto f = it->find(key);
    if (f != it->end()) return &f->second;
  }
  return nullptr;
}

void Parser::define(const Token& nameTok, Value* v) {
  std::string name(nameTok.name());
  if (const Binding* prev = lookup(name)) {
    error(loc(nameTok), "redefinition",
          fmt::format("redefinition of %{} (first defined at line {}, column {}); every value needs its own name", name,
                      prev->loc.line, prev->loc.col));
    return;
  }
  scopes_.back().emplace(std::move(name), Binding{v, loc(nameTok)});
}

Value* Parser::use(const Token& nameTok) {
  if (const Binding* b = lookup(nameTok.name())) return b->value;
  // Defined earlier in a region that is closed by now? (Rare: only on this error path.)
  const Value* other = nullptr;
  for (const auto& v : k_->values)
    if (v->name == nameTok.name()) other = v.get();
  if (other)
    error(loc(nameTok), "undefined-value",
          fmt::format("use of undefined value %{}: its definition at line {} is inside a region that does not "
                      "enclose this use",
                      nameTok.name(), other->loc.line));
  else
    error(loc(nameTok), "undefined-value",
          fmt::format("use of undefined value %{}; define it before its first use", nameTok.name()));
  return nullptr;
}

void Parser::defineAll(const std::vector<Token>& names, const std::vector<Value*>& values) {
  for (size_t i = 0; i < names.size(); ++i) define(names[i], i < values.size() ? values[i] : nullptr);
}

std::vector<std::string> Parser::strings(const std::vector<Token>& names) {
  std::vector<std::string> out;
  for (const Token& t : names) out.emplace_back(t.name());
  return out;
}

Elem Parser::parseElem() {
  if (tok_.kind == Tok::Ident)
    if (auto e = elemByName(tok_.text)) {
      bump();
      return *e;
    }
  syntax(tok_, "an element type (f32, i64, i32, i1, f16 or bf16)");
}

Type Parser::parseType() {
  if (atWord("view")) {
    bump();
    expect(Tok::Less, "'<' after 'view'");
    Elem e = parseElem();
    expect(Tok::Greater, "'>' after the view's element type");
    expect(Tok::LBracket, "'[' and the view's shape");
    std::vector<int64_t> shape;
    if (tok_.kind != Tok::RBracket) {
      while (true) {
        Token t = expectInt("an integer extent in the view's shape");
        shape.push_back(toInt(t).value_or(1));
        if (tok_.kind == Tok::RBracket) break;
        expect(Tok::Comma, "',' or ']' in the view's shape");
      }
    }
    bump();
    return Type::view(e, shape);
  }
  Elem e = parseElem();
  std::vector<Dim> dims;
  if (tok_.kind == Tok::LBracket) {
    bump();
    while (true) {
      Token name = expect(Tok::Ident, "a dim 'name:extent'");
      expect(Tok::Colon, "':' and an extent after the dim name");
      Token ext = expectInt("an integer extent");
      dims.push_back(Dim{std::string(name.text), toInt(ext).value_or(1)});
      if (tok_.kind == Tok::RBracket) break;
      expect(Tok::Comma, "',' or ']' after a dim");
    }
    bump();
  }
  return Type::tile(e, std::move(dims));
}

IntRange Parser::parseRange() {
  bump();  // 'in'
  expect(Tok::LBracket, "'[' and the parameter's range '[lo, hi]'");
  Token lo = expectInt("the lower end of the range (an integer)");
  expect(Tok::Comma, "',' between the ends of the range");
  Token hi = expectInt("the upper end of the range (an integer)");
  expect(Tok::RBracket, "']' after the range");
  const bool ascending = atWord("ascending");
  if (ascending) bump();
  return IntRange{toInt(lo).value_or(0), toInt(hi).value_or(0), ascending};
}

std::optional<Type> Parser::parseResultType(Loc& at) {
  if (tok_.kind != Tok::Colon) return std::nullopt;
  bump();
  at = loc(tok_);
  return parseType();
}

std::vector<Operand> Parser::parseOperands() {
  std::vector<Operand> out;
  auto startsOperand = [&] { return tok_.kind == Tok::Value || isLiteral(tok_); };
  if (!startsOperand() || tok_.line != prevLine_) return out;
  while (true) {
    if (!startsOperand()) syntax(tok_, "an operand (a '%value' or a literal)");
    Operand o;
    o.tok = take();
    if (o.tok.kind == Tok::Value)
      o.value = use(o.tok);
    else
      o.literal = true;
    out.push_back(o);
    if (tok_.kind != Tok::Comma) break;
    bump();
  }
  return out;
}

std::vector<Value*> Parser::valuesOf(const std::vector<Operand>& ops, std::string_view opname, bool& bad) {
  std::vector<Value*> out;
  for (const Operand& o : ops) {
    if (o.literal) {
      error(loc(o.tok), "literal",
            fmt::format("a literal can stand in only for an operand of a binary op or cmp, not of {}; define "
                        "it with 'const'",
                        opname));
      bad = true;
    } else if (!o.value) {
      bad = true;
    }
    out.push_back(o.value);
  }
  return out;
}

std::optional<Index> Parser::parseIndex(std::string_view expected) {
  if (tok_.kind == Tok::Value) {
    Token t = take();
    Value* v = use(t);
    if (!v) return std::nullopt;
    return Index{v, 0};
  }
  if (tok_.kind != Tok::Int) syntax(tok_, expected);
  Token t = take();
  auto v = toInt(t);
  if (!v) return std::nullopt;
  if (*v == std::numeric_limits<int64_t>::min()) {
    error(loc(t), "literal", fmt::format("index literal {} is out of range", t.text));
    return std::nullopt;
  }
  return Index{nullptr, *v};
}

std::vector<Index> Parser::parseIndexList(std::string_view what, bool& bad) {
  expect(Tok::LBracket, fmt::format("'[' and {}", what));
  std::vector<Index> out;
  if (tok_.kind == Tok::RBracket) {
    bump();
    return out;
  }
  while (true) {
    auto ix = parseIndex("an index (an i64 '%value' or an integer literal)");
    if (!ix) bad = true;
    out.push_back(ix.value_or(Index{nullptr, 0}));
    if (tok_.kind == Tok::RBracket) break;
    expect(Tok::Comma, "',' or ']' after an index");
  }
  bump();
  return out;
}

std::vector<std::string> Parser::parseDimNames(std::string_view what) {
  expect(Tok::LBracket, fmt::format("'[' and {}", what));
  std::vector<std::string> out;
  if (tok_.kind == Tok::RBracket) {
    bump();
    return out;
  }
  while (true) {
    out.emplace_back(expect(Tok::Ident, "a dim name").text);
    if (tok_.kind == Tok::RBracket) break;
    expect(Tok::Comma, "',' or ']' after a dim name");
  }
  bump();
  return out;
}

std::vector<Dim> Parser::parseAccess() {
  expectWord("as", "'as' and the access shape");
  expect(Tok::LBracket, "'[' and the access shape");
  std::vector<Dim> out;
  if (tok_.kind == Tok::RBracket) {
    bump();
    return out;
  }
  while (true) {
    Token name = expect(Tok::Ident, "'_' or a dim 'name:extent'");
    if (name.text == "_") {
      out.push_back(Dim{"", 1});
    } else {
      expect(Tok::Colon, "':' and an extent after the dim name ('_' marks a squeezed dim)");
      Token ext = expectInt("an integer extent");
      out.push_back(Dim{std::string(name.text), toInt(ext).value_or(1)});
    }
    if (tok_.kind == Tok::RBracket) break;
    expect(Tok::Comma, "',' or ']' in the access shape");
  }
  bump();
  return out;
}

bool Parser::checkResultCount(const std::vector<Token>& names, size_t produced, const Token& opTok) {
  if (names.size() == produced) return true;
  Loc at = names.empty() ? loc(opTok) : loc(names[0]);
  if (produced == 0)
    error(at, "result-count", fmt::format("{} produces no value; remove the result names", opTok.text));
  else if (names.empty())
    error(at, "result-count",
          fmt::format("{} produces {} value{}; name {} with '%name = {} ...'", opTok.text, produced,
                      produced == 1 ? "" : "s", produced == 1 ? "it" : "them", opTok.text));
  else
    error(at, "result-count",
          fmt::format("{} produces {} value{} but {} name{} given", opTok.text, produced, produced == 1 ? "" : "s",
                      names.size(), names.size() == 1 ? " is" : "s are"));
  return false;
}

void Parser::build(Op* op, const std::vector<Token>& names, bool bad, const std::optional<Type>& declared,
                   const Loc& typeLoc, bool typeFeedsInfer) {
  if (bad) {
    poison(names);
    return;
  }
  const Type* d = typeFeedsInfer && declared ? &*declared : nullptr;
  if (!b_->finish(op, d, strings(names))) {
    checkLimit();
    poison(names);
    return;
  }
  if (declared && !op->results.empty() && op->results[0]->type != *declared)
    error(typeLoc, "type-mismatch",
          fmt::format("declared type {} but the op produces {}", toString(*declared), toString(op->results[0]->type)));
  defineAll(names, op->results);
}

Value* Parser::materialize(const Token& lit, Elem elem) {
  Op* op = k_->newOp(OpKind::Const, loc(lit));
  if (elem == Elem::I64 || elem == Elem::I1) {
    if (lit.kind != Tok::Int) {
      error(loc(lit), "literal",
            fmt::format("{} operand needs an integer literal, got {}", elemName(elem), describe(lit)));
      return nullptr;
    }
    auto v = toInt(lit);
    if (!v) return nullptr;
    if (elem == Elem::I1 && *v != 0 && *v != 1) {
      error(loc(lit), "literal", fmt::format("an i1 literal is 0 or 1, got {}", lit.text));
      return nullptr;
    }
    op->iconst = *v;
    op->fconst = static_cast<double>(*v);
  } else {
    auto f = toF32(lit);
    if (!f) return nullptr;
    op->fconst = *f;
    elem = Elem::F32;
  }
  Type t = Type::scalar(elem);
  if (!b_->finish(op, &t, {"%lit"})) {  // a placeholder no text name can match
    checkLimit();
    return nullptr;
  }
  literals_.push_back(op->results[0]);
  return op->results[0];
}

void Parser::nameLiterals() {
  if (literals_.empty()) return;
  std::unordered_set<Value*> generated(literals_.begin(), literals_.end());
  std::unordered_set<std::string> taken;
  for (const auto& v : k_->values)
    if (!generated.count(v.get())) taken.insert(v->name);
  int n = 0;
  for (Value* v : literals_) {
    std::string name;
    do name = fmt::format("lit{}", n++);
    while (taken.count(name));
    taken.insert(name);
    v->name = name;
  }
}

void Parser::parseKernel() {
  if (!atWord("kernel")) syntax(tok_, "'kernel' at the start of the file");
  Token kw = take();
  Token name = expect(Tok::Global, "the kernel name '@name' after 'kernel'");
  k_->name = std::string(name.name());
  k_->loc = loc(kw);
  scopes_.emplace_back();
  expect(Tok::LParen, "'(' and the kernel's parameters");
  if (tok_.kind != Tok::RParen) {
    while (true) {
      Token p = expect(Tok::Value, "a parameter '%name: TYPE'");
      expect(Tok::Colon, "':' and the parameter's type");
      Type t = parseType();
      Value* v = b_->param(std::string(p.name()), std::move(t), loc(p));
      if (atWord("in")) v->range = parseRange();
      define(p, v);
      if (tok_.kind == Tok::RParen) break;
      expect(Tok::Comma, "',' or ')' after a parameter");
    }
  }
  bump();
  if (atWord("workspace")) {
    bump();
    expect(Tok::LParen, "'(' and the kernel's workspaces after 'workspace'");
    while (true) {
      Token w = expect(Tok::Value, "a workspace '%name: view<f32>[...]'");
      expect(Tok::Colon, "':' and the workspace's type");
      Type t = parseType();
      define(w, b_->workspace(std::string(w.name()), std::move(t), loc(w)));
      if (tok_.kind == Tok::RParen) break;
      expect(Tok::Comma, "',' or ')' after a workspace");
    }
    bump();
  }
  expect(Tok::LBrace, "'{' and the kernel body");
  parseBlock(1);
  bump();
  if (tok_.kind != Tok::End) syntax(tok_, "end of file after the kernel's closing '}' (one kernel per file)");
}

void Parser::parseBlock(int depth) {
  while (tok_.kind != Tok::RBrace) parseStatement(depth);
}

Token Parser::parseRegion(Region* r, const std::vector<Token>& argNames, int depth) {
  if (depth > kMaxDepth) {
    diag_.error(loc(tok_), "nesting", fmt::format("regions nest deeper than {} levels", kMaxDepth));
    throw Stop{};
  }
  expect(Tok::LBrace, "'{' and the op's body");
  if (!r) r = k_->newRegion(nullptr);
  Region* saved = b_->insertion();
  b_->setInsertion(r);
  scopes_.emplace_back();
  defineAll(argNames, r->args);
  parseBlock(depth);
  Token close = take();
  scopes_.pop_back();
  b_->setInsertion(saved);
  return close;
}

void Parser::parseStatement(int depth) {
  std::vector<Token> names;
  if (tok_.kind == Tok::Value) {
    names.push_back(take());
    while (tok_.kind == Tok::Comma) {
      bump();
      names.push_back(expect(Tok::Value, "another result name '%name'"));
    }
    expect(Tok::Equal, "'=' or ',' after a result name");
    if (tok_.kind != Tok::Ident) syntax(tok_, "an op name after '='");
  } else if (tok_.kind != Tok::Ident) {
    syntax(tok_, "an op or '}'");
  }
  Token opTok = take();
  auto kind = opByName(opTok.text);
  if (!kind) {
    diag_.error(loc(opTok), "unknown-op", fmt::format("unknown op {} (docs/ir.md lists the ops)", describe(opTok)));
    throw Stop{};
  }
  switch (*kind) {
    case OpKind::Parallel: parseParallel(names, opTok, depth); break;
    case OpKind::Serial:
    case OpKind::Pipeline: parseLoop(*kind, names, opTok, depth); break;
    case OpKind::Load: parseLoad(names, opTok); break;
    case OpKind::Store: parseStore(names, opTok); break;
    case OpKind::Const: parseConst(names, opTok); break;
    case OpKind::Iota: parseIota(names, opTok); break;
    case OpKind::Reduce: parseReduce(names, opTok); break;
    case OpKind::Mma: parseMma(names, opTok); break;
    case OpKind::Extract: parseExtract(names, opTok); break;
    case OpKind::Stage: parseStage(names, opTok); break;
    default: parseSimple(*kind, names, opTok); break;
  }
  checkLimit();
}

}  // namespace detail

using detail::Parser;

std::unique_ptr<Kernel> parseKernel(std::string_view text, const std::string& filename, DiagEngine& diag) {
  return Parser(text, filename, diag).run();
}

std::unique_ptr<Kernel> parseFile(const std::string& path, DiagEngine& diag) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    diag.error(Loc{path, 0, 0}, "io", "is a directory, not a .tile file");
    return nullptr;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    diag.error(Loc{path, 0, 0}, "io", "cannot open the file for reading");
    return nullptr;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) {
    diag.error(Loc{path, 0, 0}, "io", "cannot read the file");
    return nullptr;
  }
  return parseKernel(ss.str(), path, diag);
}

}  // namespace kiln::ir
