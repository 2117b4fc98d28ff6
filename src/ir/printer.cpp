// Printer: Kernel -> canonical text. Two spaces per region level, one op per line, every
// result type, fill, policy and yield written out, so parse(print(k)) prints identically.
// Tolerates malformed kernels (missing operands or regions print as placeholders).
#include "ir/printer.h"

#include <fmt/format.h>

#include <cmath>

namespace kiln::ir {
namespace {

constexpr size_t kMaxHeaderWidth = 100;  // longer parameter lists go one per line

std::string name(const Value* v) {
  if (!v) return "%<null>";
  if (v->name.empty()) return fmt::format("%v{}", v->id);
  return "%" + v->name;
}

std::string operand(const Op& op, size_t i) {
  return i < op.operands.size() ? name(op.operands[i]) : "%<missing>";
}

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += ", ";
    out += parts[i];
  }
  return out;
}

std::string index(const Index& ix) {
  return ix.value ? name(ix.value) : fmt::format("{}", ix.constant);
}

std::string indexList(const std::vector<Index>& ixs, size_t from, size_t count) {
  std::vector<std::string> parts;
  for (size_t i = from; i < from + count && i < ixs.size(); ++i) parts.push_back(index(ixs[i]));
  return fmt::format("[{}]", join(parts));
}

std::string access(const std::vector<Dim>& dims) {
  std::vector<std::string> parts;
  for (const Dim& d : dims) parts.push_back(d.name.empty() ? "_" : fmt::format("{}:{}", d.name, d.extent));
  return fmt::format("[{}]", join(parts));
}

std::string dimNames(const std::vector<std::string>& dims) {
  return fmt::format("[{}]", join(dims));
}

std::string resultTypes(const Op& op) {
  std::vector<std::string> parts;
  for (const Value* v : op.results) parts.push_back(toString(v->type));
  return parts.empty() ? std::string() : fmt::format(" : {}", join(parts));
}

std::string constText(const Op& op) {
  if (!op.results.empty() && op.results[0]->type.elem != Elem::F32) return fmt::format("{}", op.iconst);
  return formatF32(op.fconst);
}

class Printer {
 public:
  std::string run(const Kernel& k) {
    std::vector<std::string> params;
    for (const Value* p : k.params)
      params.push_back(fmt::format(
          "{}: {}{}", name(p), toString(p->type),
          p->range ? fmt::format(" in [{}, {}]{}", p->range->lo, p->range->hi, p->range->ascending ? " ascending" : "")
                   : ""));
    std::vector<std::string> ws;
    for (const Value* w : k.workspaces) ws.push_back(fmt::format("{}: {}", name(w), toString(w->type)));
    std::string wsText = ws.empty() ? "" : fmt::format(" workspace({})", join(ws));
    std::string header = fmt::format("kernel @{}({}){} {{", k.name, join(params), wsText);
    if (header.size() <= kMaxHeaderWidth || (params.empty() && ws.empty())) {
      out_ += header + "\n";
    } else {
      out_ += fmt::format("kernel @{}(\n", k.name);
      for (size_t i = 0; i < params.size(); ++i)
        out_ += fmt::format("  {}{}\n", params[i], i + 1 < params.size() ? "," : "");
      if (ws.empty()) {
        out_ += ") {\n";
      } else {
        out_ += ") workspace(\n";
        for (size_t i = 0; i < ws.size(); ++i) out_ += fmt::format("  {}{}\n", ws[i], i + 1 < ws.size() ? "," : "");
        out_ += ") {\n";
      }
    }
    if (k.body) region(*k.body, 1);
    out_ += "}\n";
    return std::move(out_);
  }

 private:
  void line(int depth, const std::string& text) {
    out_.append(static_cast<size_t>(depth) * 2, ' ');
    out_ += text;
    out_ += '\n';
  }

  void region(const Region& r, int depth) {
    for (const Op* op : r.ops) this->op(*op, depth);
  }

  void body(const Op& op, int depth) {
    if (!op.regions.empty() && op.regions[0]) region(*op.regions[0], depth + 1);
    line(depth, "}");
  }

  void op(const Op& op, int depth) {
    std::vector<std::string> results;
    for (const Value* v : op.results) results.push_back(name(v));
    const std::string lhs = results.empty() ? "" : join(results) + " = ";
    const std::string type = resultTypes(op);
    const std::string kind(opName(op.kind));
    auto args = [&](size_t from) {
      std::vector<std::string> parts;
      for (size_t i = from; i < op.operands.size(); ++i) parts.push_back(name(op.operands[i]));
      return join(parts);
    };

    switch (op.kind) {
      case OpKind::Parallel: {
        std::vector<std::string> ivs, extents;
        if (!op.regions.empty() && op.regions[0])
          for (const Value* iv : op.regions[0]->args) ivs.push_back(name(iv));
        for (size_t i = 0; i < op.extents.size(); ++i) {
          const RuntimeExtent r = i < op.runtime_extents.size() ? op.runtime_extents[i] : RuntimeExtent{};
          if (!r.runtime())
            extents.push_back(fmt::format("{}", op.extents[i]));
          else if (r.divisor == 1)
            extents.push_back(name(r.param));
          else
            extents.push_back(fmt::format("cdiv({}, {})", name(r.param), r.divisor));
        }
        line(depth, fmt::format("parallel ({}) in ({}) {{", join(ivs), join(extents)));
        body(op, depth);
        return;
      }
      case OpKind::Serial:
      case OpKind::Pipeline: {
        const Region* r = op.regions.empty() ? nullptr : op.regions[0];
        std::string iv = r && !r->args.empty() ? name(r->args[0]) : "%<missing>";
        std::string text = fmt::format(
            "{}{} {} = {} to {} step {}", lhs, kind, iv, op.indices.size() > 0 ? index(op.indices[0]) : "0",
            op.indices.size() > 1 ? index(op.indices[1]) : "0", op.indices.size() > 2 ? index(op.indices[2]) : "1");
        if (!op.operands.empty()) {
          std::vector<std::string> carried;
          for (size_t i = 0; i < op.operands.size(); ++i) {
            const Value* arg = r && i + 1 < r->args.size() ? r->args[i + 1] : nullptr;
            carried.push_back(fmt::format("{} = {}", name(arg), name(op.operands[i])));
          }
          text += fmt::format(" iter({})", join(carried));
        }
        line(depth, text + type + " {");
        body(op, depth);
        return;
      }
      case OpKind::Yield: line(depth, op.operands.empty() ? "yield" : "yield " + args(0)); return;
      case OpKind::Stage: line(depth, fmt::format("stage {}", op.iconst)); return;
      case OpKind::Load:
        line(depth,
             fmt::format("{}load {}{} as {} fill {}{}", lhs, operand(op, 0),
                         indexList(op.indices, 0, op.indices.size()), access(op.access), formatF32(op.fconst), type));
        return;
      case OpKind::Store:
        line(depth, fmt::format("store {}, {}{} as {}", operand(op, 1), operand(op, 0),
                                indexList(op.indices, 0, op.indices.size()), access(op.access)));
        return;
      case OpKind::Const: line(depth, fmt::format("{}const {}{}", lhs, constText(op), type)); return;
      case OpKind::Iota:
        line(depth, fmt::format("{}iota along {}{}", lhs, op.dims.empty() ? "" : op.dims[0], type));
        return;
      case OpKind::Cmp: line(depth, fmt::format("{}cmp {} {}{}", lhs, cmpName(op.pred), args(0), type)); return;
      case OpKind::Reduce: {
        std::string policy = "ordered";
        if (op.reduce_policy.kind == ReducePolicy::Kind::UnorderedTree)
          policy = op.reduce_policy.partitions > 0 ? fmt::format("unordered_tree({})", op.reduce_policy.partitions)
                                                   : "unordered_tree";
        line(depth, fmt::format("{}reduce {} {} over {} init {} {}{}", lhs, reduceName(op.reduce), operand(op, 0),
                                dimNames(op.dims), operand(op, 1), policy, type));
        return;
      }
      case OpKind::Mma: {
        std::string flags;
        if (op.mma_policy.allow_reassociation) flags += " allow_reassociation";
        if (op.mma_policy.allow_fma) flags += " allow_fma";
        if (op.mma_policy.fused) flags += " fused";
        if (op.mma_policy.partitions > 0) flags += fmt::format(" partitions({})", op.mma_policy.partitions);
        if (op.mma_policy.bf16_dot) flags += " bf16_dot";
        if (op.mma_policy.bf16_pairs) flags += " bf16_pairs";
        line(depth, fmt::format("{}mma {} contract {}{}{}", lhs, args(0), dimNames(op.dims), flags, type));
        return;
      }
      case OpKind::Extract:
        line(depth,
             fmt::format("{}extract {}{}{}", lhs, operand(op, 0), indexList(op.indices, 0, op.indices.size()), type));
        return;
      default:  // unary, binary, select, broadcast, cast
        line(depth, fmt::format("{}{} {}{}", lhs, kind, args(0), type));
        return;
    }
  }

  std::string out_;
};

}  // namespace

std::string formatF32(double value) {
  const float f = static_cast<float>(value);
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f < 0 ? "-inf" : "inf";
  return fmt::format("{}", f);
}

std::string print(const Kernel& kernel) {
  return Printer().run(kernel);
}

}  // namespace kiln::ir
