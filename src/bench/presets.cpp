#include "bench/presets.h"

namespace kiln::bench {
namespace {

// The seed's fixed settings (seed/SEED-EN.md, "Complete pure native-entry results"): W8,
// block32, local1, Tile threshold 64, region budget 4096, full-packet budget 4096, precise
// math, and the seed's SELECT-chain read of a rolled K (mma_indexable_snapshot off).
const KnobSettings kSeedFixed = {{"packet_width", "8"},
                                 {"block_size", "32"},
                                 {"local_lanes", "1"},
                                 {"max_unrolled_tile_elements", "64"},
                                 {"max_unrolled_region_work", "4096"},
                                 {"full_packet_budget", "4096"},
                                 {"fast_math", "off"},
                                 {"threads", "1"}};

Case seedCase(std::string id, std::string label, std::string shape, std::string block, bool full_packet,
              int output_block, bool indexable_in_case) {
  Case c;
  c.id = std::move(id);
  c.label = std::move(label);
  c.request.name = "attention";
  c.request.shape = std::move(shape);
  // The seed's kernel: one program per query head, MUL then ADD (not the library's defaults).
  c.request.options = {{"mask", "causal"}, {"block", std::move(block)}, {"heads", "separate"}, {"fma", "unfused"}};
  c.knobs = kSeedFixed;
  if (indexable_in_case) c.knobs.emplace_back("mma_indexable_snapshot", "off");
  c.knobs.emplace_back("full_packet", full_packet ? "on" : "off");
  c.knobs.emplace_back("mma_output_block", std::to_string(output_block));
  return c;
}

// The six cases, in the seed table's order. `indexable_in_case`: the cases pin
// mma_indexable_snapshot=off (seed-mma-roll); otherwise the arms set it.
std::vector<Case> seedCases(bool indexable_in_case) {
  const std::string decode = "1,8,2,1,2053,80,96", mha = "1,8,8,1,2048,64,64", prefill = "1,4,2,32,65,32,32",
                    tail = "1,6,2,1,2053,80,96";
  const bool s = indexable_in_case;
  return {seedCase("decode-d80-p-off-r4", "decode D80", decode, "1x16", false, 4, s),
          seedCase("decode-d80-p-on-r4", "decode D80", decode, "1x16", true, 4, s),
          seedCase("mha-d64-p-off-r1", "MHA D64", mha, "1x16", false, 1, s),
          seedCase("mha-d64-p-on-r1", "MHA D64", mha, "1x16", true, 1, s),
          seedCase("prefill-p-on-r1", "prefill", prefill, "4x16", true, 1, s),
          seedCase("decode-tail-only-p-on-r4", "decode tail-only", tail, "1x16", true, 4, s)};
}

}  // namespace

const std::vector<PresetInfo>& presets() {
  static const std::vector<PresetInfo> all = {
      {"seed-mma-roll", "the seed's six cases, cap0 vs cap8 (max_unrolled_mma_terms 0 / 8)"},
      {"seed-mma-roll-indexable", "the seed's next step: the six cases under cap8, mma_indexable_snapshot off vs on"}};
  return all;
}

void applyQuick(Experiment& e) {
  e.quick = true;
  e.protocol.cycles = 1;
  e.protocol.samples = 3;
  e.protocol.warmup_ms = 5;
  e.protocol.target_ms = 2;
}

std::optional<std::string> preset(const std::string& name, bool quick, Experiment& out) {
  out = Experiment{};
  out.name = name;
  if (name == "seed-mma-roll") {
    out.description =
        "The seed's experiment (seed/SEED-EN.md): MMA K-unroll cap max_unrolled_mma_terms 0 (cap0, A) vs 8 "
        "(cap8, B); six cases listed in advance; causal attention; W8/block32/local1, Tile threshold 64, region "
        "budget 4096, full-packet budget 4096, precise math, mma_indexable_snapshot off.";
    out.arms = {Arm{"cap0", {{"max_unrolled_mma_terms", "0"}}}, Arm{"cap8", {{"max_unrolled_mma_terms", "8"}}}};
    out.cases = seedCases(true);
  } else if (name == "seed-mma-roll-indexable") {
    out.description =
        "The seed's next step: under cap8 (max_unrolled_mma_terms 8), a rolled K reads its small SSA operand "
        "through a SELECT chain (ssa, A: mma_indexable_snapshot off, the seed's cap8) or from an indexable "
        "snapshot (indexable, B: on); same six cases and fixed settings as seed-mma-roll; a separate experiment "
        "that never overwrites the first.";
    out.arms = {Arm{"cap8-ssa", {{"max_unrolled_mma_terms", "8"}, {"mma_indexable_snapshot", "off"}}},
                Arm{"cap8-indexable", {{"max_unrolled_mma_terms", "8"}, {"mma_indexable_snapshot", "on"}}}};
    out.cases = seedCases(false);
  } else {
    std::string names;
    for (const PresetInfo& p : presets()) names += (names.empty() ? "" : ", ") + p.name;
    return "unknown preset '" + name + "' (presets: " + names + ")";
  }
  if (quick) applyQuick(out);
  return validate(out);
}

}  // namespace kiln::bench
