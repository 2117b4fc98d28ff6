// Private to parser.cpp and parser_ops.cpp: the Parser class, split by idea across the two files.
#pragma once

#include <fmt/format.h>

#include <algorithm>
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
#include "ir/parser.h"
#include "ir/verifier.h"

namespace kiln::ir::detail {

constexpr int kMaxDepth = 256;
constexpr size_t kMaxErrors = 20;

struct Stop {};  // thrown after a diagnostic that ends the parse

inline std::optional<OpKind> opByName(std::string_view s) {
  static const std::unordered_map<std::string_view, OpKind> table = [] {
    std::unordered_map<std::string_view, OpKind> t;
    for (int k = 0; k <= static_cast<int>(OpKind::Min); ++k) t.emplace(opName(static_cast<OpKind>(k)), OpKind(k));
    return t;
  }();
  auto it = table.find(s);
  if (it == table.end()) return std::nullopt;
  return it->second;
}

inline std::optional<Elem> elemByName(std::string_view s) {
  for (Elem e : {Elem::F32, Elem::I64, Elem::I1, Elem::F16, Elem::BF16, Elem::I32})
    if (elemName(e) == s) return e;
  return std::nullopt;
}

inline std::optional<CmpPred> predByName(std::string_view s) {
  for (int p = 0; p <= static_cast<int>(CmpPred::NE); ++p)
    if (cmpName(static_cast<CmpPred>(p)) == s) return static_cast<CmpPred>(p);
  return std::nullopt;
}

inline std::optional<ReduceKind> reduceByName(std::string_view s) {
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

  std::unique_ptr<Kernel> run();

 private:
  // ---- tokens and diagnostics -------------------------------------------------------------

  size_t errors() const { return diag_.all().size() - start_; }
  Loc loc(const Token& t) const { return Loc{file_, t.line, t.col}; }

  // A byte that starts no token ends the parse where it stands.
  void bump();
  Token take();

  // A non-fatal error; the parse stops once kMaxErrors have been reported.
  void error(const Loc& at, const char* code, std::string message);
  void checkLimit();

  [[noreturn]] void syntax(const Token& at, std::string_view expected);

  Token expect(Tok kind, std::string_view expected);
  bool atWord(std::string_view w) const { return tok_.kind == Tok::Ident && tok_.text == w; }
  void expectWord(std::string_view w, std::string_view expected);

  // ---- literals -----------------------------------------------------------------------------

  std::optional<int64_t> toInt(const Token& t);

  Token expectInt(std::string_view expected);

  static bool isFloatWord(const Token& t) { return t.kind == Tok::Ident && (t.text == "inf" || t.text == "nan"); }
  static bool isLiteral(const Token& t) { return t.kind == Tok::Int || t.kind == Tok::Float || isFloatWord(t); }

  // The f32 nearest to the literal; out-of-range magnitudes are an error, tiny ones become 0.
  std::optional<float> toF32(const Token& t);

  // ---- scopes ---------------------------------------------------------------------------------

  struct Binding {
    Value* value = nullptr;  // null: the defining op failed (uses stay silent)
    Loc loc;
  };

  const Binding* lookup(std::string_view name) const;

  void define(const Token& nameTok, Value* v);

  // Null when undefined (reported here) or defined by a failed op (reported before).
  Value* use(const Token& nameTok);

  void defineAll(const std::vector<Token>& names, const std::vector<Value*>& values);
  void poison(const std::vector<Token>& names) { defineAll(names, {}); }

  static std::vector<std::string> strings(const std::vector<Token>& names);

  // ---- types ----------------------------------------------------------------------------------

  Elem parseElem();

  // f32 | f32[m:4, n:16] | view<f32>[1, 8]. Extents are kept as written; the verifier limits them.
  Type parseType();
  IntRange parseRange();  // after a parameter's type: `in [lo, hi]`

  // ": TYPE" after an op, if written.
  std::optional<Type> parseResultType(Loc& at);

  // ---- operands, indices, dim lists ---------------------------------------------------------

  // Comma-separated values or literals. The first one must start on the op's line, so an op
  // written without operands does not swallow the next line's result name.
  std::vector<Operand> parseOperands();

  // Operands of ops that take no literals: literals are reported; `bad` is set when any
  // operand is missing.
  std::vector<Value*> valuesOf(const std::vector<Operand>& ops, std::string_view opname, bool& bad);

  // An index: an i64 value or an integer literal. nullopt when it is missing or bad.
  std::optional<Index> parseIndex(std::string_view expected);

  // "[i, j, ...]" (possibly empty).
  std::vector<Index> parseIndexList(std::string_view what, bool& bad);

  // "[n, k]" (possibly empty).
  std::vector<std::string> parseDimNames(std::string_view what);

  // "as [_, m:4, ...]": one entry per view dim; '_' is a squeezed dim (extent 1, no name).
  std::vector<Dim> parseAccess();

  // ---- building -------------------------------------------------------------------------------

  bool checkResultCount(const std::vector<Token>& names, size_t produced, const Token& opTok);

  // Types and appends `op`; checks a written result type; binds the result names.
  void build(Op* op, const std::vector<Token>& names, bool bad, const std::optional<Type>& declared, const Loc& typeLoc,
             bool typeFeedsInfer);

  // A rank-0 const standing in for a literal operand; its name is chosen after the parse.
  Value* materialize(const Token& lit, Elem elem);

  // Generated consts get names no value of the kernel uses.
  void nameLiterals();

  // ---- structure ------------------------------------------------------------------------------

  void parseKernel();

  // Statements up to the closing '}' (not consumed), in the builder's current region.
  void parseBlock(int depth);

  // Parses `{ ... }` into region `r` (or, when the op failed, a detached one) with `args`
  // bound to `argNames`. Returns the closing brace.
  Token parseRegion(Region* r, const std::vector<Token>& argNames, int depth);

  void parseStatement(int depth);

  void parseParallel(const std::vector<Token>& names, const Token& opTok, int depth);

  void parseLoop(OpKind kind, const std::vector<Token>& names, const Token& opTok, int depth);

  void parseLoad(const std::vector<Token>& names, const Token& opTok);

  void parseStore(const std::vector<Token>& names, const Token& opTok);

  void parseConst(const std::vector<Token>& names, const Token& opTok);

  void parseIota(const std::vector<Token>& names, const Token& opTok);

  void parseReduce(const std::vector<Token>& names, const Token& opTok);

  // A policy's partition count after its '(': an integer 1..16 and ')'. Out of range or
  // missing: an error naming `what` (the policy), `bad` set, 1 returned.
  int partitionCount(const char* what, bool& bad);

  void parseMma(const std::vector<Token>& names, const Token& opTok);

  void parseExtract(const std::vector<Token>& names, const Token& opTok);

  void parseStage(const std::vector<Token>& names, const Token& opTok);

  // unary, binary, cmp, select, broadcast, cast, yield: `OP [pred] operands [: TYPE]`.
  void parseSimple(OpKind kind, const std::vector<Token>& names, const Token& opTok);

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

}  // namespace kiln::ir::detail
