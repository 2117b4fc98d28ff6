#include "driver/compile.h"

#include <fmt/format.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/raw_ostream.h>

#include <algorithm>
#include <chrono>

#include "codegen/lower.h"
#include "host/data.h"
#include "ir/diag.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "jit/compile.h"
#include "jit/session.h"
#include "runtime/guard.h"
#include "target/target.h"

namespace kiln::driver {

namespace {

std::string where(const ir::Loc& loc) {
  return fmt::format("{}:{}:{}", loc.file, loc.line, loc.col);
}

nlohmann::json knobsJson(const plan::Knobs& k) {
  nlohmann::json j = nlohmann::json::object();
  for (const plan::KnobInfo& info : plan::knobTable()) {
    std::string v = k.get(info.name);
    bool numeric = !v.empty() && (std::isdigit(static_cast<unsigned char>(v[0])) || v[0] == '-');
    if (numeric)
      j[info.name] = std::stoll(v);
    else
      j[info.name] = v;
  }
  return j;
}

nlohmann::json laneCodeJson(const plan::LaneCode& n) {
  return {{"vector_loads", n.vector_loads},
          {"vector_stores", n.vector_stores},
          {"gathers", n.gathers},
          {"scatters", n.scatters},
          {"fma_vectors", n.fmas},
          {"shuffles", n.shuffles},
          {"loops", n.loops},
          {"allocas", n.allocas}};
}

// The lane realization's decisions: every tile value's layout, the conversions, the mma
// register tiles, the reductions and loads/stores, and the code they make per program.
nlohmann::json lanesJson(const ir::Kernel& kernel, const plan::Plan& p) {
  const plan::LanePlan& lp = p.lanes;
  nlohmann::json j;
  j["vector_width"] = p.knobs.packet_width;
  j["vector_cap"] = lp.vector_cap;
  j["accumulator_budget"] = lp.accumulators;
  nlohmann::json layouts = nlohmann::json::array();
  for (const auto& v : kernel.values) {
    if (!v->type.isTile() || v->type.isScalar() || v->origin == ir::Value::Origin::Param) continue;
    const plan::Layout& l = lp.layout[v->id];
    layouts.push_back({{"value", "%" + v->name},
                       {"lane_dim", l.lane_dim},
                       {"rows", l.rows},
                       {"chunks", l.chunks},
                       {"rep", plan::laneRepName(l.rep)}});
  }
  j["layouts"] = layouts;
  nlohmann::json conv = nlohmann::json::array();
  for (const plan::Conversion& c : lp.conversions)
    conv.push_back({{"at", where(c.at->loc)},
                    {"made", c.fused   ? "in registers inside the mma (no panel)"
                             : c.after ? "once, after the definition at " + where(c.after->loc)
                                       : "before the mma"},
                    {"value", "%" + c.value->name},
                    {"kind", plan::toString(c.kind)},
                    {"to_lane_dim", c.to_lane_dim},
                    {"vectors", c.rows * c.chunks},
                    {"method", "in-register WxW transposes"}});
  j["conversions"] = conv;
  nlohmann::json mmas = nlohmann::json::array();
  ir::walk(kernel.body, [&](const ir::Op* op) {
    if (op->kind != ir::OpKind::Mma) return;
    const plan::LaneMma& m = lp.mma.at(op);
    nlohmann::json ops = nlohmann::json::array();
    for (int i = 0; i < 2; ++i)
      ops.push_back(m.broadcast[i] ? "broadcast per K step"
                    : m.fused_transpose && m.conversion[i] >= 0
                        ? "lane vectors (transposed in registers, consumed at once)"
                    : m.conversion[i] >= 0 ? "lane vectors (transposed)"
                                           : "lane vectors");
    mmas.push_back({{"at", where(op->loc)},
                    {"form", plan::toString(m.form)},
                    {"lane_dim", m.lane_dim},
                    {"operands", ops},
                    {"register_tile", fmt::format("{}x{}", m.block_rows, m.block_chunks)},
                    {"register_tiles", m.blocks},
                    {"k_rolled", m.k_rolled},
                    {"k_reason", m.k_reason},
                    {"step", op->mma_policy.fused ? "fma" : "mul+add"}});
  });
  j["mma"] = mmas;
  nlohmann::json reds = nlohmann::json::array();
  ir::walk(kernel.body, [&](const ir::Op* op) {
    if (op->kind != ir::OpKind::Reduce) return;
    const plan::LaneReduce& r = lp.reduce.at(op);
    reds.push_back({{"at", where(op->loc)},
                    {"direction", r.horizontal ? "horizontal" : "vertical"},
                    {"lanes_hold_partitions", r.vector_partitions},
                    {"rolled", r.rolled}});
  });
  j["reductions"] = reds;
  nlohmann::json acc = nlohmann::json::array();
  ir::walk(kernel.body, [&](const ir::Op* op) {
    if (op->kind != ir::OpKind::Load && op->kind != ir::OpKind::Store) return;
    acc.push_back({{"at", where(op->loc)},
                   {"op", ir::opName(op->kind)},
                   {"access", lp.access.at(op) == plan::LaneAccess::Vector ? "vector" : "gather"}});
  });
  j["memory"] = acc;
  j["code_per_program"] = {
      {"predicted", laneCodeJson(lp.code)},
      {"note",
       "the code of one program: each loop body once, both copies of an edge split; memory in W-lane "
       "vectors of view memory; shuffles = two-source W-lane permutations (transposes)"}};
  return j;
}

}  // namespace

std::optional<std::string> planDisagreesWithCode(const nlohmann::json& report) {
  auto one = [](const nlohmann::json& r, const std::string& where) -> std::optional<std::string> {
    if (r.contains("resources") && r["resources"].contains("realized_loops") &&
        r["resources"].contains("runtime_loops")) {
      const nlohmann::json& res = r["resources"];
      for (auto [predicted, realized] :
           {std::pair{"runtime_loops", "realized_loops"}, std::pair{"snapshot_allocas", "realized_allocas"}})
        if (res[predicted] != res[realized])
          return fmt::format("{}{} {} predicted, {} realized", where, predicted, res[predicted].dump(),
                             res[realized].dump());
    }
    if (r.contains("lanes") && r["lanes"].contains("code_per_program") &&
        r["lanes"]["code_per_program"].contains("realized")) {
      const nlohmann::json& c = r["lanes"]["code_per_program"];
      for (const auto& [key, value] : c["predicted"].items())
        if (c["realized"].value(key, nlohmann::json()) != value)
          return fmt::format("{}lane code {}: {} predicted, {} realized", where, key, value.dump(),
                             c["realized"].value(key, nlohmann::json()).dump());
    }
    return std::nullopt;
  };
  if (auto e = one(report, "")) return e;
  if (report.contains("phases"))
    for (const nlohmann::json& ph : report["phases"])
      if (auto e = one(ph, fmt::format("phase {}: ", ph.value("phase", 0)))) return e;
  return std::nullopt;
}

nlohmann::json planJson(const ir::Kernel& kernel, const plan::Plan& p) {
  nlohmann::json j;
  j["knobs"] = knobsJson(p.knobs);
  if (!p.unrolled_tile_cap_reason.empty()) j["unrolled_tile_cap"] = p.unrolled_tile_cap_reason;
  const ir::Op* root = kernel.root();
  nlohmann::json order = nlohmann::json::array();
  for (int a : p.root_axis_order) order.push_back(root->regions[0]->args[a]->name);
  j["domain"] = {
      {"programs", p.num_programs},
      {"blocks", p.num_blocks},
      {"programs_per_block", p.knobs.block_size},
      {"packets_per_block", p.lanes_realization ? p.knobs.block_size : p.knobs.block_size / p.knobs.packet_width},
      {"root_axis_order", order}};
  nlohmann::json mmas = nlohmann::json::array();
  ir::walk(kernel.body, [&](const ir::Op* op) {
    if (op->kind != ir::OpKind::Mma) return;
    const plan::MmaPlan& m = p.mma.at(op);
    mmas.push_back({{"at", where(op->loc)},
                    {"result", "%" + op->results[0]->name},
                    {"k", m.k},
                    {"outputs", m.outputs},
                    {"contraction_rolled", m.contraction_rolled},
                    {"contraction_reason", m.rolled_reason},
                    {"output_block", m.output_block},
                    {"output_block_requested", m.output_block_requested},
                    {"output_block_reason",
                     m.output_block_reason.empty() ? nlohmann::json(nullptr) : nlohmann::json(m.output_block_reason)},
                    {"region_work", m.region_work},
                    {"operand_representations",
                     {{"a", m.operand_representations[0]},
                      {"b", m.operand_representations[1]},
                      {"acc", m.operand_representations[2]}}},
                    {"runtime_k_operand_read", m.indexable_snapshot ? "indexable_snapshot"
                                               : m.select_chain     ? "select_chain"
                                                                    : "none"},
                    {"cost", "unmodeled"}});
  });
  j["mma"] = mmas;
  nlohmann::json reds = nlohmann::json::array();
  ir::walk(kernel.body, [&](const ir::Op* op) {
    if (op->kind != ir::OpKind::Reduce) return;
    const plan::ReducePlan& r = p.reduce.at(op);
    reds.push_back(
        {{"at", where(op->loc)},
         {"result", "%" + op->results[0]->name},
         {"policy", op->reduce_policy.kind == ir::ReducePolicy::Kind::Ordered ? "ordered" : "unordered_tree"},
         {"partitions", r.partitions},
         {"contributions", r.contributions},
         {"rolled", r.rolled}});
  });
  j["reductions"] = reds;
  j["realization"] = p.lanes_realization ? "lanes" : "programs_across_lanes";
  if (p.lanes_realization) j["lanes"] = lanesJson(kernel, p);
  std::map<std::string, int> reps;
  for (const auto& v : kernel.values)
    if (v->type.isTile() && v->origin != ir::Value::Origin::Param) reps[plan::repName(p.rep[v->id])]++;
  j["representations"] = reps;
  j["snapshot_bytes_per_worker"] = p.snapshot_bytes_per_worker;
  j["resources"] = {{"snapshot_allocas", p.snapshot_allocas},
                    {"runtime_loops", p.runtime_loops},
                    {"max_local_bytes", p.knobs.max_local_bytes}};
  j["work"] = {
      {"multiply_adds", p.work.multiply_adds},
      {"operand_loads", p.work.operand_loads},
      {"k_loop_iterations", p.work.k_loop_iterations},
      {"multiply_adds_per_program", p.work.multiply_adds_per_program ? nlohmann::json(*p.work.multiply_adds_per_program)
                                                                     : nlohmann::json("unmodeled")},
      {"time", "unmodeled"}};
  return j;
}

namespace {

// What every report says about the object and the target, after optimisation and emission.
void objectFacts(const plan::Knobs& knobs, const codegen::Lowered& lowered, const jit::CompiledObject& obj, double ms,
                 nlohmann::json& r) {
  r["resources"]["realized_allocas"] = lowered.realized_allocas;
  r["resources"]["realized_loops"] = lowered.realized_loops;
  r["llvm"] = {{"instructions_pre_opt", lowered.instructions_pre_opt},
               {"instructions_post_opt", obj.instructions_post_opt},
               {"basic_blocks_pre_opt", lowered.basic_blocks_pre_opt},
               {"basic_blocks", obj.basic_blocks_post_opt},
               {"pipeline", obj.pipeline}};
  r["compile_ms"] = ms;
  r["object"] = {{"bytes", obj.object_bytes.size()}, {"sha256", obj.object_sha256}};
  r["target"] = target::of(knobs.target).reportFacts(knobs.isa, obj);
  r["precision"] = knobs.fast_math ? "fast_math" : "precise";
}

nlohmann::json loweringFacts(const plan::Knobs& knobs, const codegen::Lowered& lowered) {
  return {{"requested", knobs.full_packet},
          {"decision", lowered.full_packet_decision},
          {"body_instructions", lowered.body_instructions},
          {"budget", knobs.full_packet_budget},
          {"clone_instructions", lowered.full_body_instructions}};
}

llvm::Expected<jit::CompiledObject> emitObject(std::unique_ptr<llvm::Module> module, const plan::Knobs& knobs,
                                               Stage until) {
  jit::JitOptions jo;
  jo.fast_math = knobs.fast_math;
  jo.emit_assembly = until == Stage::Asm;
  jo.isa = knobs.isa;
  return target::of(knobs.target).emit(std::move(module), jo);
}

// Target nvptx: how each phase is launched (plan::gpuLaunch) and what the PTX declares for it.
nlohmann::json gpuFacts(const std::vector<const plan::Plan*>& plans, const codegen::Lowered& lowered,
                        const std::string& ptx) {
  const std::vector<jit::PtxFunction> functions = jit::ptxFunctions(ptx);
  auto ptxJson = [](const jit::PtxFunction& f) {
    nlohmann::json regs = nlohmann::json::object();
    for (const auto& [type, n] : f.registers) regs[type] = n;
    return nlohmann::json{
        {"virtual_registers", regs}, {"local_bytes", f.local_bytes}, {"shared_bytes", f.shared_bytes}};
  };
  nlohmann::json kernels = nlohmann::json::array();
  bool spread = true;
  for (size_t i = 0; i < lowered.gpu_entries.size() && i < plans.size(); ++i) {
    const codegen::Lowered::GpuEntry& e = lowered.gpu_entries[i];
    const plan::GpuLaunch g = plan::gpuLaunch(*plans[i], e.threads_per_program);
    spread = spread && e.threads_per_program > 1;
    nlohmann::json k = {
        {"phase", i},
        {"entry", e.name},
        {"programs", plans[i]->num_programs},
        {"programs_per_thread", g.programs_per_thread},
        {"threads_per_program", g.threads_per_program},
        {"lanes", e.threads_per_program > 1 ? "threads" : "registers"},
        {"lanes_not_spread_because", e.not_spread.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.not_spread)},
        {"threads", g.threads},
        {"grid", g.grid},
        {"block", g.threads_per_block},
        {"ptx", nullptr}};
    for (const jit::PtxFunction& f : functions)
      if (f.entry && f.name == e.name) k["ptx"] = ptxJson(f);
    kernels.push_back(std::move(k));
  }
  nlohmann::json called = nlohmann::json::array();
  for (const jit::PtxFunction& f : functions)
    if (!f.entry) {
      nlohmann::json c = ptxJson(f);
      c["name"] = f.name;
      called.push_back(std::move(c));
    }
  return {{"mapping", spread ? "one warp segment of W threads per program: lane l of every vector in thread l"
                      : plans.at(0)->lanes_realization
                          ? "one GPU thread per program (in some phase): its lane vectors are that thread's registers"
                          : "one GPU thread per packet of W programs (local_lanes = 1)"},
          {"kernels", kernels},
          {"functions_called", called},
          {"resources_note",
           "PTX virtual registers and declared local/shared bytes; the registers ptxas allocates come from the "
           "driver at load time (kiln-replay reports them)"}};
}

// The ABI's symbols (runtime/abi.h) under `prefix` instead of "kiln_".
void renameExports(llvm::Module& m, const std::string& prefix) {
  static const std::string kAbiPrefix = "kiln_";
  if (prefix == kAbiPrefix) return;
  for (const char* name : {runtime::kBlocksSymbol, runtime::kLaunchSymbol, runtime::kNumBlocksSymbol,
                           runtime::kNumPhasesSymbol, runtime::kPhaseEndsSymbol, runtime::kAbiVersionSymbol})
    if (llvm::GlobalValue* g = m.getNamedValue(name)) g->setName(prefix + std::string(name).substr(kAbiPrefix.size()));
}

// The stages after lowering, shared by one-phase and phased kernels: print the module
// (Stage::Llvm, `done` set), or optimise and emit the object into `out` and `obj`.
std::optional<std::string> emitLowered(codegen::Lowered& lowered, const plan::Knobs& knobs, Stage until,
                                       const ExportOptions& exports, Compilation& out,
                                       std::optional<jit::CompiledObject>& obj, bool& done) {
  renameExports(*lowered.module, exports.symbol_prefix);
  done = until == Stage::Llvm;
  if (done) {
    llvm::raw_string_ostream os(out.llvm_text);
    lowered.module->print(os, nullptr);
    return std::nullopt;
  }
  auto compiled = emitObject(std::move(lowered.module), knobs, until);
  if (!compiled) return "LLVM compilation failed: " + llvm::toString(compiled.takeError());
  out.object = compiled->object_bytes;
  out.assembly = std::move(compiled->assembly);
  obj = std::move(*compiled);
  return std::nullopt;
}

// A kernel of several phases (or with workspaces): each phase is planned as a kernel of its
// own (ir::phaseKernel) with the same knobs, and all are lowered into one object.
std::optional<std::string> compilePhased(const ir::Kernel& kernel, const plan::Knobs& knobs, Compilation& out,
                                         Stage until, const ExportOptions& exports,
                                         std::chrono::steady_clock::time_point start) {
  const size_t n = kernel.roots().size();
  std::vector<std::unique_ptr<ir::Kernel>> phases;
  std::vector<plan::Plan> plans(n);
  nlohmann::json reports = nlohmann::json::array();
  int64_t blocks = 0, snapshot = 0;
  for (size_t i = 0; i < n; ++i) {
    phases.push_back(ir::phaseKernel(kernel, i));
    if (auto e = plan::buildPlan(*phases[i], knobs, plans[i])) return fmt::format("phase {}: {}", i, *e);
    nlohmann::json r = planJson(*phases[i], plans[i]);
    r.erase("knobs");
    r["phase"] = i;
    r["at"] = where(kernel.roots()[i]->loc);
    reports.push_back(std::move(r));
    blocks += plans[i].num_blocks;
    snapshot = std::max(snapshot, plans[i].snapshot_bytes_per_worker);
  }
  out.plan = plans[0];
  nlohmann::json& r = out.report;
  r = nlohmann::json::object();
  r["knobs"] = knobsJson(plans[0].knobs);
  r["kernel"] = kernel.name;
  r["domain"] = {{"phases", n}, {"blocks", blocks}};
  nlohmann::json ws = nlohmann::json::array();
  for (const ir::Value* w : kernel.workspaces)
    ws.push_back({{"name", "%" + w->name}, {"type", ir::toString(w->type)}, {"bytes", 4 * w->type.numElements()}});
  r["workspaces"] = ws;
  r["snapshot_bytes_per_worker"] = snapshot;
  r["phases"] = std::move(reports);
  if (until == Stage::Ir || until == Stage::Plan) return std::nullopt;

  llvm::LLVMContext ctx;
  codegen::Lowered lowered;
  std::vector<codegen::Lowered> perPhase;
  std::vector<const ir::Kernel*> kernels;
  std::vector<const plan::Plan*> planPtrs;
  for (size_t i = 0; i < n; ++i) kernels.push_back(phases[i].get()), planPtrs.push_back(&plans[i]);
  if (auto e = codegen::lowerPhases(kernels, planPtrs, ctx, lowered, perPhase)) return e;
  std::optional<jit::CompiledObject> obj;
  bool done = false;
  if (auto e = emitLowered(lowered, knobs, until, exports, out, obj, done)) return e;
  if (done) return std::nullopt;
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  for (size_t i = 0; i < n; ++i) {
    nlohmann::json& pr = r["phases"][i];
    pr["resources"]["realized_allocas"] = perPhase[i].realized_allocas;
    pr["resources"]["realized_loops"] = perPhase[i].realized_loops;
    pr["full_packet"] = loweringFacts(knobs, perPhase[i]);
    if (perPhase[i].lanes) pr["lanes"]["code_per_program"]["realized"] = laneCodeJson(perPhase[i].lane_code);
  }
  objectFacts(knobs, lowered, *obj, ms, r);
  if (target::of(knobs.target).gpuEntries()) r["gpu"] = gpuFacts(planPtrs, lowered, obj->object_bytes);
  return std::nullopt;
}

std::optional<std::string> compileUncached(const ir::Kernel& kernel, const plan::Knobs& knobs, Compilation& out,
                                           Stage until, const ExportOptions& exports,
                                           std::chrono::steady_clock::time_point start);

std::shared_ptr<jit::ObjectCache>& objectCache() {
  static std::shared_ptr<jit::ObjectCache> cache;
  return cache;
}

jit::ObjectCacheKey cacheKey(const ir::Kernel& kernel, const plan::Knobs& knobs, const ExportOptions& exports) {
  jit::ObjectCacheKey key;
  key.ir_text = ir::print(kernel);
  for (const plan::KnobInfo& info : plan::knobTable())
    if (info.name != "threads") key.knobs += info.name + "=" + knobs.get(info.name) + "\n";
  if (exports.symbol_prefix != ExportOptions().symbol_prefix)
    key.knobs += "symbol_prefix=" + exports.symbol_prefix + "\n";
  const jit::HostTarget& host = jit::hostTarget();
  const jit::TargetCpu target = jit::targetCpu(knobs.isa);
  key.cpu = target.features.empty() ? target.cpu : target.cpu + " " + target.features;
  key.llvm_version = host.llvm_version;
  key.kiln_version = jit::kilnBuildId();
  return key;
}

// A cache entry: the report's JSON text, a newline, then the object.
std::string packEntry(const Compilation& c) {
  return c.report.dump() + "\n" + c.object;
}

bool unpackEntry(const std::string& bytes, Compilation& out) {
  const size_t nl = bytes.find('\n');
  if (nl == std::string::npos) return false;
  nlohmann::json report = nlohmann::json::parse(bytes.substr(0, nl), nullptr, false);
  if (report.is_discarded() || !report.is_object() || !report.contains("object")) return false;
  std::string object = bytes.substr(nl + 1);
  if (report["object"].value("sha256", "") != host::sha256Hex(object.data(), object.size())) return false;
  out.report = std::move(report);
  out.object = std::move(object);
  return true;
}

}  // namespace

void setObjectCache(std::shared_ptr<jit::ObjectCache> cache) {
  objectCache() = std::move(cache);
}

std::optional<std::string> checkSymbolPrefix(const std::string& prefix) {
  auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  if (prefix.empty() || !alpha(prefix[0]) ||
      !std::all_of(prefix.begin(), prefix.end(), [&](char c) { return alpha(c) || (c >= '0' && c <= '9'); }))
    return fmt::format("symbol prefix '{}' is not a C identifier (letters, digits and '_', not starting with a digit)",
                       prefix);
  if (prefix.size() > 64) return fmt::format("symbol prefix '{}' is longer than 64 characters", prefix);
  return std::nullopt;
}

std::optional<std::string> compile(const ir::Kernel& kernel, const plan::Knobs& knobs, Compilation& out, Stage until,
                                   const ExportOptions& exports) {
  auto start = std::chrono::steady_clock::now();
  if (auto e = checkSymbolPrefix(exports.symbol_prefix)) return e;
  // 1. verify
  ir::DiagEngine diag;
  if (!ir::verify(kernel, diag)) return diag.str();
  const std::shared_ptr<jit::ObjectCache> cache = objectCache();
  const bool cacheable = cache && (until == Stage::Obj || until == Stage::Report);
  if (!cacheable) {
    auto e = compileUncached(kernel, knobs, out, until, exports, start);
    if (!e && (until == Stage::Obj || until == Stage::Report)) out.report["cache"] = {{"status", "off"}};
    return e;
  }
  const std::string key = cacheKey(kernel, knobs, exports).hash();
  if (std::optional<std::string> entry = cache->get(key)) {
    Compilation hit;
    if (unpackEntry(*entry, hit)) {
      out = std::move(hit);
      out.from_cache = true;
      const double saved = out.report.value("compile_ms", 0.0);
      out.report["knobs"]["threads"] = knobs.threads;
      out.report["compile_ms"] =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      out.report["cache"] = {{"status", "hit"}, {"key", key}, {"saved_ms", saved}};
      return std::nullopt;
    }
  }
  if (auto e = compileUncached(kernel, knobs, out, until, exports, start)) return e;
  out.report["cache"] = {{"status", "miss"}, {"key", key}};
  cache->put(key, packEntry(out));
  return std::nullopt;
}

namespace {

std::optional<std::string> compileUncached(const ir::Kernel& kernel, const plan::Knobs& knobs, Compilation& out,
                                           Stage until, const ExportOptions& exports,
                                           std::chrono::steady_clock::time_point start) {
  if (kernel.phased()) return compilePhased(kernel, knobs, out, until, exports, start);
  // 2. plan
  if (auto e = plan::buildPlan(kernel, knobs, out.plan)) return e;
  out.report = planJson(kernel, out.plan);
  out.report["kernel"] = kernel.name;
  if (until == Stage::Ir || until == Stage::Plan) return std::nullopt;
  // 3. lower
  llvm::LLVMContext ctx;
  codegen::Lowered lowered;
  if (auto e = codegen::lower(kernel, out.plan, ctx, lowered)) return e;
  // 4. optimise (O2) and 5. emit the object
  std::optional<jit::CompiledObject> obj;
  bool done = false;
  if (auto e = emitLowered(lowered, knobs, until, exports, out, obj, done)) return e;
  if (done) return std::nullopt;
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();

  nlohmann::json& r = out.report;
  r["work"]["clone"] = lowered.full_packet_decision == "selected";
  r["full_packet"] = loweringFacts(knobs, lowered);
  if (lowered.lanes) r["lanes"]["code_per_program"]["realized"] = laneCodeJson(lowered.lane_code);
  objectFacts(knobs, lowered, *obj, ms, r);
  if (target::of(knobs.target).gpuEntries()) r["gpu"] = gpuFacts({&out.plan}, lowered, obj->object_bytes);
  return std::nullopt;
}

}  // namespace

std::vector<runtime::ParamSpec> signature(const ir::Kernel& kernel) {
  std::vector<runtime::ParamSpec> sig;
  for (const ir::Value* p : kernel.params) {
    if (p->type.isView())
      sig.push_back(runtime::ParamSpec::view(p->name, p->type.shape()));
    else if (p->type.elem == ir::Elem::I64)
      sig.push_back(runtime::ParamSpec::i64(p->name));
    else
      sig.push_back(runtime::ParamSpec::f32(p->name));
  }
  return sig;
}

std::optional<std::string> load(const std::string& object, const ir::Kernel& kernel, const std::string& isa,
                                int threads, std::unique_ptr<runtime::LoadedKernel>& out) {
  if (object.rfind("\x7f"
                   "ELF",
                   0) != 0)
    return object.find(".entry") != std::string::npos
               ? std::string(
                     "this is PTX (target=nvptx), which runs on an NVIDIA GPU, not in this process: capture it "
                     "with `kiln gpu-capture` and run it with kiln-replay (docs/gpu.md)")
               : std::string("the object is not an ELF object");
  auto session = jit::Session::load(object, isa);
  if (!session) return "cannot load the object: " + llvm::toString(session.takeError());
  std::shared_ptr<jit::Session> shared(std::move(*session));
  std::vector<runtime::ParamSpec> workspaces;
  for (const ir::Value* w : kernel.workspaces) workspaces.push_back(runtime::ParamSpec::view(w->name, w->type.shape()));
  const runtime::KernelEntry entry = jit::kernelEntry(shared);
  const size_t phases = std::max<size_t>(1, kernel.roots().size());
  if (entry.phase_ends.size() != phases)
    return fmt::format("the object has {} phases but kernel @{} has {}", entry.phase_ends.size(), kernel.name, phases);
  out = std::make_unique<runtime::LoadedKernel>(entry, signature(kernel), threads, std::move(workspaces));
  return std::nullopt;
}

std::optional<std::string> run(const runtime::LoadedKernel& kernel, std::vector<host::ParamData>& params, bool guarded,
                               runtime::KilnLaunchRecord* record) {
  const auto& sig = kernel.params();
  if (params.size() != sig.size())
    return fmt::format("the kernel has {} parameters but {} values were given", sig.size(), params.size());
  if (guarded) {
    runtime::GuardedArgs g(sig);
    for (size_t i = 0; i < sig.size(); ++i) {
      std::optional<std::string> e;
      if (sig[i].kind == runtime::ParamKind::View)
        e = g.setView(i, params[i].data);
      else if (sig[i].kind == runtime::ParamKind::I64)
        e = g.setI64(i, params[i].i64);
      else
        e = g.setF32(i, params[i].f32);
      if (e) return e;
    }
    if (auto e = kernel.launch(g.args(), record)) return e;
    if (auto e = g.checkGuards()) return "guard zones corrupted: " + *e;
    for (size_t i = 0; i < sig.size(); ++i)
      if (sig[i].kind == runtime::ParamKind::View) {
        auto v = g.view(i);
        params[i].data.assign(v.begin(), v.end());
      }
    return std::nullopt;
  }
  std::vector<runtime::Arg> args;
  for (size_t i = 0; i < sig.size(); ++i) {
    if (sig[i].kind == runtime::ParamKind::View)
      args.push_back(runtime::Arg::view(params[i].data));
    else if (sig[i].kind == runtime::ParamKind::I64)
      args.push_back(runtime::Arg::i64(params[i].i64));
    else
      args.push_back(runtime::Arg::f32(params[i].f32));
  }
  return kernel.launch(args, record);
}

}  // namespace kiln::driver
