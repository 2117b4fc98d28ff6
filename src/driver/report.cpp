// The realization report: what the planner decided, per phase, and what the lowering and the
// object realized (docs/backend.md, "The realization report").
#include "driver/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "ir/printer.h"
#include "jit/compile.h"
#include "target/target.h"

namespace kiln::driver {

namespace {

std::string where(const ir::Loc& loc) {
  return fmt::format("{}:{}:{}", loc.file, loc.line, loc.col);
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

const ir::Op* opOf(const ir::Op* op) {
  return op;
}
template <typename V>
const ir::Op* opOf(const std::pair<const ir::Op* const, V>& e) {
  return e.first;
}

// One JSON entry per element of a set or map keyed by op, in the ops' source order (not
// pointer order, so that the report does not vary between runs).
template <typename Container, typename F>
nlohmann::json inSourceOrder(const Container& items, F&& entry) {
  std::vector<std::pair<std::pair<int, int>, nlohmann::json>> keyed;
  for (const auto& item : items) {
    const ir::Op* op = opOf(item);
    keyed.push_back({{op->loc.line, op->loc.col}, entry(item)});
  }
  std::stable_sort(keyed.begin(), keyed.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  nlohmann::json out = nlohmann::json::array();
  for (auto& [key, j] : keyed) out.push_back(std::move(j));
  return out;
}

// The block realization's decisions (plan::BlockPlan): the thread grid over the program's rows
// and columns, each thread's register tile, the stages in shared memory.
nlohmann::json blockJson(const plan::Plan& p) {
  const plan::BlockPlan& b = p.block;
  nlohmann::json stages = nlohmann::json::array();
  std::vector<std::pair<int64_t, const ir::Op*>> byOffset;
  for (const auto& [load, s] : b.stages) byOffset.push_back({s.offset, load});
  std::sort(byOffset.begin(), byOffset.end());
  for (const auto& [offset, load] : byOffset) {
    const plan::BlockStage& s = b.stages.at(load);
    stages.push_back(
        {{"at", where(load->loc)},
         {"value", "%" + load->results[0]->name},
         {"from", s.registers ? "registers"
                  : s.async   ? "cp.async"
                              : "load"},
         {"operand", s.operand == 0 ? "a" : "b"},
         {"k_dim", s.k_dim},
         {"out_dims", s.out_dims},
         {"layout", s.k_inner ? "k inner: [out, K] lines" : "K lines of out"},
         {"copies", !s.async ? nlohmann::json()
                    : s.wide ? nlohmann::json("16-byte where aligned")
                             : nlohmann::json("4-byte")},
         {"shape", s.k_inner ? nlohmann::json{s.out_extent, s.pitch} : nlohmann::json{s.k_extent, s.pitch}},
         {"buffers", s.buffers},
         {"offset_bytes", s.offset * 4},
         {"masked_by", s.mask ? nlohmann::json("%" + s.mask->results[0]->name) : nlohmann::json()}});
  }
  nlohmann::json shuffled = inSourceOrder(b.shuffle_reductions, [&](const ir::Op* op) { return where(op->loc); });
  nlohmann::json ahead = inSourceOrder(b.load_prefetch, [&](const auto& e) {
    return nlohmann::json{
        {"at", where(e.first->loc)}, {"value", "%" + e.first->results[0]->name}, {"trips_per_batch", e.second}};
  });
  nlohmann::json stepsPerTrip = inSourceOrder(b.mma_steps, [&](const auto& e) {
    return nlohmann::json{{"at", where(e.first->loc)}, {"steps", e.second}};
  });
  nlohmann::json early = inSourceOrder(b.early_copies, [&](const auto& e) {
    return nlohmann::json{{"loop", where(e.first->loc)}, {"before", where(e.second->loc)}};
  });
  nlohmann::json rowDims = nlohmann::json::array(), columns = nlohmann::json::array();
  for (const plan::BlockDim& y : b.ys) rowDims.push_back({{"dim", y.name}, {"extent", y.extent}});
  for (const plan::BlockDim& x : b.xs)
    columns.push_back({{"dim", x.name}, {"extent", x.extent}, {"microtile", x.micro}, {"group", x.group}});
  return {{"model", b.model},
          {"threads", b.threads},
          {"registers", b.registers},
          {"grid", {b.threads_y, b.threads_x}},
          {"rows", {{"dims", rowDims}, {"extent", b.extent_y}, {"microtile", b.micro_y}, {"group", b.group_y}}},
          {"columns", columns},
          {"stages", stages},
          {"shuffle_reductions", shuffled},
          {"batched_loads", ahead},
          {"double_buffered_loops", b.prefetch_loops.size()},
          {"early_copies", early},
          {"shared_bytes", b.shared_bytes},
          {"shared_budget", b.shared_budget},
          {"dynamic_shared", b.dynamic_shared},
          {"k_unroll", b.k_unroll},
          {"mma_steps_per_trip", stepsPerTrip},
          {"read_ahead", inSourceOrder(b.read_ahead, [&](const ir::Op* op) { return where(op->loc); })}};
}

// The lane realization's decisions: every tile value's layout, the conversions, the mma
// register tiles, the reductions and loads/stores, and the code they make per program.
nlohmann::json lanesJson(const ir::Kernel& kernel, const plan::Plan& p) {
  const plan::LanePlan& lp = p.lanes;
  nlohmann::json j;
  j["vector_width"] = p.knobs.packet_width;
  j["vector_cap"] = lp.vector_cap;
  j["target_model"] = lp.model;
  j["accumulator_budget"] = lp.accumulators;
  j["max_tile_chunks"] = lp.max_tile_chunks;
  nlohmann::json layouts = nlohmann::json::array();
  for (const auto& v : kernel.values) {
    if (!v->type.isTile() || v->type.isScalar() || v->origin == ir::Value::Origin::Param) continue;
    const plan::Layout& l = lp.layout[v->id];
    nlohmann::json entry = {{"value", "%" + v->name},
                            {"lane_dim", l.lane_dim},
                            {"rows", l.rows},
                            {"chunks", l.chunks},
                            {"rep", plan::laneRepName(l.rep)}};
    if (l.pair_words) entry["pair_words"] = true;  // bf16 pairs of rows as VDPBF16PS's words
    layouts.push_back(std::move(entry));
  }
  j["layouts"] = layouts;
  nlohmann::json conv = nlohmann::json::array();
  for (const plan::Conversion& c : lp.conversions) {
    conv.push_back({{"at", where(c.at->loc)},
                    {"made", c.fused   ? "in registers inside the mma (no panel)"
                             : c.after ? "once, after the definition at " + where(c.after->loc)
                                       : "before the mma"},
                    {"value", "%" + c.value->name},
                    {"kind", plan::toString(c.kind)},
                    {"to_lane_dim", c.to_lane_dim},
                    {"vectors", c.rows * c.chunks},
                    {"method", c.kind == plan::ConversionKind::Bf16Words
                                   ? "each vector rounded to bf16 once, its 16-bit words in lane order (a pair of "
                                     "contributions: one 32-bit broadcast)"
                               : c.words && c.word_unpack
                                   ? "bf16 as 32-bit words, W/2 words of W rows transposed by 4-lane unpacks and "
                                     "128-bit lane selections (inside the view; WxW at edges)"
                               : c.words ? "bf16 as 32-bit words, (W/2)x(W/2) transposes within halves (inside "
                                           "the view; WxW at edges)"
                                         : "in-register WxW transposes"}});
    // Rows 2t and 2t + 1 as one row of VDPBF16PS's 32-bit words (a panel, or in registers when fused).
    if (c.pair_words) conv.back()["pair_words"] = true;
  }
  j["conversions"] = conv;
  std::set<const ir::Op*> inPlace;  // mmas whose result is written in their loop's carried panel
  for (const auto& [loop, lo] : lp.loops)
    for (size_t i : lo.in_place) inPlace.insert(loop->regions[0]->ops.back()->operands[i]->def);
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
    mmas.push_back(
        {{"at", where(op->loc)},
         {"form", plan::toString(m.form)},
         {"lane_dim", m.lane_dim},
         {"operands", ops},
         {"register_tile", fmt::format("{}x{}", m.block_rows, m.block_chunks)},
         {"register_tiles", m.blocks},
         {"k_rolled", m.k_rolled},
         {"k_reason", m.k_reason},
         {"accumulator", inPlace.count(op) ? "the loop's carried panel, updated in place" : "its own storage"},
         {"step", op->mma_policy.fused ? "fma" : "mul+add"}});
    // A fused transpose walks the accumulator's lane chunks `fused_group` at a time.
    if (m.fused_transpose) mmas.back()["fused_chunks_per_step"] = m.fused_group;
    if (m.form == plan::MmaForm::Amx) mmas.back()["amx_operands"] = m.amx_b_first ? "b as A, a as B" : "a as A, b as B";
    if (m.dpbf16) mmas.back()["bf16_steps"] = "vdpbf16ps";
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
    nlohmann::json a = {{"at", where(op->loc)},
                        {"op", ir::opName(op->kind)},
                        {"access", lp.access.at(op) == plan::LaneAccess::Vector ? "vector" : "gather"}};
    if (auto pf = lp.prefetch.find(op); pf != lp.prefetch.end())
      a["prefetch"] = {{"elements_ahead", pf->second.elements}, {"reason", pf->second.reason}};
    acc.push_back(a);
  });
  j["memory"] = acc;
  j["code_per_program"] = {
      {"predicted", laneCodeJson(lp.code)},
      {"note",
       "the code of one program: each loop body once, both copies of an edge split; memory in W-lane "
       "vectors of view memory; shuffles = two-source W-lane permutations (transposes)"}};
  return j;
}

// One phase's plan: its domain, mma and reduction decisions, representations, the lane
// realization's decisions, predicted resources and work.
nlohmann::json phasePlanJson(const ir::Kernel& kernel, const plan::Plan& p) {
  nlohmann::json j;
  if (!p.unrolled_tile_cap_reason.empty()) j["unrolled_tile_cap"] = p.unrolled_tile_cap_reason;
  const ir::Op* root = kernel.root();
  nlohmann::json order = nlohmann::json::array();
  for (int a : p.root_axis_order) order.push_back(root->regions[0]->args[a]->name);
  j["domain"] = {
      {"programs", p.num_programs},
      {"blocks", p.num_blocks},
      {"programs_per_block", p.knobs.block_size},
      {"packets_per_block",
       p.realization == plan::Realization::Lanes ? p.knobs.block_size : p.knobs.block_size / p.knobs.packet_width},
      {"root_axis_order", order}};
  // Axes walked from their last index down (the GPU's heaviest programs first), and why.
  nlohmann::json descending = nlohmann::json::array();
  for (size_t a = 0; a < p.root_axis_descending.size(); ++a)
    if (p.root_axis_descending[a]) descending.push_back(root->regions[0]->args[a]->name);
  j["domain"]["descending_axes"] = descending;
  j["domain"]["program_order"] =
      p.program_order_reason.empty() ? nlohmann::json(nullptr) : nlohmann::json(p.program_order_reason);
  // Axes whose extent is given at launch (docs/ir.md, "Runtime extents"): programs and blocks
  // above are for the maxima, which the plan was made for.
  nlohmann::json runtime = nlohmann::json::array();
  for (size_t a = 0; a < root->runtime_extents.size(); ++a)
    if (const ir::RuntimeExtent& e = root->runtime_extents[a]; e.runtime())
      runtime.push_back({{"axis", root->regions[0]->args[a]->name},
                         {"param", "%" + e.param->name},
                         {"divisor", e.divisor},
                         {"max", root->extents[a]}});
  j["domain"]["runtime_extents"] = std::move(runtime);
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
  j["realization"] = plan::toString(p.realization);
  if (p.realization == plan::Realization::Lanes) j["lanes"] = lanesJson(kernel, p);
  if (p.realization == plan::Realization::Block) j["block"] = blockJson(p);
  if (!p.block_not_taken.empty()) j["block_not_taken_because"] = p.block_not_taken;
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

// Target nvptx: how each phase is launched (plan::gpuLaunch) and what the PTX declares for it.
nlohmann::json gpuFacts(const std::vector<codegen::Phase>& phases, const codegen::Lowered& lowered,
                        const std::string& ptx) {
  const std::vector<jit::PtxFunction> functions = jit::ptxFunctions(ptx);
  auto ptxJson = [](const jit::PtxFunction& f) {
    nlohmann::json regs = nlohmann::json::object();
    for (const auto& [type, n] : f.registers) regs[type] = n;
    return nlohmann::json{
        {"virtual_registers", regs}, {"local_bytes", f.local_bytes}, {"shared_bytes", f.shared_bytes}};
  };
  nlohmann::json kernels = nlohmann::json::array();
  bool spread = true, lanes = false, block = false;
  for (size_t i = 0; i < lowered.phases.size() && i < phases.size(); ++i) {
    if (!lowered.phases[i].gpu_entry) continue;
    const codegen::LoweredPhase::GpuEntry& e = *lowered.phases[i].gpu_entry;
    const plan::Plan& p = *phases[i].plan;
    const plan::GpuLaunch g = plan::gpuLaunch(p, e.threads_per_program);
    spread = spread && e.threads_per_program > 1;
    lanes = lanes || p.realization == plan::Realization::Lanes;
    block = block || p.realization == plan::Realization::Block;
    nlohmann::json k = {
        {"phase", i},
        {"entry", e.name},
        {"programs", p.num_programs},
        {"programs_per_thread", g.programs_per_thread},
        {"threads_per_program", g.threads_per_program},
        {"realization", plan::toString(p.realization)},
        {"lanes", p.realization == plan::Realization::Block ? "block"
                  : e.threads_per_program > 1               ? "threads"
                                                            : "registers"},
        {"lanes_not_spread_because", e.not_spread.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.not_spread)},
        {"threads", g.threads},
        {"grid", g.grid},
        {"block", g.threads_per_block},
        {"dynamic_shared_bytes", g.dynamic_shared_bytes},
        // Knob gpu_dependent_launch: waits for the phase before (launched with programmatic
        // stream serialization), lets the next one's launch begin early.
        {"dependent_launch", {{"waits_for_previous", e.waits_for_previous}, {"triggers_next", e.triggers_next}}},
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
  return {
      {"mapping", block    ? "one thread block per program (in some phase): its tiles spread over the block's threads"
                  : spread ? "one warp segment of W threads per program: lane l of every vector in thread l"
                  : lanes  ? "one GPU thread per program (in some phase): its lane vectors are that thread's registers"
                           : "one GPU thread per packet of W programs (local_lanes = 1)"},
      {"kernels", kernels},
      {"functions_called", called},
      {"resources_note",
       "PTX virtual registers and declared local/shared bytes; the registers ptxas allocates come from the "
       "driver at load time (kiln-replay reports them)"}};
}

nlohmann::json fullPacketJson(const plan::Knobs& knobs, const codegen::LoweredPhase& lowered) {
  return {{"requested", knobs.full_packet},
          {"decision", lowered.full_packet_decision},
          {"body_instructions", lowered.body_instructions},
          {"budget", knobs.full_packet_budget},
          {"clone_instructions", lowered.full_body_instructions}};
}

}  // namespace

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

nlohmann::json planReport(const ir::Kernel& kernel, const std::vector<codegen::Phase>& phases) {
  nlohmann::json r = nlohmann::json::object();
  r["knobs"] = knobsJson(phases.at(0).plan->knobs);
  r["kernel"] = kernel.name;
  int64_t blocks = 0, snapshot = 0;
  nlohmann::json reports = nlohmann::json::array();
  for (size_t i = 0; i < phases.size(); ++i) {
    const plan::Plan& p = *phases[i].plan;
    nlohmann::json ph = phasePlanJson(*phases[i].kernel, p);
    ph["phase"] = i;
    ph["at"] = where(kernel.roots().at(i)->loc);
    reports.push_back(std::move(ph));
    blocks += p.num_blocks;
    snapshot = std::max(snapshot, p.snapshot_bytes_per_worker);
  }
  // The parameters a launch may vary without a new compile: runtime extents and ranged integers.
  nlohmann::json ranged = nlohmann::json::array();
  for (const ir::Value* prm : kernel.params)
    if (prm->range) {
      ranged.push_back({{"param", "%" + prm->name}, {"range", {prm->range->lo, prm->range->hi}}});
      if (prm->range->ascending) ranged.back()["ascending"] = true;
    }
  r["domain"] = {
      {"phases", phases.size()}, {"blocks", blocks}, {"runtime", kernel.runtimeExtents()}, {"ranged_params", ranged}};
  nlohmann::json ws = nlohmann::json::array();
  for (const ir::Value* w : kernel.workspaces)
    ws.push_back({{"name", "%" + w->name}, {"type", ir::toString(w->type)}, {"bytes", 4 * w->type.numElements()}});
  r["workspaces"] = ws;
  r["snapshot_bytes_per_worker"] = snapshot;
  r["phases"] = std::move(reports);
  return r;
}

void addRealized(const std::vector<codegen::Phase>& phases, const codegen::Lowered& lowered,
                 const jit::CompiledObject& obj, double ms, nlohmann::json& r) {
  const plan::Knobs& knobs = phases.at(0).plan->knobs;
  for (size_t i = 0; i < lowered.phases.size(); ++i) {
    const codegen::LoweredPhase& lp = lowered.phases[i];
    nlohmann::json& ph = r["phases"][i];
    ph["resources"]["realized_allocas"] = lp.realized_allocas;
    ph["resources"]["realized_loops"] = lp.realized_loops;
    ph["full_packet"] = fullPacketJson(knobs, lp);
    if (lp.lanes) ph["lanes"]["code_per_program"]["realized"] = laneCodeJson(lp.lane_code);
  }
  r["llvm"] = {{"instructions_pre_opt", lowered.instructions_pre_opt},
               {"instructions_post_opt", obj.instructions_post_opt},
               {"basic_blocks_pre_opt", lowered.basic_blocks_pre_opt},
               {"basic_blocks", obj.basic_blocks_post_opt},
               {"pipeline", obj.pipeline}};
  r["compile_ms"] = ms;
  r["object"] = {{"bytes", obj.object_bytes.size()}, {"sha256", obj.object_sha256}};
  const target::Target& t = target::of(knobs.target);
  r["target"] = t.reportFacts(knobs.isa, obj);
  r["precision"] = knobs.fast_math ? "fast_math" : "precise";
  if (t.gpuEntries()) r["gpu"] = gpuFacts(phases, lowered, obj.object_bytes);
}

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
  if (report.contains("phases") && report["phases"].is_array()) {
    const bool several = report["phases"].size() > 1;
    for (const nlohmann::json& ph : report["phases"])
      if (auto e = one(ph, several ? fmt::format("phase {}: ", ph.value("phase", 0)) : std::string())) return e;
  }
  return std::nullopt;
}

}  // namespace kiln::driver
