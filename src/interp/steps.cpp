#include "interp/steps.h"

#include <string>

namespace kiln::interp::detail {
namespace {

std::vector<int64_t> rowMajorStrides(const std::vector<ir::Dim>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) s[i - 1] = s[i] * dims[i].extent;
  return s;
}

// Stride of the dim called `name` in tile type `t`, 0 when `t` lacks it.
int64_t strideOf(const ir::Type& t, const std::string& name) {
  int i = t.findDim(name);
  return i < 0 ? 0 : rowMajorStrides(t.dims)[i];
}

// For every point of the row-major space over `dims`: sum of coordinate * stride.
std::vector<int64_t> offsetMap(const std::vector<ir::Dim>& dims, const std::vector<int64_t>& strides) {
  int64_t n = 1;
  for (const ir::Dim& d : dims) n *= d.extent;
  std::vector<int64_t> out(static_cast<size_t>(n));
  if (n == 0) return out;
  std::vector<int64_t> coord(dims.size(), 0);
  int64_t off = 0;
  for (int64_t e = 0; e < n; ++e) {
    out[e] = off;
    for (size_t d = dims.size(); d-- > 0;) {
      off += strides[d];
      if (++coord[d] < dims[d].extent) break;
      off -= strides[d] * dims[d].extent;
      coord[d] = 0;
    }
  }
  return out;
}

std::vector<int64_t> stridesIn(const ir::Type& t, const std::vector<ir::Dim>& dims) {
  std::vector<int64_t> s;
  for (const ir::Dim& d : dims) s.push_back(strideOf(t, d.name));
  return s;
}

AccessPlan accessPlan(const ir::Op& op, const ir::Type& tile) {
  AccessPlan p;
  const ir::Value* view = op.operands[0];
  p.param = view->index;
  p.workspace = view->origin == ir::Value::Origin::Workspace;
  p.view_shape = view->type.shape();
  p.view_stride.assign(p.view_shape.size(), 1);
  for (size_t i = p.view_shape.size(); i-- > 1;) p.view_stride[i - 1] = p.view_stride[i] * p.view_shape[i];
  for (size_t k = 0; k < op.access.size(); ++k)
    if (op.access[k].name.empty()) p.squeezed.push_back(static_cast<int>(k));
  for (const ir::Dim& d : tile.dims) {
    for (size_t k = 0; k < op.access.size(); ++k)
      if (op.access[k].name == d.name) p.tile_to_view.push_back(static_cast<int>(k));
    p.tile_extent.push_back(d.extent);
  }
  return p;
}

std::vector<Step> compileRegion(const ir::Region& region) {
  std::vector<Step> steps;
  steps.reserve(region.ops.size());
  for (const ir::Op* op : region.ops) steps.push_back(compileOp(*op));
  return steps;
}

}  // namespace

Step compileOp(const ir::Op& op) {
  Step s;
  s.op = &op;
  if (!op.results.empty()) s.size = op.results[0]->type.numElements();
  switch (op.kind) {
    case ir::OpKind::Iota: {
      const ir::Type& t = op.results[0]->type;
      int d = t.findDim(op.dims[0]);
      s.stride = rowMajorStrides(t.dims)[d];
      s.extent = t.dims[d].extent;
      break;
    }
    case ir::OpKind::Broadcast: {
      const ir::Type& out = op.results[0]->type;
      s.map0 = offsetMap(out.dims, stridesIn(op.operands[0]->type, out.dims));
      break;
    }
    case ir::OpKind::Reduce: {
      const ir::Type& x = op.operands[0]->type;
      std::vector<ir::Dim> kept, reduced;
      for (const ir::Dim& d : x.dims) {
        bool r = false;
        for (const std::string& n : op.dims) r = r || n == d.name;
        (r ? reduced : kept).push_back(d);
      }
      s.map0 = offsetMap(kept, stridesIn(x, kept));
      s.map1 = offsetMap(reduced, stridesIn(x, reduced));
      break;
    }
    case ir::OpKind::Mma: {
      const ir::Type& a = op.operands[0]->type;
      const ir::Type& b = op.operands[1]->type;
      const ir::Type& acc = op.operands[2]->type;
      std::vector<ir::Dim> k;
      for (const std::string& n : op.dims) k.push_back(a.dims[a.findDim(n)]);
      s.map0 = offsetMap(acc.dims, stridesIn(a, acc.dims));
      s.map1 = offsetMap(acc.dims, stridesIn(b, acc.dims));
      s.map2 = offsetMap(k, stridesIn(a, k));
      s.map3 = offsetMap(k, stridesIn(b, k));
      break;
    }
    case ir::OpKind::Extract: s.strides = rowMajorStrides(op.operands[0]->type.dims); break;
    case ir::OpKind::Load: s.access = accessPlan(op, op.results[0]->type); break;
    case ir::OpKind::Store: s.access = accessPlan(op, op.operands[1]->type); break;
    default: break;
  }
  for (const ir::Region* r : op.regions) s.body = compileRegion(*r);
  return s;
}

}  // namespace kiln::interp::detail
