// The Parser class (parser_impl.h), continued: its parseParallel .. parseSimple.
#include "ir/parser_impl.h"

namespace kiln::ir::detail {

void Parser::parseParallel(const std::vector<Token>& names, const Token& opTok, int depth) {
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
  std::vector<RuntimeExtent> runtime;
  Token first = tok_;
  if (tok_.kind != Tok::RParen) {
    while (true) {
      // An integer, or a runtime extent: `%n` or `cdiv(%n, 16)` of an i64 parameter with a range.
      RuntimeExtent r;
      if (tok_.kind == Tok::Value || atWord("cdiv")) {
        const bool cdiv = tok_.kind != Tok::Value;
        if (cdiv) {
          bump();
          expect(Tok::LParen, "'(' after 'cdiv'");
        }
        Token t = expect(Tok::Value, "an i64 parameter '%name' as the runtime extent");
        r.param = use(t);
        if (!r.param) bad = true;
        if (cdiv) {
          expect(Tok::Comma, "',' and the divisor in 'cdiv(%param, divisor)'");
          r.divisor = toInt(expectInt("an integer divisor")).value_or(1);
          expect(Tok::RParen, "')' after 'cdiv(%param, divisor'");
        }
        // The maximum from the parameter's range (the verifier names what is missing).
        extents.push_back(r.divisor >= 1 ? r.maximum() : 1);
      } else {
        auto v = toInt(expectInt("a domain extent (an integer, '%param' or 'cdiv(%param, N)')"));
        if (!v) bad = true;
        extents.push_back(v.value_or(1));
      }
      runtime.push_back(r);
      if (tok_.kind == Tok::RParen) break;
      expect(Tok::Comma, "',' or ')' after a domain extent");
    }
  }
  bump();
  if (std::none_of(runtime.begin(), runtime.end(), [](const RuntimeExtent& r) { return r.runtime(); })) runtime.clear();
  if (ivs.size() != extents.size()) {
    error(loc(first), "arity",
          fmt::format("parallel names {} program indices but gives {} extents", ivs.size(), extents.size()));
    bad = true;
  }
  Op* op = nullptr;
  if (!bad) {
    op = b_->parallel(strings(ivs), extents, loc(opTok), runtime);
    if (!op) checkLimit();
  }
  parseRegion(op ? op->regions[0] : nullptr, ivs, depth + 1);
}

void Parser::parseLoop(OpKind kind, const std::vector<Token>& names, const Token& opTok, int depth) {
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
    error(typeLoc, "type-mismatch",
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

void Parser::parseLoad(const std::vector<Token>& names, const Token& opTok) {
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

void Parser::parseStore(const std::vector<Token>& names, const Token& opTok) {
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

void Parser::parseConst(const std::vector<Token>& names, const Token& opTok) {
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

void Parser::parseIota(const std::vector<Token>& names, const Token& opTok) {
  bool bad = !checkResultCount(names, 1, opTok);
  expectWord("along", "'along' and a dim name");
  Token dim = expect(Tok::Ident, "the dim name that iota counts along");
  Loc typeLoc;
  auto declared = parseResultType(typeLoc);
  Op* op = k_->newOp(OpKind::Iota, loc(opTok));
  op->dims = {std::string(dim.text)};
  build(op, names, bad, declared, typeLoc, true);
}

void Parser::parseReduce(const std::vector<Token>& names, const Token& opTok) {
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

int Parser::partitionCount(const char* what, bool& bad) {
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

void Parser::parseMma(const std::vector<Token>& names, const Token& opTok) {
  bool bad = !checkResultCount(names, 1, opTok);
  auto operands = valuesOf(parseOperands(), "mma", bad);
  expectWord("contract", "'contract' and the contracted dims");
  auto dims = parseDimNames("the contracted dims");
  MmaPolicy policy;
  while (atWord("allow_reassociation") || atWord("allow_fma") || atWord("fused") || atWord("partitions") ||
         atWord("bf16_dot") || atWord("bf16_pairs")) {
    if (atWord("bf16_dot") || atWord("bf16_pairs")) {
      bool& flag = atWord("bf16_dot") ? policy.bf16_dot : policy.bf16_pairs;
      if (flag) error(loc(tok_), "policy", fmt::format("mma flag {} is given twice", tok_.text));
      flag = true;
      bump();
      continue;
    }
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
  // (The bf16 orders stand alone: checked with the op's types, ir/infer.cpp.)
  Loc typeLoc;
  auto declared = parseResultType(typeLoc);
  Op* op = k_->newOp(OpKind::Mma, loc(opTok));
  op->operands = std::move(operands);
  op->dims = std::move(dims);
  op->mma_policy = policy;
  build(op, names, bad, declared, typeLoc, false);
}

void Parser::parseExtract(const std::vector<Token>& names, const Token& opTok) {
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

void Parser::parseStage(const std::vector<Token>& names, const Token& opTok) {
  bool bad = !checkResultCount(names, 0, opTok);
  auto n = toInt(expectInt("a stage number after 'stage'"));
  Op* op = k_->newOp(OpKind::Stage, loc(opTok));
  op->iconst = n.value_or(0);
  build(op, names, bad || !n, std::nullopt, {}, false);
}

void Parser::parseSimple(OpKind kind, const std::vector<Token>& names, const Token& opTok) {
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

}  // namespace kiln::ir::detail
