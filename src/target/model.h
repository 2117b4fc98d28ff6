// The target model (DESIGN.md, "The target model"): the facts a plan is sized from, one per
// target and ISA, chosen once through the target seam (Target::model) and named in the report.
// The planner reads its numbers from here, never from constants of its own: the default vector
// width, the register budget of an mma's register tile and its shape, which in-register
// transposes are cheap, whether scattered stores are one instruction.
#pragma once

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <string>

namespace kiln::target {

struct Model {
  std::string name;                      // e.g. "x86-64 AVX2 (16 ymm)"
  std::string isa;                       // avx2 | avx512 | sm_90a
  int64_t register_lanes = 0;            // f32 lanes of one vector register; 0: a vector is never split
  int64_t vector_registers = 0;          // architectural vector registers (x86: 16 ymm or 32 zmm)
  int64_t packet_width = 16;             // default W (knob packet_width=auto)
  int64_t accumulator_registers = 0;     // registers an outer product's register tile of accumulators may take
  int64_t max_tile_chunk_registers = 4;  // registers of one row of that tile (its lane operand's vectors stay live)
  int64_t transpose_lanes = 0;           // the widest W x W in-register transpose fused into an mma (0: none)
  bool scatter = false;                  // a W-lane store to scattered addresses is one instruction
  int64_t scatter_min_bytes = 1;         // the smallest element such a store takes (AVX-512: 4, no 16-bit)
  bool prefetch = false;                 // software prefetch of streamed tiles pays (CPU caches; not the GPU)
  bool unaligned_vector_loads = false;   // a vector of 32-bit words may be loaded from any 2-byte-aligned address
  // The hardware's f16 <-> f32 conversions give docs/ir.md's NaNs ("16-bit views": sign and
  // payload kept, made quiet), as x86's F16C does; false (NVPTX's cvt makes every NaN canonical):
  // compiled code builds a NaN's result from its bits and uses the instruction for the rest.
  bool half_conversions_keep_nan = true;
  int64_t fma_ports = 0;                // vector FMAs issued per cycle (stated; 0 unknown)
  int64_t l1d_bytes = 0, l2_bytes = 0;  // data caches of one core (the OS's numbers; 0 unknown)
  // A GPU (0 on a CPU): the facts the block realization (plan::BlockPlan) sizes a thread block
  // and its per-thread register tiles from.
  int64_t multiprocessors = 0;         // SMs that blocks spread over
  int64_t warp_threads = 0;            // threads of a warp
  int64_t block_threads = 0;           // threads of a block the realization aims for (at most)
  int64_t mma_min_block_threads = 0;   // ... and at least, with an mma whose tile fills fewer
  int64_t few_blocks_threads = 0;      // at most, without an mma, when the grid has fewer blocks than SMs
  int64_t mma_threads_y = 0;           // threads along an mma output's row dim (at most)
  int64_t microtile_elements = 0;      // the most elements of one tile value a thread may hold
  int64_t shared_bytes_per_block = 0;  // shared memory the planner gives one block (at most)
  int64_t shared_bytes_one_block = 0;  // the most one block may take (one block per SM; 0: as above)
  int64_t static_shared_bytes = 0;     // what a block may declare statically (more is sized at launch)
  int64_t shared_vector_lanes = 0;     // f32 lanes of the widest shared-memory load (ld.shared.v4)
  int64_t thread_registers = 0;        // 32-bit registers a thread may use (at most)
  int64_t block_registers = 0;         // 32-bit registers of one block's threads together (at most)
  int64_t register_granule = 0;        // a thread's registers are allocated in multiples of this
  int64_t register_partitions = 0;     // an SM's register file in equal parts, a block's warps dealt over them

  // Lanes of one machine register for W-lane vectors (a wider access is split into pieces).
  int64_t registerLanes(int64_t w) const { return register_lanes > 0 ? register_lanes : w; }
  // Machine registers one W-lane vector takes.
  int64_t registersPerVector(int64_t w) const { return (w + registerLanes(w) - 1) / registerLanes(w); }
  // W-lane vectors a register tile of accumulators may take.
  int64_t accumulators(int64_t w) const { return std::max<int64_t>(1, accumulator_registers / registersPerVector(w)); }
  // Vector chunks in one row of a register tile at width W.
  int64_t maxTileChunks(int64_t w) const {
    return std::max<int64_t>(1, max_tile_chunk_registers / registersPerVector(w));
  }
  // W-lane vectors that fit in the register file.
  int64_t vectors(int64_t w) const { return vector_registers == 0 ? 64 : vector_registers / registersPerVector(w); }
  // The registers per thread a block of `threads` may state (.maxnreg) and still launch: its
  // warps are dealt over the register file's parts, so the fullest part holds ceil(warps /
  // parts) of them; whole granules, at most thread_registers. 0: the model has no such limit.
  int64_t blockThreadRegisters(int64_t threads) const;
  nlohmann::json toJson() const;
};

}  // namespace kiln::target
