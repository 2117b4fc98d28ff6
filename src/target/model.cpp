#include "target/model.h"

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
          {"prefetch", prefetch},
          {"fma_ports", fma_ports},
          {"l1d_bytes", l1d_bytes},
          {"l2_bytes", l2_bytes}};
}

}  // namespace kiln::target
