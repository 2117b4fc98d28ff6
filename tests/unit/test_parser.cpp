// Parser: successful parses build the expected IR; every error class is a diagnostic at the
// offending token with its code; garbage, truncation, huge and deeply nested input never
// crash or hang.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include "ir/diag.h"
#include "ir/ir.h"
#include "ir/parser.h"
#include "ir/printer.h"

namespace kiln::ir {
namespace {

struct Parsed {
  std::unique_ptr<Kernel> kernel;
  DiagEngine diag;
  bool ok() const { return kernel != nullptr; }
  const Diagnostic& first() const { return diag.all().front(); }
};

std::unique_ptr<Parsed> parse(std::string_view text) {
  auto p = std::make_unique<Parsed>();
  p->kernel = parseKernel(text, "f.tile", p->diag);
  // The contract: a kernel, or at least one diagnostic; never both missing.
  EXPECT_NE(p->kernel != nullptr, p->diag.hasErrors()) << p->diag.str();
  return p;
}

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A kernel body wrapped around `ops` (each line indented by the caller).
std::string wrap(const std::string& ops) {
  return "kernel @k(%x: view<f32>[64], %y: view<f32>[64], %n: i64) {\n"
         "  parallel (%p) in (4) {\n" +
         ops +
         "  }\n"
         "}\n";
}

const Op* opAt(const Kernel& k, size_t i) {
  return k.root()->regions[0]->ops.at(i);
}

// ---- success --------------------------------------------------------------------------------

TEST(Parser, FirstKernelFromTheDocs) {
  auto p = parse(R"(# y = exp(x) * 2, in tiles of 16
kernel @scale_exp(%x: view<f32>[1000], %y: view<f32>[1000]) {
  parallel (%p) in (63) {
    %o = mul %p, 16 : i64
    %t = load %x[%o] as [n:16] fill 0 : f32[n:16]
    %e = exp %t : f32[n:16]
    %two = const 2 : f32
    %r = mul %e, %two : f32[n:16]
    store %r, %y[%o] as [n:16]
  }
}
)");
  ASSERT_TRUE(p->ok()) << p->diag.str();
  const Kernel& k = *p->kernel;
  EXPECT_EQ(k.name, "scale_exp");
  ASSERT_EQ(k.params.size(), 2u);
  EXPECT_EQ(toString(k.params[0]->type), "view<f32>[1000]");
  const Op* root = k.root();
  ASSERT_NE(root, nullptr);
  EXPECT_EQ(root->extents, std::vector<int64_t>{63});
  EXPECT_EQ(root->regions[0]->args[0]->name, "p");
  // The literal 16 became an i64 const ahead of the mul.
  const auto& ops = root->regions[0]->ops;
  ASSERT_EQ(ops.size(), 7u);
  EXPECT_EQ(ops[0]->kind, OpKind::Const);
  EXPECT_EQ(ops[0]->iconst, 16);
  EXPECT_EQ(toString(ops[0]->results[0]->type), "i64");
  EXPECT_EQ(ops[1]->kind, OpKind::Mul);
  EXPECT_EQ(ops[1]->operands[1], ops[0]->results[0]);
  EXPECT_EQ(ops[2]->kind, OpKind::Load);
  EXPECT_EQ(ops[2]->loc.line, 5);
  EXPECT_EQ(ops[2]->loc.col, 10);
  EXPECT_EQ(ops[6]->kind, OpKind::Store);
  EXPECT_EQ(ops[6]->operands[0], k.params[1]);  // IR order: view, tile
  EXPECT_EQ(ops[6]->operands[1], ops[5]->results[0]);
  EXPECT_EQ(k.outputs(), std::vector<Value*>{k.params[1]});
}

TEST(Parser, TypesAreInferredWhenOmitted) {
  auto p =
      parse(wrap("    %t = load %x[0] as [n:16]\n"
                 "    %u = add %t, %t\n"
                 "    %c = cmp lt %u, 1.5\n"
                 "    %r = reduce max %u over [n] init %u ordered\n"));
  // init %u has the wrong type: a reduce error, not a parse crash.
  ASSERT_FALSE(p->ok());
  EXPECT_EQ(p->first().code, "shape-mismatch");
  EXPECT_EQ(p->first().loc.line, 6);
  EXPECT_EQ(p->first().loc.col, 10);

  auto q =
      parse(wrap("    %t = load %x[0] as [n:16]\n"
                 "    %u = add %t, %t\n"
                 "    %c = cmp lt %u, 1.5\n"));
  ASSERT_TRUE(q->ok()) << q->diag.str();
  EXPECT_EQ(toString(opAt(*q->kernel, 0)->results[0]->type), "f32[n:16]");
  EXPECT_EQ(opAt(*q->kernel, 0)->fconst, 0.0);  // default fill
  EXPECT_EQ(toString(opAt(*q->kernel, 3)->results[0]->type), "i1[n:16]");
}

TEST(Parser, LiteralOperandsTakeTheOtherOperandsType) {
  auto p =
      parse(wrap("    %a = add %n, 3\n"
                 "    %b = mul 2.5, %a\n"  // f32 literal beside an i64: error
                 ));
  ASSERT_FALSE(p->ok());
  EXPECT_EQ(p->first().code, "literal");
  EXPECT_EQ(p->first().loc.line, 4);
  EXPECT_EQ(p->first().loc.col, 14);

  auto q =
      parse(wrap("    %lit0 = add %n, 3\n"
                 "    %t = load %x[%lit0] as [n:16]\n"
                 "    %u = mul %t, 2\n"
                 "    %c = cmp eq %n, -7\n"
                 "    %d = cmp ne %c, 1\n"));
  ASSERT_TRUE(q->ok()) << q->diag.str();
  const Op* c0 = opAt(*q->kernel, 0);
  EXPECT_EQ(c0->kind, OpKind::Const);
  EXPECT_EQ(toString(c0->results[0]->type), "i64");
  // A generated name never collides with a name of the text.
  EXPECT_NE(c0->results[0]->name, "lit0");
  const Op* c1 = opAt(*q->kernel, 3);
  EXPECT_EQ(c1->kind, OpKind::Const);
  EXPECT_EQ(toString(c1->results[0]->type), "f32");
  EXPECT_EQ(c1->fconst, 2.0);
  EXPECT_EQ(opAt(*q->kernel, 5)->iconst, -7);
  EXPECT_EQ(toString(opAt(*q->kernel, 7)->results[0]->type), "i1");
}

TEST(Parser, LoopsWithCarriedValuesAndImplicitYield) {
  auto p =
      parse(wrap("    %z = const 0 : f32[n:16]\n"
                 "    %s, %c = serial %i = 0 to %n step 2 iter(%a = %z, %b = %z) {\n"
                 "      %t = load %x[%i] as [n:16]\n"
                 "      %a2 = add %a, %t\n"
                 "      yield %a2, %b\n"
                 "    }\n"
                 "    pipeline %j = %n to 8 {\n"
                 "      stage 0\n"
                 "      store %s, %y[%j] as [n:16]\n"
                 "    }\n"));
  ASSERT_TRUE(p->ok()) << p->diag.str();
  const Op* loop = opAt(*p->kernel, 1);
  EXPECT_EQ(loop->kind, OpKind::Serial);
  ASSERT_EQ(loop->results.size(), 2u);
  EXPECT_EQ(loop->results[0]->name, "s");
  EXPECT_EQ(loop->indices[1].value, p->kernel->params[2]);
  EXPECT_EQ(loop->indices[2].constant, 2);
  ASSERT_EQ(loop->regions[0]->args.size(), 3u);
  EXPECT_EQ(loop->regions[0]->args[1]->name, "a");
  const Op* pipe = opAt(*p->kernel, 2);
  EXPECT_EQ(pipe->kind, OpKind::Pipeline);
  EXPECT_EQ(pipe->indices[2].constant, 1);  // step defaults to 1
  ASSERT_EQ(pipe->regions[0]->ops.size(), 3u);
  EXPECT_EQ(pipe->regions[0]->ops.back()->kind, OpKind::Yield);  // inserted
  EXPECT_EQ(pipe->regions[0]->ops.back()->loc.line, 12);
}

TEST(Parser, PoliciesAndFlags) {
  auto p = parse(std::string("kernel @k(%x: view<f32>[4, 16], %y: view<f32>[4, 16]) {\n  parallel (%p) in (1) {\n") +
                 "    %t = load %x[0, 0] as [m:4, n:16]\n"
                 "    %z = const 0 : f32\n"
                 "    %r1 = reduce add %t over [n] init %z\n"
                 "    %r2 = reduce add %t over [n] init %z unordered_tree\n"
                 "    %r3 = reduce add %t over [n] init %z unordered_tree(16)\n"
                 "    %acc = const 0 : f32[m:4, j:4]\n"
                 "    %b = load %y[0, 0] as [j:4, n:16] fill -inf\n"
                 "    %c = mma %t, %b, %acc contract [n] allow_fma\n  }\n}\n");
  ASSERT_TRUE(p->ok()) << p->diag.str();
  EXPECT_EQ(opAt(*p->kernel, 2)->reduce_policy.kind, ReducePolicy::Kind::Ordered);
  EXPECT_EQ(opAt(*p->kernel, 3)->reduce_policy.kind, ReducePolicy::Kind::UnorderedTree);
  EXPECT_EQ(opAt(*p->kernel, 3)->reduce_policy.partitions, 0);
  EXPECT_EQ(opAt(*p->kernel, 4)->reduce_policy.partitions, 16);
  EXPECT_TRUE(std::isinf(opAt(*p->kernel, 6)->fconst));
  EXPECT_TRUE(opAt(*p->kernel, 7)->mma_policy.allow_fma);
  EXPECT_FALSE(opAt(*p->kernel, 7)->mma_policy.allow_reassociation);
}

TEST(Parser, LiteralsReadAsF32) {
  auto p =
      parse(wrap("    %a = const 0.1 : f32\n"
                 "    %b = const -0 : f32\n"
                 "    %c = const 1e-50 : f32\n"
                 "    %d = const nan : f32\n"
                 "    %e = const 1 : i1\n"
                 "    %f = const 1. : f32\n"
                 "    %g = const -1.e5 : f32\n"
                 "    %h = const 7 : f32\n"
                 "    %i = const 1E-50 : f32\n"));
  ASSERT_TRUE(p->ok()) << p->diag.str();
  EXPECT_EQ(opAt(*p->kernel, 0)->fconst, static_cast<double>(0.1f));
  EXPECT_TRUE(std::signbit(opAt(*p->kernel, 1)->fconst));
  EXPECT_EQ(opAt(*p->kernel, 2)->fconst, 0.0);
  EXPECT_TRUE(std::isnan(opAt(*p->kernel, 3)->fconst));
  EXPECT_EQ(opAt(*p->kernel, 4)->iconst, 1);
  EXPECT_EQ(opAt(*p->kernel, 5)->fconst, 1.0);
  EXPECT_EQ(opAt(*p->kernel, 6)->fconst, -1e5);
  EXPECT_EQ(opAt(*p->kernel, 7)->fconst, 7.0);
  EXPECT_EQ(opAt(*p->kernel, 8)->fconst, 0.0);
}

TEST(Parser, SiblingRegionsMayReuseNames) {
  auto p =
      parse(wrap("    serial %i = 0 to 2 step 1 {\n"
                 "      %t = load %x[%i] as [n:4]\n"
                 "    }\n"
                 "    serial %i = 0 to 2 step 1 {\n"
                 "      %t = load %x[%i] as [n:4]\n"
                 "    }\n"));
  EXPECT_TRUE(p->ok()) << p->diag.str();
}

TEST(Parser, ParseFileReportsMissingFile) {
  DiagEngine diag;
  EXPECT_EQ(parseFile("/nonexistent/dir/none.tile", diag), nullptr);
  ASSERT_TRUE(diag.hasErrors());
  EXPECT_EQ(diag.all()[0].code, "io");
  EXPECT_EQ(diag.all()[0].loc.line, 0);
  EXPECT_EQ(diag.all()[0].loc.file, "/nonexistent/dir/none.tile");
}

// ---- errors: one per class, at the offending token ------------------------------------------

struct ErrorCase {
  const char* what;
  std::string text;
  int line;
  int col;
  const char* code;
  const char* fragment;  // a piece of the message
};

std::vector<ErrorCase> errorCases() {
  return {
      {"empty file", "", 1, 1, "syntax", "expected 'kernel' at the start of the file, got end of file"},
      {"no kernel keyword", "kern @k() {}", 1, 1, "syntax", "expected 'kernel'"},
      {"bad parameter separator", "kernel @k(%x: view<f32>[4] foo) {}", 1, 28, "syntax",
       "expected ',' or ')' after a parameter, got 'foo'"},
      {"bad type", "kernel @k(%x: float) {}", 1, 15, "syntax", "expected an element type"},
      {"bad view", "kernel @k(%x: view[4]) {}", 1, 19, "syntax", "expected '<' after 'view'"},
      {"tile dim without extent", "kernel @k(%x: f32[m]) {}", 1, 20, "syntax", "expected ':' and an extent"},
      {"unexpected character", "kernel @k(%x: i64) {\n  parallel (%p) in (1) {\n    %a = add %x; %x\n  }\n}\n", 3, 16,
       "syntax", "unexpected character ';'"},
      {"NUL byte", std::string("kernel @k(\0) {}", 15), 1, 11, "syntax", "unexpected byte 0x00"},
      {"invalid UTF-8", "kernel @k() {\xff\xfe}", 1, 14, "syntax", "unexpected byte 0xff"},
      {"missing sigil name", "kernel @k(% ) {}", 1, 11, "syntax", "expected a name after '%'"},
      {"malformed number", wrap("    %a = add %n, 12ab\n"), 3, 18, "syntax", "malformed number '12ab'"},
      {"unknown op", wrap("    %a = frobnicate %n\n"), 3, 10, "unknown-op", "unknown op 'frobnicate'"},
      {"missing '='", wrap("    %a add %n, %n\n"), 3, 8, "syntax",
       "expected '=' or ',' after a result name, got 'add'"},
      {"missing op name", wrap("    %a = %n\n"), 3, 10, "syntax", "expected an op name after '='"},
      {"stray token", wrap("    42\n"), 3, 5, "syntax", "expected an op or '}', got '42'"},
      {"unary with two operands", wrap("    %a = exp %n, %n\n"), 3, 10, "arity", "exp takes 1 operand, got 2"},
      {"unary without operand", wrap("    %a = exp\n    %b = add %n, 1\n"), 3, 10, "arity",
       "exp takes 1 operand, got 0"},
      {"binary with one operand", wrap("    %a = add %n\n"), 3, 10, "arity", "add takes 2 operands, got 1"},
      {"binary with three operands", wrap("    %a = add %n, %n, 3\n"), 3, 10, "arity", "add takes 2 operands, got 3"},
      {"select with two operands", wrap("    %c = cmp lt %n, 1\n    %a = select %c, %n\n"), 4, 10, "arity",
       "select takes 3 operands, got 2"},
      {"mma with two operands", wrap("    %t = load %x[0] as [k:4]\n    %a = mma %t, %t contract [k]\n"), 4, 10,
       "arity", "mma takes 3 operands, got 2"},
      {"store with one operand", wrap("    store %y[0] as [n:4]\n"), 3, 5, "arity", "store takes 2 operands, got 1"},
      {"load origin rank", wrap("    %t = load %x[0, 0] as [n:4]\n"), 3, 10, "arity", "load origin has 2 indices"},
      {"parallel indices vs extents", "kernel @k() {\n  parallel (%i, %j) in (4) {\n  }\n}\n", 2, 25, "arity",
       "parallel names 2 program indices but gives 1 extents"},
      {"undefined value", wrap("    %a = add %q, 1\n"), 3, 14, "undefined-value", "use of undefined value %q"},
      {"use before definition", wrap("    %a = add %b, 1\n    %b = add %n, 1\n"), 3, 14, "undefined-value",
       "use of undefined value %b"},
      {"use outside its region",
       wrap("    serial %i = 0 to 4 step 1 {\n      %t = add %i, 1\n    }\n    %u = add %t, 1\n"), 6, 14,
       "undefined-value", "inside a region that does not enclose this use"},
      {"redefinition", wrap("    %a = add %n, 1\n    %a = add %n, 2\n"), 4, 5, "redefinition", "redefinition of %a"},
      {"redefinition of a parameter", wrap("    %x = add %n, 1\n"), 3, 5, "redefinition", "redefinition of %x"},
      {"redefinition in a nested region",
       wrap("    %t = add %n, 1\n    serial %i = 0 to 4 step 1 {\n      %t = add %i, 1\n    }\n"), 5, 7, "redefinition",
       "redefinition of %t"},
      {"integer overflow", wrap("    %a = add %n, 99999999999999999999\n"), 3, 18, "literal",
       "integer literal '99999999999999999999' does not fit in i64"},
      {"extent overflow", "kernel @k() {\n  parallel (%i) in (9223372036854775808) {\n  }\n}\n", 2, 21, "literal",
       "does not fit in i64"},
      {"f32 literal overflow", wrap("    %a = const 1e39 : f32\n"), 3, 16, "literal", "out of range for f32"},
      {"float literal for i64 const", wrap("    %a = const 2.5 : i64\n"), 3, 16, "literal", "needs an integer literal"},
      {"i1 const not 0/1", wrap("    %a = const 2 : i1\n"), 3, 16, "literal", "an i1 const is 0 or 1"},
      {"two literal operands", wrap("    %a = add 1, 2\n"), 3, 14, "literal", "at least one '%value' operand"},
      {"literal in select", wrap("    %c = cmp lt %n, 1\n    %a = select %c, %n, 0\n"), 4, 25, "literal",
       "a literal can stand in only for an operand of a binary op or cmp"},
      {"float index", wrap("    %t = load %x[1.5] as [n:4]\n"), 3, 18, "syntax", "expected an index"},
      {"declared type differs", wrap("    %a = add %n, 1 : f32\n"), 3, 22, "type-mismatch",
       "declared type f32 but the op produces i64"},
      {"declared cast type differs", wrap("    %t = load %x[0] as [n:4]\n    %a = cast %t : i64\n"), 4, 20,
       "type-mismatch", "declared type i64 but the op produces i64[n:4]"},
      {"const without type", wrap("    %a = const 1\n"), 3, 10, "type-required", "const needs"},
      {"too many result names", wrap("    %a, %b = add %n, 1\n"), 3, 5, "result-count",
       "add produces 1 value but 2 names are given"},
      {"result name on store", wrap("    %t = load %x[0] as [n:4]\n    %s = store %t, %y[0] as [n:4]\n"), 4, 5,
       "result-count", "store produces no value"},
      {"unnamed result", wrap("    add %n, 1\n"), 3, 5, "result-count", "add produces 1 value"},
      {"loop results vs carried",
       wrap("    %z = const 0 : f32\n    serial %i = 0 to 4 step 1 iter(%a = %z) {\n"
            "      yield %a\n    }\n"),
       4, 5, "result-count", "serial produces 1 value"},
      {"loop declared types",
       wrap("    %z = const 0 : f32\n    %r = serial %i = 0 to 4 step 1 iter(%a = %z) : i64 {\n"
            "      yield %a\n    }\n"),
       4, 52, "type-mismatch", "declared type i64 but the op produces f32"},
      {"partition count 0",
       wrap("    %t = load %x[0] as [n:4]\n    %z = const 0 : f32\n"
            "    %r = reduce add %t over [n] init %z unordered_tree(0)\n"),
       5, 56, "policy", "outside 1..16"},
      {"partition count 17",
       wrap("    %t = load %x[0] as [n:4]\n    %z = const 0 : f32\n"
            "    %r = reduce add %t over [n] init %z unordered_tree(17)\n"),
       5, 56, "policy", "outside 1..16"},
      {"repeated mma flag",
       wrap("    %t = load %x[0] as [k:4]\n    %z = const 0 : f32\n"
            "    %c = mma %t, %t, %z contract [k] allow_fma allow_fma\n"),
       5, 48, "policy", "given twice"},
      {"bad reduction", wrap("    %t = load %x[0] as [n:4]\n    %r = reduce avg %t over [n] init %t\n"), 4, 17,
       "syntax", "expected a reduction (add, max, min or mul), got 'avg'"},
      {"bad predicate", wrap("    %c = cmp less %n, 1\n"), 3, 14, "syntax", "expected a predicate"},
      {"unclosed body", "kernel @k() {\n  parallel (%p) in (1) {\n", 3, 1, "syntax",
       "expected an op or '}', got end of file"},
      {"two kernels", "kernel @a() {\n}\nkernel @b() {\n}\n", 3, 1, "syntax", "one kernel per file"},
      {"missing 'as'", wrap("    %t = load %x[0] [n:4]\n"), 3, 21, "syntax", "expected 'as'"},
      {"iota without 'along'", wrap("    %i = iota n : i64[n:4]\n"), 3, 15, "syntax", "expected 'along'"},
      {"verifier: no root", "kernel @k() {\n}\n", 1, 1, "root-domain", "parallel"},
      {"verifier: an i64 tile into an f16 view",
       "kernel @k(%h: view<f16>[4]) {\n  parallel (%p) in (1) {\n    %i = iota along n : i64[n:4]\n"
       "    store %i, %h[0] as [n:4]\n  }\n}\n",
       4, 5, "elem-type", "store needs an f32 tile"},
      {"verifier: missing yield",
       wrap("    %z = const 0 : f32\n    %r = serial %i = 0 to 4 step 1 iter(%a = %z) {\n      %b = add %a, 1\n"
            "    }\n"),
       4, 10, "missing-yield", ""},
  };
}

TEST(ParserErrors, EachClassIsPositionedAndCoded) {
  for (const ErrorCase& c : errorCases()) {
    SCOPED_TRACE(c.what);
    auto p = parse(c.text);
    ASSERT_FALSE(p->ok());
    ASSERT_TRUE(p->diag.hasErrors());
    const Diagnostic& d = p->first();
    EXPECT_EQ(d.code, c.code) << p->diag.str();
    EXPECT_EQ(d.loc.file, "f.tile");
    EXPECT_EQ(d.loc.line, c.line) << p->diag.str();
    EXPECT_EQ(d.loc.col, c.col) << p->diag.str();
    EXPECT_NE(d.message.find(c.fragment), std::string::npos) << p->diag.str();
  }
}

TEST(ParserErrors, FormatMatchesTheContract) {
  auto p = parse("kernel @k(%x: view<f32>[4] foo) {}");
  ASSERT_FALSE(p->ok());
  EXPECT_EQ(format(p->first()), "f.tile:1:28: error: expected ',' or ')' after a parameter, got 'foo' [syntax]");
}

TEST(ParserErrors, SemanticErrorsContinueUpToALimit) {
  std::string ops;
  for (int i = 0; i < 100; ++i) ops += "    %a" + std::to_string(i) + " = add %undefined, 1\n";
  auto p = parse(wrap(ops));
  ASSERT_FALSE(p->ok());
  EXPECT_GE(p->diag.all().size(), 20u);
  EXPECT_LE(p->diag.all().size(), 21u);
  EXPECT_EQ(p->diag.all().back().code, "too-many-errors");
  // A failed op's result does not cascade: one error for the two lines below.
  auto q = parse(wrap("    %a = add %nope, 1\n    %b = add %a, 1\n"));
  EXPECT_EQ(q->diag.all().size(), 1u) << q->diag.str();
}

TEST(ParserErrors, LongTokensAreShortenedInMessages) {
  std::string name(100000, 'z');
  auto p = parse(wrap("    %a = " + name + " %n\n"));
  ASSERT_FALSE(p->ok());
  EXPECT_EQ(p->first().code, "unknown-op");
  EXPECT_LT(p->first().message.size(), 200u);
}

// ---- robustness -------------------------------------------------------------------------------

std::string exampleText() {
  return readFile(std::string(KILN_SOURCE_DIR) + "/tests/ir/online_softmax.tile");
}

TEST(ParserRobustness, EveryPrefixOfAKernel) {
  const std::string text = exampleText();
  ASSERT_GT(text.size(), 100u);
  const size_t lastBrace = text.rfind('}');
  for (size_t n = 0; n <= text.size(); ++n) {
    DiagEngine diag;
    auto k = parseKernel(std::string_view(text).substr(0, n), "prefix.tile", diag);
    if (k) {
      ASSERT_GT(n, lastBrace) << "a strict prefix parsed: " << n;
    } else {
      ASSERT_TRUE(diag.hasErrors()) << n;
      for (const Diagnostic& d : diag.all()) ASSERT_GE(d.loc.line, 1) << format(d);
    }
  }
}

TEST(ParserRobustness, MutatedKernels) {
  const std::string text = exampleText();
  std::mt19937 rng(1234);
  const char alphabet[] = "%@{}[]()<>,:=_-.0123456789abcxyz \n\t#/\0\xff";
  for (int trial = 0; trial < 3000; ++trial) {
    std::string t = text;
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      size_t at = rng() % t.size();
      switch (rng() % 3) {
        case 0: t[at] = alphabet[rng() % (sizeof(alphabet) - 1)]; break;
        case 1: t.erase(at, 1 + rng() % 8); break;
        default: t.insert(at, 1, alphabet[rng() % (sizeof(alphabet) - 1)]); break;
      }
      if (t.empty()) t.push_back('x');
    }
    DiagEngine diag;
    auto k = parseKernel(t, "m.tile", diag);
    ASSERT_NE(k != nullptr, diag.hasErrors()) << t;
    if (k) {
      // Whatever parsed prints and parses again to the same text.
      std::string once = print(*k);
      DiagEngine d2;
      auto k2 = parseKernel(once, "m2.tile", d2);
      ASSERT_NE(k2, nullptr) << d2.str() << once;
      ASSERT_EQ(print(*k2), once);
    }
  }
}

TEST(ParserRobustness, RandomBytes) {
  std::mt19937 rng(99);
  for (int trial = 0; trial < 2000; ++trial) {
    std::string t(rng() % 300, '\0');
    for (char& c : t) c = static_cast<char>(rng() & 0xff);
    if (trial % 2) t = "kernel @k(" + t;
    DiagEngine diag;
    EXPECT_EQ(parseKernel(t, "r.tile", diag), nullptr);
    EXPECT_TRUE(diag.hasErrors());
  }
}

constexpr size_t kTenMegabytes = 10u << 20;

TEST(ParserRobustness, TenMegabytesOfRandomBytes) {
  std::mt19937 rng(7);
  std::string t(kTenMegabytes, '\0');
  for (char& c : t) c = static_cast<char>(rng() & 0xff);
  DiagEngine diag;
  EXPECT_EQ(parseKernel(t, "big.tile", diag), nullptr);
  EXPECT_TRUE(diag.hasErrors());
}

TEST(ParserRobustness, TenMegabyteIdentifier) {
  std::string t = "kernel @k() {\n  parallel (%p) in (1) {\n    " + std::string(kTenMegabytes, 'a');
  DiagEngine diag;
  EXPECT_EQ(parseKernel(t, "big.tile", diag), nullptr);
  EXPECT_EQ(diag.all().at(0).code, "unknown-op");
}

TEST(ParserRobustness, TenMegabyteComment) {
  std::string t = "#" + std::string(kTenMegabytes, 'c') + "\n" + exampleText();
  DiagEngine diag;
  EXPECT_NE(parseKernel(t, "big.tile", diag), nullptr) << diag.str();
}

TEST(ParserRobustness, TenMegabytesOfOps) {  // truncated before the closing braces
  std::string t = "kernel @k(%n: i64) {\n  parallel (%p) in (1) {\n";
  for (int i = 0; t.size() < kTenMegabytes; ++i)
    t += "    %v" + std::to_string(i) + " = add %n, " + std::to_string(i) + "\n";
  DiagEngine diag;
  EXPECT_EQ(parseKernel(t, "big.tile", diag), nullptr);
  ASSERT_EQ(diag.all().size(), 1u) << diag.str();
  EXPECT_NE(diag.all()[0].message.find("end of file"), std::string::npos);
}

TEST(ParserRobustness, DeepNestingIsBounded) {
  {  // Braces alone: a syntax error at the second one.
    std::string t = "kernel @k() {" + std::string(1000000, '{');
    DiagEngine diag;
    EXPECT_EQ(parseKernel(t, "deep.tile", diag), nullptr);
    EXPECT_EQ(diag.all().at(0).code, "syntax");
  }
  {  // 100000 nested loops: a nesting diagnostic, no stack overflow.
    std::string t = "kernel @k() {\n  parallel (%p) in (1) {\n";
    for (int i = 0; i < 100000; ++i) t += "serial %i" + std::to_string(i) + " = 0 to 1 step 1 {\n";
    DiagEngine diag;
    EXPECT_EQ(parseKernel(t, "deep.tile", diag), nullptr);
    ASSERT_TRUE(diag.hasErrors());
    EXPECT_EQ(diag.all()[0].code, "nesting");
    EXPECT_EQ(diag.all()[0].loc.line, 2 + 255);
  }
  {  // 200 levels are fine.
    std::string t = "kernel @k() {\n  parallel (%p) in (1) {\n";
    for (int i = 0; i < 200; ++i) t += "serial %i" + std::to_string(i) + " = 0 to 1 step 1 {\n";
    t += std::string(202, '}');
    DiagEngine diag;
    EXPECT_NE(parseKernel(t, "deep.tile", diag), nullptr) << diag.str();
  }
}

TEST(ParserRobustness, HugeExtentsDoNotAllocate) {
  for (const char* text : {
           "kernel @k(%x: view<f32>[9223372036854775807, 9223372036854775807]) {\n  parallel (%p) in (1) {\n  }\n}\n",
           "kernel @k() {\n  parallel (%p) in (9223372036854775807, 9223372036854775807) {\n  }\n}\n",
           "kernel @k() {\n  parallel (%p) in (1) {\n    %c = const 0 : f32[m:9223372036854775807, "
           "n:9223372036854775807]\n  }\n}\n",
           "kernel @k(%x: view<f32>[4]) {\n  parallel (%p) in (1) {\n    %t = load %x[0] as [m:9223372036854775807]\n"
           "  }\n}\n",
           "kernel @k() {\n  parallel (%p) in (1) {\n    %i = iota along m : i64[m:4611686018427387904]\n  }\n}\n",
       }) {
    DiagEngine diag;
    auto k = parseKernel(text, "huge.tile", diag);
    EXPECT_EQ(k, nullptr) << text;
    EXPECT_TRUE(diag.hasErrors());
  }
}

}  // namespace
}  // namespace kiln::ir
