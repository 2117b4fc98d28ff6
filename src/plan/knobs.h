// Knobs: the one table of planner settings (name, default, legal range, one-line doc).
// It serves the C++ API, `--set name=value` on the CLI and the realization report.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "target/kind.h"

namespace kiln::target {
struct Model;
}

namespace kiln::plan {

struct Knobs {
  int64_t packet_width = 0;          // 0 = auto: the target model's default W (the plan holds the effective value)
  int64_t block_size = 0;            // 0 = auto (the planner's choice; the plan holds the effective value)
  int64_t local_lanes = 0;           // 0 = W (packet_width): one program over the lanes; 1 = one program per lane
  std::string isa = "native";        // native | avx2 | avx512: the instruction set the code is generated for
  std::string amx = "auto";          // auto | off: bf16_dot mmas on AMX tiles (auto: AVX-512 code on a host with AMX)
  std::string avx512_bf16 = "auto";  // auto | off: bf16_dot steps on VDPBF16PS (auto: AVX-512 code on a host with it)
  std::string word_transposes = "swap";  // swap | unpack: how bf16 words are transposed in registers (cpu, W 8 or 16)
  std::string tune_cpu = "generic";      // generic | host: the CPU model LLVM schedules and tunes for (cpu)
  target::Kind target = target::Kind::Cpu;  // cpu | nvptx: the host CPU (an object) or an NVIDIA GPU (PTX)
  std::string gpu_lanes = "threads";        // nvptx: a program's lanes over W threads, or in one thread's registers
  std::string gpu_realization =
      "auto";                        // nvptx: a program per thread block where it has that form (auto), always, never
  int64_t gpu_threads = 0;           // nvptx block realization: the most threads of a block (0 = auto: the model's)
  bool gpu_async_copy = true;        // nvptx block realization: double-buffered stages filled by cp.async
  bool gpu_early_copies = false;     // nvptx block realization: a loop's first cp.async copies issued early
  bool gpu_wide_copies = true;       // nvptx block realization: 16-byte cp.async copies where groups of 4 allow
  bool gpu_read_ahead = false;       // nvptx block realization: an mma loop reads the next trip's operands early
  bool gpu_heavy_first = true;       // nvptx block realization: the programs with the most loop trips start first
  int64_t gpu_blocks_per_sm = 0;     // nvptx block realization: the shared memory a block is planned for (0 = auto)
  int64_t gpu_max_ptx_kb = 4096;     // nvptx: the largest PTX a compile may give, in KiB (larger: an error)
  bool gpu_dependent_launch = true;  // nvptx: a phase after the first starts while the one before drains
  std::string root_axis_order;       // "" = as written; else comma-separated domain axis names
  int64_t max_unrolled_tile_elements = 64;
  int64_t max_unrolled_mma_terms = 0;
  int64_t mma_output_block = 1;
  int64_t max_unrolled_region_work = 4096;
  bool mma_indexable_snapshot = true;
  bool full_packet = false;
  int64_t full_packet_budget = 4096;
  int64_t reduction_partitions = 4;
  bool fast_math = false;
  int64_t max_local_bytes = 256 * 1024;
  bool fuse_recipes = true;
  int64_t threads = 1;

  // Sets a knob from its text form. Error: names the knob and its legal range.
  std::optional<std::string> set(const std::string& name, const std::string& value);
  // Parses "name=value".
  std::optional<std::string> setAssignment(const std::string& assignment);
  // The value of a knob as text (as the report prints it).
  std::string get(const std::string& name) const;
};

struct KnobInfo {
  std::string name;
  std::string default_value;
  std::string range;  // human-readable legal range
  std::string doc;
};

// Every knob, in a fixed order.
const std::vector<KnobInfo>& knobTable();

// What the host's bf16 instructions do for code of these knobs on `model` (packet_width 0: the
// model's W), the one statement of it that the planner and the library's tile rule read:
// a bf16 order's steps run on VDPBF16PS (knob avx512_bf16=auto, AVX-512 code of 16 lanes for
// the CPU, a host with AVX512-BF16) ...
bool dpbf16Steps(const Knobs& knobs, const target::Model& model);
// ... and a bf16_dot mma of the AMX form's operands runs on AMX tiles (knob amx=auto, the same
// code, a host with AMX-BF16).
bool amxTiles(const Knobs& knobs, const target::Model& model);

}  // namespace kiln::plan
