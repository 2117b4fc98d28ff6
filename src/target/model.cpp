#include "target/model.h"

#include <algorithm>

namespace kiln::target {

nlohmann::json Model::toJson() const {
  return {{"name", name},
          {"isa", isa},
          {"register_lanes", register_lanes},
          {"vector_registers", vector_registers},
          {"default_packet_width", packet_width},
          {"accumulator_registers", accumulator_registers},
          {"max_tile_chunk_registers", max_tile_chunk_registers},
          {"transpose_lanes", transpose_lanes},
          {"scatter", scatter},
          {"scatter_min_bytes", scatter_min_bytes},
          {"prefetch", prefetch},
          {"unaligned_vector_loads", unaligned_vector_loads},
          {"half_conversions_keep_nan", half_conversions_keep_nan},
          {"fma_ports", fma_ports},
          {"l1d_bytes", l1d_bytes},
          {"l2_bytes", l2_bytes},
          {"multiprocessors", multiprocessors},
          {"warp_threads", warp_threads},
          {"block_threads", block_threads},
          {"mma_min_block_threads", mma_min_block_threads},
          {"few_blocks_threads", few_blocks_threads},
          {"mma_threads_y", mma_threads_y},
          {"microtile_elements", microtile_elements},
          {"shared_bytes_per_block", shared_bytes_per_block},
          {"shared_bytes_one_block", shared_bytes_one_block},
          {"static_shared_bytes", static_shared_bytes},
          {"shared_vector_lanes", shared_vector_lanes},
          {"thread_registers", thread_registers},
          {"block_registers", block_registers},
          {"register_granule", register_granule},
          {"register_partitions", register_partitions}};
}

int64_t Model::blockThreadRegisters(int64_t threads) const {
  if (thread_registers <= 0 || block_registers <= 0 || register_granule <= 0 || warp_threads <= 0) return 0;
  const int64_t parts = std::max<int64_t>(1, register_partitions);
  const int64_t warps = std::max<int64_t>(1, (threads + warp_threads - 1) / warp_threads);
  const int64_t fullest = (warps + parts - 1) / parts;
  return std::min(thread_registers,
                  block_registers / parts / (fullest * warp_threads) / register_granule * register_granule);
}

}  // namespace kiln::target
