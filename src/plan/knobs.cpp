#include "plan/knobs.h"

#include "host/isa.h"
#include "target/target.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <functional>
#include <map>

namespace kiln::plan {
namespace {

struct Entry {
  KnobInfo info;
  std::function<std::optional<std::string>(Knobs&, const std::string&)> set;
  std::function<std::string(const Knobs&)> get;
};

std::optional<int64_t> parseInt(const std::string& s) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

std::string rangeError(const KnobInfo& k, const std::string& value) {
  return fmt::format("knob '{}': value '{}' is outside its legal range {} ({})", k.name, value, k.range, k.doc);
}

Entry intKnob(KnobInfo info, int64_t Knobs::*field, std::function<bool(int64_t)> legal) {
  Entry e;
  e.info = info;
  e.set = [info, field, legal](Knobs& k, const std::string& v) -> std::optional<std::string> {
    auto n = parseInt(v);
    if (!n || !legal(*n)) return rangeError(info, v);
    k.*field = *n;
    return std::nullopt;
  };
  e.get = [field](const Knobs& k) { return std::to_string(k.*field); };
  return e;
}

// "auto" (stored as 0: the planner's or the target model's choice) or an integer `legal` accepts.
Entry autoIntKnob(KnobInfo info, int64_t Knobs::*field, std::function<bool(int64_t)> legal) {
  Entry e = intKnob(info, field, legal);
  e.set = [info, field, set = e.set](Knobs& k, const std::string& v) -> std::optional<std::string> {
    if (v != "auto") return set(k, v);
    k.*field = 0;
    return std::nullopt;
  };
  e.get = [field](const Knobs& k) { return k.*field == 0 ? std::string("auto") : std::to_string(k.*field); };
  return e;
}

Entry boolKnob(KnobInfo info, bool Knobs::*field) {
  Entry e;
  info.range = "on|off";
  e.info = info;
  e.set = [info, field](Knobs& k, const std::string& v) -> std::optional<std::string> {
    if (v == "on" || v == "true" || v == "1") {
      k.*field = true;
    } else if (v == "off" || v == "false" || v == "0") {
      k.*field = false;
    } else {
      return rangeError(info, v);
    }
    return std::nullopt;
  };
  e.get = [field](const Knobs& k) { return std::string(k.*field ? "on" : "off"); };
  return e;
}

// One of the words `legal` (info.range lists them, '|'-separated).
Entry wordKnob(KnobInfo info, std::string Knobs::*field, std::vector<std::string> legal) {
  Entry e;
  e.info = info;
  e.set = [info, field, legal](Knobs& k, const std::string& v) -> std::optional<std::string> {
    if (std::find(legal.begin(), legal.end(), v) == legal.end()) return rangeError(info, v);
    k.*field = v;
    return std::nullopt;
  };
  e.get = [field](const Knobs& k) { return k.*field; };
  return e;
}

const std::vector<Entry>& entries() {
  static const std::vector<Entry> table = [] {
    std::vector<Entry> t;
    auto inRange = [](int64_t lo, int64_t hi) { return [lo, hi](int64_t v) { return v >= lo && v <= hi; }; };
    auto widths = [](int64_t v) { return v == 1 || v == 4 || v == 8 || v == 16; };
    t.push_back(autoIntKnob({"packet_width", "auto", "auto or {1, 4, 8, 16}",
                             "SIMD lanes per packet (W): the vector width. auto: the target model's (one register: "
                             "AVX2 8, AVX-512 16; nvptx 16)"},
                            &Knobs::packet_width, widths));
    t.push_back(autoIntKnob({"block_size", "auto", "auto or 1..4096 (with local_lanes=1: a multiple of packet_width)",
                             "programs per block; blocks are dispatched over the thread pool. auto: 32 with "
                             "local_lanes=1; with local_lanes=W, ceil(programs / 64) (at most 32), so that up to 64 "
                             "workers find a block"},
                            &Knobs::block_size, inRange(1, 4096)));
    {
      Entry e;
      e.info = {"local_lanes", "W", "1 or W (= packet_width; the number itself is accepted too)",
                "lanes given to one program: W = one program over the lanes (vector loads, register-blocked "
                "mma); 1 = each lane runs a whole program (the seed's realization)"};
      e.set = [info = e.info](Knobs& k, const std::string& v) -> std::optional<std::string> {
        if (v == "W" || v == "w") {
          k.local_lanes = 0;
          return std::nullopt;
        }
        auto n = parseInt(v);
        if (!n || (*n != 1 && *n != 4 && *n != 8 && *n != 16)) return rangeError(info, v);
        k.local_lanes = *n;
        return std::nullopt;
      };
      e.get = [](const Knobs& k) {
        if (k.local_lanes != 0) return std::to_string(k.local_lanes);
        return k.packet_width == 0 ? std::string("W") : std::to_string(k.packet_width);
      };
      t.push_back(e);
    }
    {
      Entry e;
      e.info = {"isa", "native", "native|avx2|avx512",
                "instruction set of the generated code (native = the host's CPU and features)"};
      e.set = [info = e.info](Knobs& k, const std::string& v) -> std::optional<std::string> {
        if (v != "native" && v != "avx2" && v != "avx512") return rangeError(info, v);
        k.isa = v;
        return std::nullopt;
      };
      e.get = [](const Knobs& k) { return k.isa; };
      t.push_back(e);
    }
    {
      Entry e;
      e.info = {"target", "cpu", target::names(),
                "what the code runs on: the host CPU (an ELF object) or an NVIDIA GPU (PTX for sm_90a; docs/gpu.md)"};
      e.set = [info = e.info](Knobs& k, const std::string& v) -> std::optional<std::string> {
        const target::Target* t = target::byName(v);
        if (!t) return rangeError(info, v);
        k.target = t->kind();
        return std::nullopt;
      };
      e.get = [](const Knobs& k) { return std::string(target::of(k.target).name()); };
      t.push_back(e);
    }
    t.push_back(wordKnob({"amx", "auto", "auto|off",
                          "cpu, AVX-512 code: an mma in the bf16_dot order runs on AMX tile instructions (TDPBF16PS, "
                          "whose arithmetic the order is: the same bits either way); auto: where this host has AMX "
                          "(docs/backend.md)"},
                         &Knobs::amx, {"auto", "off"}));
    t.push_back(
        wordKnob({"avx512_bf16", "auto", "auto|off",
                  "cpu, AVX-512 code: the steps of an mma in the bf16_dot order that does not run on AMX run on "
                  "VDPBF16PS, one product per lane and instruction (its arithmetic is the order's step: the "
                  "same bits either way); auto: where this host has AVX512-BF16 (docs/backend.md)"},
                 &Knobs::avx512_bf16, {"auto", "off"}));
    t.push_back(wordKnob({"word_transposes", "swap", "swap|unpack",
                          "cpu, code of 8 or 16 lanes: bf16 K or V transposed as 32-bit words in registers by "
                          "off-diagonal swaps, whose first and last rounds are two-source permutations (swap), or by "
                          "4-lane unpacks and 128-bit lane selections (unpack); the same bits either way "
                          "(docs/backend.md)"},
                         &Knobs::word_transposes, {"swap", "unpack"}));
    t.push_back(wordKnob({"tune_cpu", "generic", "generic|host",
                          "cpu: the CPU model LLVM schedules and tunes the code for: generic, the level of its "
                          "instruction set (x86-64-v4 for AVX-512 code, x86-64-v3 for AVX2), or host, this CPU's "
                          "own (e.g. znver5); the instructions are isa's either way, and so are the bits "
                          "(docs/backend.md)"},
                         &Knobs::tune_cpu, {"generic", "host"}));
    {
      Entry e;
      e.info = {"gpu_lanes", "threads", "threads|registers",
                "target nvptx: a program's W lanes spread over W threads of a warp, or kept in one thread's registers"};
      e.set = [info = e.info](Knobs& k, const std::string& v) -> std::optional<std::string> {
        if (v != "threads" && v != "registers") return rangeError(info, v);
        k.gpu_lanes = v;
        return std::nullopt;
      };
      e.get = [](const Knobs& k) { return k.gpu_lanes; };
      t.push_back(e);
    }
    t.push_back(autoIntKnob(
        {"gpu_threads", "auto", "auto or 32, 64, 128, 256, 512, 1024",
         "target nvptx, block realization: the most threads of a thread block (auto: the target model's rule: 256; "
         "with an mma and a block per SM, enough for a full register tile, at least 128; without an mma and fewer "
         "blocks than SMs, up to 512); fewer threads hold larger register tiles each (docs/gpu.md)"},
        &Knobs::gpu_threads, [](int64_t v) { return v >= 32 && v <= 1024 && (v & (v - 1)) == 0; }));
    t.push_back(boolKnob({"gpu_async_copy", "on", "",
                          "target nvptx, block realization: a double-buffered stage of an f32 view read with fill 0 "
                          "is copied to shared memory by cp.async, without registers (off: through registers, where "
                          "the next trip's elements fit a microtile) (docs/gpu.md)"},
                         &Knobs::gpu_async_copy));
    t.push_back(boolKnob({"gpu_early_copies", "off", "",
                          "target nvptx, block realization: a loop's first trip of cp.async stages is issued as early "
                          "as its origins are known (before the program's other loads), not at the loop; off until "
                          "an H200 run pairs it (docs/gpu.md)"},
                         &Knobs::gpu_early_copies));
    t.push_back(boolKnob({"gpu_wide_copies", "on", "",
                          "target nvptx, block realization: a cp.async stage whose groups of 4 elements lie together "
                          "in the view and the stage is copied 16 bytes at a time where the view's base and origin are "
                          "aligned (off: 4-byte copies, except a K-inner stage's) (docs/gpu.md)"},
                         &Knobs::gpu_wide_copies));
    t.push_back(boolKnob({"gpu_read_ahead", "off", "",
                          "target nvptx, block realization: an mma whose K is a loop reads the next trip's row and "
                          "column values from shared memory before this trip's products (off: each trip reads, "
                          "then multiplies) (docs/gpu.md)"},
                         &Knobs::gpu_read_ahead));
    t.push_back(boolKnob({"gpu_heavy_first", "on", "",
                          "target nvptx, block realization: a root axis along which the program's loops take more "
                          "trips is walked outermost and from its last index down, so that the longest programs "
                          "start first and the short ones fill the last wave (causal attention's query blocks); "
                          "not with knob root_axis_order (off: the domain as written) (docs/gpu.md)"},
                         &Knobs::gpu_heavy_first));
    t.push_back(autoIntKnob({"gpu_blocks_per_sm", "auto", "auto|1|2",
                             "target nvptx, block realization: the shared memory a block's stages are planned in: 2 "
                             "= the target model's share of two blocks per SM (H200: 112 KB), 1 = what one block per "
                             "SM may take (227 KB); auto: two where the stages fit (double-buffered, else single), "
                             "else one (docs/gpu.md)"},
                            &Knobs::gpu_blocks_per_sm, inRange(1, 2)));
    t.push_back(boolKnob({"gpu_dependent_launch", "on", "",
                          "target nvptx, a kernel of several phases: each phase but the last lets the next one's "
                          "launch begin once all its blocks have started (griddepcontrol.launch_dependents), and each "
                          "phase but the first waits at its start until the one before has finished and its memory is "
                          "visible (griddepcontrol.wait), launched with programmatic stream serialization; the same "
                          "bits (off: each phase starts when the one before has finished) (docs/gpu.md)"},
                         &Knobs::gpu_dependent_launch));
    t.push_back(intKnob({"gpu_max_ptx_kb", "4096", "1..1048576",
                         "target nvptx: the largest PTX, in KiB, a compile may give; larger is an error naming the "
                         "knobs that unroll (the driver's JIT of a 7.9 MB PTX had not finished after 6 minutes on "
                         "an H100) (docs/gpu.md)"},
                        &Knobs::gpu_max_ptx_kb, inRange(1, int64_t(1) << 20)));
    {
      Entry e;
      e.info = {"gpu_realization", "auto", "auto|block|lanes",
                "target nvptx: a program per thread block, its tiles spread over the threads and mma operands "
                "staged in shared memory (block), or per warp segment (lanes); auto takes block where every op "
                "of the program has a block form (docs/gpu.md)"};
      e.set = [info = e.info](Knobs& k, const std::string& v) -> std::optional<std::string> {
        if (v != "auto" && v != "block" && v != "lanes") return rangeError(info, v);
        k.gpu_realization = v;
        return std::nullopt;
      };
      e.get = [](const Knobs& k) { return k.gpu_realization; };
      t.push_back(e);
    }
    {
      Entry e;
      e.info = {"root_axis_order", "as-written", "a permutation of the root domain's axis names, comma-separated",
                "order in which the root domain is flattened into programs (first = outermost)"};
      e.set = [](Knobs& k, const std::string& v) -> std::optional<std::string> {
        k.root_axis_order = v == "as-written" ? "" : v;
        return std::nullopt;
      };
      e.get = [](const Knobs& k) { return k.root_axis_order.empty() ? std::string("as-written") : k.root_axis_order; };
      t.push_back(e);
    }
    t.push_back(intKnob({"max_unrolled_tile_elements", "64", "0..65536 (0 = fully unrolled diagnostic)",
                         "tiles up to this many elements stay SSA (unrolled); larger ones become snapshots"},
                        &Knobs::max_unrolled_tile_elements, inRange(0, 65536)));
    t.push_back(intKnob({"max_unrolled_mma_terms", "0", "0..65536 (0 = no extra cap)",
                         "extra cap on unrolling an mma's K: can only keep K rolled earlier, never unroll more"},
                        &Knobs::max_unrolled_mma_terms, inRange(0, 65536)));
    t.push_back(
        intKnob({"mma_output_block", "1", "{1, 2, 4}", "R: accumulators sharing one K loop (output register blocking)"},
                &Knobs::mma_output_block, [](int64_t v) { return v == 1 || v == 2 || v == 4; }));
    t.push_back(intKnob({"max_unrolled_region_work", "4096", "0..1073741824 (0 = no limit)",
                         "work budget (outputs x K-updates x (2 + operand ranks)) admitting output blocking"},
                        &Knobs::max_unrolled_region_work, inRange(0, int64_t(1) << 30)));
    t.push_back(boolKnob({"mma_indexable_snapshot", "on", "",
                          "rolled K reading a small SSA operand: on = indexable snapshot, off = SELECT chain (seed)"},
                         &Knobs::mma_indexable_snapshot));
    t.push_back(boolKnob({"full_packet", "off", "", "request the full-packet clone (body specialised to all lanes)"},
                         &Knobs::full_packet));
    t.push_back(intKnob({"full_packet_budget", "4096", "0..1048576",
                         "max pre-optimisation LLVM instructions of the packet body for the clone"},
                        &Knobs::full_packet_budget, inRange(0, int64_t(1) << 20)));
    t.push_back(intKnob({"reduction_partitions", "4", "1..16",
                         "partitions P of `unordered_tree` reductions that do not name their own"},
                        &Knobs::reduction_partitions, inRange(1, 16)));
    t.push_back(boolKnob({"fast_math", "off", "", "allow FMA contraction and fast-math flags (not bitexact)"},
                         &Knobs::fast_math));
    t.push_back(
        intKnob({"max_local_bytes", "262144", "0..16777216", "limit on snapshot bytes per worker (private arrays)"},
                &Knobs::max_local_bytes, inRange(0, int64_t(1) << 24)));
    t.push_back(boolKnob(
        {"fuse_recipes", "on", "", "fusion switch: single-use pure expressions are recomputed at their consumer"},
        &Knobs::fuse_recipes));
    t.push_back(intKnob({"threads", "1", "1..256", "threads of the pool running blocks (1 = the calling thread)"},
                        &Knobs::threads, inRange(1, 256)));
    return t;
  }();
  return table;
}

}  // namespace

const std::vector<KnobInfo>& knobTable() {
  static const std::vector<KnobInfo> infos = [] {
    std::vector<KnobInfo> v;
    for (const Entry& e : entries()) v.push_back(e.info);
    return v;
  }();
  return infos;
}

std::optional<std::string> Knobs::set(const std::string& name, const std::string& value) {
  for (const Entry& e : entries())
    if (e.info.name == name) return e.set(*this, value);
  std::string names;
  for (const Entry& e : entries()) names += (names.empty() ? "" : ", ") + e.info.name;
  return fmt::format("unknown knob '{}'; knobs are: {}", name, names);
}

std::optional<std::string> Knobs::setAssignment(const std::string& assignment) {
  auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0) return fmt::format("expected name=value, got '{}'", assignment);
  return set(assignment.substr(0, eq), assignment.substr(eq + 1));
}

std::string Knobs::get(const std::string& name) const {
  for (const Entry& e : entries())
    if (e.info.name == name) return e.get(*this);
  return {};
}

namespace {
bool avx512Code(const Knobs& k, const target::Model& m) {
  return k.target == target::Kind::Cpu && m.isa == "avx512" &&
         (k.packet_width > 0 ? k.packet_width : m.packet_width) == 16;
}
}  // namespace

bool dpbf16Steps(const Knobs& k, const target::Model& m) {
  return k.avx512_bf16 == "auto" && avx512Code(k, m) && host::cpuHasAvx512Bf16();
}

bool amxTiles(const Knobs& k, const target::Model& m) {
  return k.amx == "auto" && avx512Code(k, m) && host::cpuHasAmxBf16();
}

}  // namespace kiln::plan
