// An NVIDIA GPU (sm_90a): PTX text through LLVM's NVPTX backend (docs/gpu.md). A thread holds one
// lane of each vector (or, with gpu_lanes=registers, scalars), so W-lane accesses are never split
// into register-wide pieces; scattered accesses are per-thread stores.
#include <fmt/format.h>

#include <algorithm>

#include "jit/compile.h"
#include "llvm/IR/Module.h"
#include "plan/knobs.h"
#include "target/targets.h"

namespace kiln::target {

// sm_90a as the lane realization uses it today: a thread holds one lane of each vector, so
// vectors are never split and scattered stores are per-thread stores; the register tile keeps
// the CPU's budget of 20 vectors. The block realization's facts follow.
const Model& NvptxTarget::model(const std::string& isa) const {
  (void)isa;
  static const Model m = [] {
    Model n;
    n.name = "nvptx sm_90a (H200: 132 SMs)";
    n.isa = "sm_90a";
    n.packet_width = 16;
    n.accumulator_registers = 20;
    n.max_tile_chunk_registers = 4;
    n.transpose_lanes = 16;
    n.scatter = true;
    // PTX's cvt.f32.f16 / cvt.rn.f16.f32 are not specified to keep a NaN's payload (the GPU's
    // NaNs are canonical); every other input converts exactly / rounds to nearest even with
    // subnormals kept (no .ftz): the replay's sweep of every input checks it (docs/gpu.md).
    n.half_conversions_keep_nan = false;
    // The block realization (docs/gpu.md, "Thread blocks"): an H200 has 132 SMs of 64K 32-bit
    // registers and 228 KB of shared memory (227 KB for one block); blocks of 256 threads with
    // at most 64 elements of a tile per thread (8 x 8 accumulators) and at most 112 KB of shared
    // memory leave room for two blocks per SM; a program whose stages need more takes up to the
    // 227 KB of one block per SM (knob gpu_blocks_per_sm); 48 KB is what a block may declare
    // statically (more is dynamic shared memory, sized at launch).
    n.multiprocessors = 132;
    n.warp_threads = 32;
    n.block_threads = 256;
    n.mma_min_block_threads = 128;
    n.few_blocks_threads = 512;
    n.mma_threads_y = 16;
    n.microtile_elements = 64;
    n.shared_bytes_per_block = 112 * 1024;
    n.shared_bytes_one_block = 227 * 1024;
    n.static_shared_bytes = 48 * 1024;
    n.shared_vector_lanes = 4;
    // A grid of at most a block per SM states its registers per thread (.maxnreg: plan/block.cpp):
    // 255, or what 64K registers give each of its threads (in multiples of 8; 128 for 512
    // threads: with 255 stated, a 512-thread block got 170 and could not launch). The register
    // file is four parts of 16K, one per scheduler, and a block's warps are dealt over them: 14
    // warps put 4 in one part, so 448 threads may take 128 each, not 144 (kiln fuzz --family
    // block on an H100: with 144 stated the driver allowed 384 threads and refused the launch).
    n.thread_registers = 255;
    n.block_registers = 64 * 1024;
    n.register_granule = 8;
    n.register_partitions = 4;
    return n;
  }();
  return m;
}

llvm::Expected<jit::CompiledObject> NvptxTarget::emit(std::unique_ptr<llvm::Module> module,
                                                      const jit::JitOptions& options) const {
  return jit::compileToPtx(std::move(module), options);
}

std::optional<std::string> NvptxTarget::refuse(const jit::CompiledObject& object, const plan::Knobs& knobs) const {
  const std::string& ptx = object.object_bytes;
  if (static_cast<int64_t>(ptx.size()) <= knobs.gpu_max_ptx_kb * 1024) return std::nullopt;
  return fmt::format(
      "the PTX is {} KiB ({} lines), above gpu_max_ptx_kb={}: the driver's JIT takes minutes on PTX this large. "
      "The code unrolls tiles of up to max_unrolled_tile_elements={} elements{}; lower that knob, or raise "
      "gpu_max_ptx_kb",
      (ptx.size() + 1023) / 1024, std::count(ptx.begin(), ptx.end(), '\n'), knobs.gpu_max_ptx_kb,
      knobs.max_unrolled_tile_elements,
      knobs.local_lanes == 1 ? " in each thread (local_lanes=1: a whole program per thread)" : "");
}

nlohmann::json NvptxTarget::reportFacts(const std::string& isa, const jit::CompiledObject& object) const {
  return {{"name", name()},
          {"triple", jit::kPtxTriple},
          {"arch", jit::kPtxArch},
          {"ptx_version", jit::ptxVersion(object.object_bytes)},
          {"model", model(isa).toJson()},
          {"llvm_version", jit::hostTarget().llvm_version}};
}

}  // namespace kiln::target
