// The interpreter's program form: every op of a verified kernel with the index maps it needs,
// computed once per evaluation (tile shapes are static), so that executing an op never looks
// up a dim by name.
// Expects: a verified kernel. Guarantees: one Step per op, nested like the regions.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/ir.h"

namespace kiln::interp::detail {

// How a load/store tile maps onto its view.
struct AccessPlan {
  int param = 0;                     // index of the view parameter (or workspace)
  bool workspace = false;            // the view is a workspace (Kernel::workspaces)
  std::vector<int64_t> view_shape;   // per view dim
  std::vector<int64_t> view_stride;  // per view dim, row-major
  std::vector<int> tile_to_view;     // per tile dim (in the tile's order): its view dim
  std::vector<int64_t> tile_extent;  // per tile dim
  std::vector<int> squeezed;         // view dims accessed as `_`
};

struct Step {
  const ir::Op* op = nullptr;
  int64_t size = 0;  // elements of the (first) result, 0 when none
  // Broadcast: map0[out] = operand offset.
  // Reduce: map0[out] = x offset of the output's first contribution, map1[j] = offset of
  //         contribution j relative to it (row-major over the reduced dims in x order).
  // Mma: map0/map1[o] = a/b offset of acc element o, map2/map3[k] = a/b offset of term k.
  std::vector<int64_t> map0, map1, map2, map3;
  int64_t stride = 1, extent = 1;  // Iota: element index -> (index / stride) % extent
  std::vector<int64_t> strides;    // Extract: operand strides
  AccessPlan access;               // Load / Store
  std::vector<Step> body;          // Parallel / Serial / Pipeline: the body's ops
};

// Compiles one op, and the ops of its regions recursively.
Step compileOp(const ir::Op& op);

}  // namespace kiln::interp::detail
