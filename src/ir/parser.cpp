// Parser: text form (docs/ir.md) -> Kernel, built through ir::Builder, then verified.
// Syntax errors stop the parse (one diagnostic); type, scope and literal errors are reported
// and parsing goes on (the op's results become "poisoned" names whose uses stay silent), up
// to kMaxErrors diagnostics. Only region nesting recurses, bounded by kMaxDepth.
#include "ir/parser.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "ir/builder.h"
#include "ir/lexer.h"
#include "ir/verifier.h"

namespace kiln::ir {
namespace {

constexpr int kMaxDepth = 256;
constexpr size_t kMaxErrors = 20;

struct Stop {};  // thrown after a diagnostic that ends the parse

std::optional<OpKind> opByName(std::string_view s) {
  static const std::unordered_map<std::string_view, OpKind> table = [] {
    std::unordered_map<std::string_view, OpKind> t;
    for (int k = 0; k <= static_cast<int>(OpKind::Min); ++k) t.emplace(opName(static_cast<OpKind>(k)), OpKind(k));
    return t;
  }();
  auto it = table.find(s);
  if (it == table.end()) return std::nullopt;
  return it->second;
}

std::optional<Elem> elemByName(std::string_view s) {
  for (Elem e : {Elem::F32, Elem::I64, Elem::I1, Elem::F16, Elem::BF16})
    if (elemName(e) == s) return e;
  return std::nullopt;
}

std::optional<CmpPred> predByName(std::string_view s) {
  for (int p = 0; p <= static_cast<int>(CmpPred::NE); ++p)
    if (cmpName(static_cast<CmpPred>(p)) == s) return static_cast<CmpPred>(p);
  return std::nullopt;
}

std::optional<ReduceKind> reduceByName(std::string_view s) {
  for (int r = 0; r <= static_cast<int>(ReduceKind::Mul); ++r)
    if (reduceName(static_cast<ReduceKind>(r)) == s) return static_cast<ReduceKind>(r);
  return std::nullopt;
}

// An operand as written: a value, or a literal standing in for a rank-0 value.
struct Operand {
  Token tok;
  Value* value = nullptr;  // null for a literal, or for a value whose definition failed
  bool literal = false;
};

class Parser {
 public:
  Parser(std::string_view text, const std::string& file, DiagEngine& diag)
      : file_(file), diag_(diag), start_(diag.all().size()), lex_(text) {}

  std::unique_ptr<Kernel> run() {
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

 private:
  // ---- tokens and diagnostics -------------------------------------------------------------

  size_t errors() const { return diag_.all().size() - start_; }
  Loc loc(const Token& t) const { return Loc{file_, t.line, t.col}; }

  // A byte that starts no token ends the parse where it stands.
  void bump() {
    prevLine_ = tok_.line;
    tok_ = lex_.next();
    if (tok_.kind == Tok::Error) {
      diag_.error(loc(tok_), "syntax", tok_.error);
      throw Stop{};
    }
  }
  Token take() {
    Token t = tok_;
    bump();
    return t;
  }

  // A non-fatal error; the parse stops once kMaxErrors have been reported.
  void error(const Loc& at, const char* code, std::string message) {
    diag_.error(at, code, std::move(message));
    checkLimit();
  }
  void checkLimit() {
    if (errors() >= kMaxErrors) {
      diag_.error(loc(tok_), "too-many-errors", fmt::format("stopping after {} errors", errors()));
      throw Stop{};
    }
  }

  [[noreturn]] void syntax(const Token& at, std::string_view expected) {
    diag_.error(loc(at), "syntax", fmt::format("expected {}, got {}", expected, describe(at)));
    throw Stop{};
  }

  Token expect(Tok kind, std::string_view expected) {
    if (tok_.kind != kind) syntax(tok_, expected);
    return take();
  }
  bool atWord(std::string_view w) const { return tok_.kind == Tok::Ident && tok_.text == w; }
  void expectWord(std::string_view w, std::string_view expected) {
    if (!atWord(w)) syntax(tok_, expected);
    bump();
  }

  // ---- literals -----------------------------------------------------------------------------

  std::optional<int64_t> toInt(const Token& t) {
    int64_t v = 0;
    auto [p, ec] = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
    if (ec != std::errc() || p != t.text.data() + t.text.size()) {
      error(loc(t), "literal", fmt::format("integer literal {} does not fit in i64", describe(t)));
      return std::nullopt;
    }
    return v;
  }

  Token expectInt(std::string_view expected) {
    if (tok_.kind != Tok::Int) syntax(tok_, expected);
    return take();
  }

  static bool isFloatWord(const Token& t) { return t.kind == Tok::Ident && (t.text == "inf" || t.text == "nan"); }
  static bool isLiteral(const Token& t) { return t.kind == Tok::Int || t.kind == Tok::Float || isFloatWord(t); }

  // The f32 nearest to the literal; out-of-range magnitudes are an error, tiny ones become 0.
  std::optional<float> toF32(const Token& t) {
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

  // ---- scopes ---------------------------------------------------------------------------------

  struct Binding {
    Value* value = nullptr;  // null: the defining op failed (uses stay silent)
    Loc loc;
  };

  const Binding* lookup(std::string_view name) const {
    std::string key(name);
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto f = it->find(key);
      if (f != it->end()) return &f->second;
    }
    return nullptr;
  }

  void define(const Token& nameTok, Value* v) {
    std::string name(nameTok.name());
    if (const Binding* prev = lookup(name)) {
      error(loc(nameTok), "redefinition",
            fmt::format("redefinition of %{} (first defined at line {}, column {}); every value needs its own name",
                        name, prev->loc.line, prev->loc.col));
      return;
    }
    scopes_.back().emplace(std::move(name), Binding{v, loc(nameTok)});
  }

  // Null when undefined (reported here) or defined by a failed op (reported before).
  Value* use(const Token& nameTok) {
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

  void defineAll(const std::vector<Token>& names, const std::vector<Value*>& values) {
    for (size_t i = 0; i < names.size(); ++i) define(names[i], i < values.size() ? values[i] : nullptr);
  }
  void poison(const std::vector<Token>& names) { defineAll(names, {}); }

  static std::vector<std::string> strings(const std::vector<Token>& names) {
    std::vector<std::string> out;
    for (const Token& t : names) out.emplace_back(t.name());
    return out;
  }

  // ---- types ----------------------------------------------------------------------------------

  Elem parseElem() {
    if (tok_.kind == Tok::Ident)
      if (auto e = elemByName(tok_.text)) {
        bump();
        return *e;
      }
    syntax(tok_, "an element type (f32, i64, i1, f16 or bf16)");
  }

  // f32 | f32[m:4, n:16] | view<f32>[1, 8]. Extents are kept as written; the verifier limits them.
  Type parseType() {
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

  // ": TYPE" after an op, if written.
  std::optional<Type> parseResultType(Loc& at) {
    if (tok_.kind != Tok::Colon) return std::nullopt;
    bump();
    at = loc(tok_);
    return parseType();
  }

  // ---- operands, indices, dim lists ---------------------------------------------------------

  // Comma-separated values or literals. The first one must start on the op's line, so an op
  // written without operands does not swallow the next line's result name.
  std::vector<Operand> parseOperands() {
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

  // Operands of ops that take no literals: literals are reported; `bad` is set when any
  // operand is missing.
  std::vector<Value*> valuesOf(const std::vector<Operand>& ops, std::string_view opname, bool& bad) {
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

  // An index: an i64 value or an integer literal. nullopt when it is missing or bad.
  std::optional<Index> parseIndex(std::string_view expected) {
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

  // "[i, j, ...]" (possibly empty).
  std::vector<Index> parseIndexList(std::string_view what, bool& bad) {
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

  // "[n, k]" (possibly empty).
  std::vector<std::string> parseDimNames(std::string_view what) {
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

  // "as [_, m:4, ...]": one entry per view dim; '_' is a squeezed dim (extent 1, no name).
  std::vector<Dim> parseAccess() {
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

  // ---- building -------------------------------------------------------------------------------

  bool checkResultCount(const std::vector<Token>& names, size_t produced, const Token& opTok) {
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

  // Types and appends `op`; checks a written result type; binds the result names.
  void build(Op* op, const std::vector<Token>& names, bool bad, const std::optional<Type>& declared, const Loc& typeLoc,
             bool typeFeedsInfer) {
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
      error(
          typeLoc, "type-mismatch",
          fmt::format("declared type {} but the op produces {}", toString(*declared), toString(op->results[0]->type)));
    defineAll(names, op->results);
  }

  // A rank-0 const standing in for a literal operand; its name is chosen after the parse.
  Value* materialize(const Token& lit, Elem elem) {
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

  // Generated consts get names no value of the kernel uses.
  void nameLiterals() {
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

  // ---- structure ------------------------------------------------------------------------------

  void parseKernel() {
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
        define(p, b_->param(std::string(p.name()), std::move(t), loc(p)));
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

  // Statements up to the closing '}' (not consumed), in the builder's current region.
  void parseBlock(int depth) {
    while (tok_.kind != Tok::RBrace) parseStatement(depth);
  }

  // Parses `{ ... }` into region `r` (or, when the op failed, a detached one) with `args`
  // bound to `argNames`. Returns the closing brace.
  Token parseRegion(Region* r, const std::vector<Token>& argNames, int depth) {
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

  void parseStatement(int depth) {
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

  void parseParallel(const std::vector<Token>& names, const Token& opTok, int depth) {
    bool bad = !checkResultCount(names, 0, opTok);
    expect(Tok::LParen, "'(' and the program indices after 'parallel'");
    std::vector<Token> ivs;
    if (tok_.kind != Tok::RParen) {
      while (true) {
        ivs.push_back(expect(Tok::Value, "a program index '%name'"));
        if (tok_.kind == Tok::RParen) break;
        expect(Tok::Comma, "',' or ')' after a program index");
      }
    }
    bump();
    expectWord("in", "'in' and the domain extents");
    expect(Tok::LParen, "'(' and the domain extents");
    std::vector<int64_t> extents;
    Token first = tok_;
    if (tok_.kind != Tok::RParen) {
      while (true) {
        auto v = toInt(expectInt("an integer domain extent"));
        if (!v) bad = true;
        extents.push_back(v.value_or(1));
        if (tok_.kind == Tok::RParen) break;
        expect(Tok::Comma, "',' or ')' after a domain extent");
      }
    }
    bump();
    if (ivs.size() != extents.size()) {
      error(loc(first), "arity",
            fmt::format("parallel names {} program indices but gives {} extents", ivs.size(), extents.size()));
      bad = true;
    }
    Op* op = nullptr;
    if (!bad) {
      op = b_->parallel(strings(ivs), extents, loc(opTok));
      if (!op) checkLimit();
    }
    parseRegion(op ? op->regions[0] : nullptr, ivs, depth + 1);
  }

  void parseLoop(OpKind kind, const std::vector<Token>& names, const Token& opTok, int depth) {
    bool bad = false;
    Token iv = expect(Tok::Value, "the induction variable '%name'");
    expect(Tok::Equal, "'=' and the lower bound");
    auto lower = parseIndex("a lower bound (an i64 '%value' or an integer literal)");
    expectWord("to", "'to' and the upper bound");
    auto upper = parseIndex("an upper bound (an i64 '%value' or an integer literal)");
    if (!lower || !upper) bad = true;
    int64_t step = 1;
    if (atWord("step")) {
      bump();
      auto s = toInt(expectInt("an integer step"));
      if (!s) bad = true;
      step = s.value_or(1);
    }
    std::vector<Token> argNames{iv};
    std::vector<std::pair<std::string, Value*>> carried;
    if (atWord("iter")) {
      bump();
      expect(Tok::LParen, "'(' after 'iter'");
      if (tok_.kind != Tok::RParen) {
        while (true) {
          Token a = expect(Tok::Value, "a carried value '%name = %init'");
          expect(Tok::Equal, "'=' and the carried value's initial value");
          Token init = expect(Tok::Value, "the initial value '%value'");
          Value* v = use(init);
          if (!v) bad = true;
          argNames.push_back(a);
          carried.emplace_back(std::string(a.name()), v);
          if (tok_.kind == Tok::RParen) break;
          expect(Tok::Comma, "',' or ')' after a carried value");
        }
      }
      bump();
    }
    std::vector<Type> declared;
    Loc typeLoc;
    if (tok_.kind == Tok::Colon) {
      bump();
      typeLoc = loc(tok_);
      while (true) {
        declared.push_back(parseType());
        if (tok_.kind != Tok::Comma) break;
        bump();
      }
    }
    if (!checkResultCount(names, carried.size(), opTok)) bad = true;
    if (!declared.empty() && declared.size() != carried.size()) {
      error(
          typeLoc, "type-mismatch",
          fmt::format("{} result types are declared but the loop carries {} values", declared.size(), carried.size()));
      bad = true;
    }
    Op* op = nullptr;
    if (!bad) {
      op = b_->loop(kind, std::string(iv.name()), *lower, *upper, step, carried, strings(names), loc(opTok));
      if (!op) checkLimit();
    }
    if (op)
      for (size_t i = 0; i < declared.size(); ++i)
        if (declared[i] != op->results[i]->type)
          error(typeLoc, "type-mismatch",
                fmt::format("declared type {} but the op produces {}", toString(declared[i]),
                            toString(op->results[i]->type)));
    Region* body = op ? op->regions[0] : nullptr;
    Token close = parseRegion(body, argNames, depth + 1);
    if (body && carried.empty() && (body->ops.empty() || body->ops.back()->kind != OpKind::Yield)) {
      Region* saved = b_->insertion();
      b_->setInsertion(body);
      b_->yield({}, loc(close));
      b_->setInsertion(saved);
    }
    if (op)
      defineAll(names, op->results);
    else
      poison(names);
  }

  void parseLoad(const std::vector<Token>& names, const Token& opTok) {
    bool bad = !checkResultCount(names, 1, opTok);
    auto operands = valuesOf(parseOperands(), "load", bad);
    auto origin = parseIndexList("the origin (one index per view dim)", bad);
    auto access = parseAccess();
    double fill = 0;
    if (atWord("fill")) {
      bump();
      if (!isLiteral(tok_)) syntax(tok_, "a literal after 'fill'");
      auto f = toF32(take());
      if (!f) bad = true;
      fill = f.value_or(0.0f);
    }
    Loc typeLoc;
    auto declared = parseResultType(typeLoc);
    Op* op = k_->newOp(OpKind::Load, loc(opTok));
    op->operands = std::move(operands);
    op->indices = std::move(origin);
    op->access = std::move(access);
    op->fconst = fill;
    build(op, names, bad, declared, typeLoc, false);
  }

  void parseStore(const std::vector<Token>& names, const Token& opTok) {
    bool bad = !checkResultCount(names, 0, opTok);
    auto operands = valuesOf(parseOperands(), "store", bad);
    if (operands.size() == 2) std::swap(operands[0], operands[1]);  // text: tile, view; IR: view, tile
    auto origin = parseIndexList("the origin (one index per view dim)", bad);
    auto access = parseAccess();
    Op* op = k_->newOp(OpKind::Store, loc(opTok));
    op->operands = std::move(operands);
    op->indices = std::move(origin);
    op->access = std::move(access);
    build(op, names, bad, std::nullopt, {}, false);
  }

  void parseConst(const std::vector<Token>& names, const Token& opTok) {
    bool bad = !checkResultCount(names, 1, opTok);
    if (!isLiteral(tok_)) syntax(tok_, "a literal after 'const'");
    Token lit = take();
    Loc typeLoc;
    auto declared = parseResultType(typeLoc);
    Op* op = k_->newOp(OpKind::Const, loc(opTok));
    if (declared && (declared->elem == Elem::I64 || declared->elem == Elem::I1)) {
      if (lit.kind != Tok::Int) {
        error(loc(lit), "literal",
              fmt::format("a const of type {} needs an integer literal, got {}", toString(*declared), describe(lit)));
        bad = true;
      } else if (auto v = toInt(lit)) {
        if (declared->elem == Elem::I1 && *v != 0 && *v != 1) {
          error(loc(lit), "literal", fmt::format("an i1 const is 0 or 1, got {}", lit.text));
          bad = true;
        }
        op->iconst = *v;
        op->fconst = static_cast<double>(*v);
      } else {
        bad = true;
      }
    } else if (auto f = toF32(lit)) {
      op->fconst = *f;
    } else {
      bad = true;
    }
    build(op, names, bad, declared, typeLoc, true);
  }

  void parseIota(const std::vector<Token>& names, const Token& opTok) {
    bool bad = !checkResultCount(names, 1, opTok);
    expectWord("along", "'along' and a dim name");
    Token dim = expect(Tok::Ident, "the dim name that iota counts along");
    Loc typeLoc;
    auto declared = parseResultType(typeLoc);
    Op* op = k_->newOp(OpKind::Iota, loc(opTok));
    op->dims = {std::string(dim.text)};
    build(op, names, bad, declared, typeLoc, true);
  }

  void parseReduce(const std::vector<Token>& names, const Token& opTok) {
    bool bad = !checkResultCount(names, 1, opTok);
    if (tok_.kind != Tok::Ident || !reduceByName(tok_.text)) syntax(tok_, "a reduction (add, max, min or mul)");
    ReduceKind rk = *reduceByName(take().text);
    auto operands = valuesOf(parseOperands(), "reduce", bad);
    expectWord("over", "'over' and the reduced dims");
    auto dims = parseDimNames("the reduced dims");
    expectWord("init", "'init' and the initial value");
    Token init = expect(Tok::Value, "the initial value '%value'");
    Value* iv = use(init);
    if (!iv) bad = true;
    operands.push_back(iv);
    ReducePolicy policy;
    if (atWord("unordered_tree")) {
      bump();
      policy.kind = ReducePolicy::Kind::UnorderedTree;
      if (tok_.kind == Tok::LParen) {
        bump();
        policy.partitions = partitionCount("unordered_tree", bad);
      }
    } else if (atWord("ordered")) {
      bump();
    }
    Loc typeLoc;
    auto declared = parseResultType(typeLoc);
    Op* op = k_->newOp(OpKind::Reduce, loc(opTok));
    op->operands = std::move(operands);
    op->reduce = rk;
    op->dims = std::move(dims);
    op->reduce_policy = policy;
    build(op, names, bad, declared, typeLoc, false);
  }

  // A policy's partition count after its '(': an integer 1..16 and ')'. Out of range or
  // missing: an error naming `what` (the policy), `bad` set, 1 returned.
  int partitionCount(const char* what, bool& bad) {
    Token p = expectInt("a partition count 1..16");
    auto v = toInt(p);
    if (v && (*v < 1 || *v > 16)) {
      error(loc(p), "policy", fmt::format("{} partition count {} is outside 1..16", what, *v));
      v.reset();
    }
    if (!v) bad = true;
    expect(Tok::RParen, "')' after the partition count");
    return static_cast<int>(v.value_or(1));
  }

  void parseMma(const std::vector<Token>& names, const Token& opTok) {
    bool bad = !checkResultCount(names, 1, opTok);
    auto operands = valuesOf(parseOperands(), "mma", bad);
    expectWord("contract", "'contract' and the contracted dims");
    auto dims = parseDimNames("the contracted dims");
    MmaPolicy policy;
    while (atWord("allow_reassociation") || atWord("allow_fma") || atWord("fused") || atWord("partitions")) {
      if (atWord("partitions")) {
        Token at = tok_;
        bump();
        if (policy.partitions != 0) error(loc(at), "policy", "mma policy partitions is given twice");
        expect(Tok::LParen, "'(' and a partition count 1..16 after 'partitions'");
        policy.partitions = partitionCount("mma", bad);
        continue;
      }
      bool& flag = atWord("allow_fma") ? policy.allow_fma : atWord("fused") ? policy.fused : policy.allow_reassociation;
      if (flag) error(loc(tok_), "policy", fmt::format("mma flag {} is given twice", tok_.text));
      flag = true;
      bump();
    }
    Loc typeLoc;
    auto declared = parseResultType(typeLoc);
    Op* op = k_->newOp(OpKind::Mma, loc(opTok));
    op->operands = std::move(operands);
    op->dims = std::move(dims);
    op->mma_policy = policy;
    build(op, names, bad, declared, typeLoc, false);
  }

  void parseExtract(const std::vector<Token>& names, const Token& opTok) {
    bool bad = !checkResultCount(names, 1, opTok);
    auto operands = valuesOf(parseOperands(), "extract", bad);
    auto indices = parseIndexList("the element's indices", bad);
    Loc typeLoc;
    auto declared = parseResultType(typeLoc);
    Op* op = k_->newOp(OpKind::Extract, loc(opTok));
    op->operands = std::move(operands);
    op->indices = std::move(indices);
    build(op, names, bad, declared, typeLoc, false);
  }

  void parseStage(const std::vector<Token>& names, const Token& opTok) {
    bool bad = !checkResultCount(names, 0, opTok);
    auto n = toInt(expectInt("a stage number after 'stage'"));
    Op* op = k_->newOp(OpKind::Stage, loc(opTok));
    op->iconst = n.value_or(0);
    build(op, names, bad || !n, std::nullopt, {}, false);
  }

  // unary, binary, cmp, select, broadcast, cast, yield: `OP [pred] operands [: TYPE]`.
  void parseSimple(OpKind kind, const std::vector<Token>& names, const Token& opTok) {
    const bool produces = kind != OpKind::Yield;
    bool bad = !checkResultCount(names, produces ? 1 : 0, opTok);
    CmpPred pred = CmpPred::LT;
    if (kind == OpKind::Cmp) {
      if (tok_.kind != Tok::Ident || !predByName(tok_.text)) syntax(tok_, "a predicate (lt, le, gt, ge, eq or ne)");
      pred = *predByName(take().text);
    }
    std::vector<Operand> written = parseOperands();
    std::vector<Value*> operands;
    if ((isBinary(kind) || kind == OpKind::Cmp) && written.size() == 2) {
      for (int i = 0; i < 2; ++i) {
        const Operand& o = written[i];
        const Operand& other = written[1 - i];
        Value* v = o.value;
        if (o.literal) {
          if (other.literal) {
            error(loc(o.tok), "literal", fmt::format("{} needs at least one '%value' operand", opTok.text));
          } else if (other.value) {
            v = materialize(o.tok, other.value->type.elem);
          }
        }
        if (!v) bad = true;
        operands.push_back(v);
      }
    } else if (isBinary(kind) || kind == OpKind::Cmp) {
      error(loc(opTok), "arity", fmt::format("{} takes 2 operands, got {}", opTok.text, written.size()));
      bad = true;
    } else {
      operands = valuesOf(written, opTok.text, bad);
    }
    Loc typeLoc;
    std::optional<Type> declared;
    if (produces) declared = parseResultType(typeLoc);
    Op* op = k_->newOp(kind, loc(opTok));
    op->operands = std::move(operands);
    op->pred = pred;
    bool feeds = kind == OpKind::Broadcast || kind == OpKind::Cast;
    build(op, names, bad, declared, typeLoc, feeds);
  }

  std::string file_;
  DiagEngine& diag_;
  size_t start_;
  Lexer lex_;
  Token tok_;
  int prevLine_ = 1;
  Kernel* k_ = nullptr;
  Builder* b_ = nullptr;
  std::vector<std::unordered_map<std::string, Binding>> scopes_;
  std::vector<Value*> literals_;
};

}  // namespace

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
