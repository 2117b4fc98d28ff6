// Shapes, inputs and the FP64 reference of a peers workload.
#include "peers/problem.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "host/data.h"
#include "host/storage.h"

namespace kiln::peers {

namespace {

// Parses "a,b,c,..." into exactly names.size() fields, each an integer in 1..2^24; errors name
// the field (shared by the attention and GEMM shapes).
std::optional<std::string> parseFields(const std::string& text, const std::vector<const char*>& names,
                                       const std::vector<int64_t*>& fields) {
  std::string list;
  for (const char* n : names) list += (list.empty() ? "" : ",") + std::string(n);
  const int count = static_cast<int>(names.size());
  std::stringstream ss(text);
  std::string part;
  int n = 0;
  while (std::getline(ss, part, ',')) {
    if (n == count) return "shape '" + text + "' has more than " + std::to_string(count) + " fields (" + list + ")";
    size_t used = 0;
    long long value = 0;
    try {
      value = std::stoll(part, &used);
    } catch (...) {
      used = 0;
    }
    if (used == 0 || used != part.size())
      return "shape field " + std::string(names[n]) + " is '" + part + "', not an integer";
    if (value < 1 || value > (int64_t{1} << 24))
      return "shape field " + std::string(names[n]) + " is " + part + "; it must be in 1..16777216";
    *fields[n++] = value;
  }
  if (n != count)
    return "shape '" + text + "' has " + std::to_string(n) + " fields; expected " + std::to_string(count) + ": " + list;
  return std::nullopt;
}

}  // namespace

std::optional<std::string> parseShape(const std::string& text, Shape& out) {
  if (auto e = parseFields(text, {"B", "Hq", "Hkv", "Q", "K", "D", "Dv"},
                           {&out.B, &out.Hq, &out.Hkv, &out.Q, &out.K, &out.D, &out.Dv}))
    return e;
  if (out.Hq % out.Hkv != 0)
    return "shape '" + text + "': Hq (" + std::to_string(out.Hq) + ") must be a multiple of Hkv (" +
           std::to_string(out.Hkv) + ")";
  const double elements =
      double(out.B) * out.Hq * out.Q * (out.D + out.Dv) + double(out.B) * out.Hkv * out.K * (out.D + out.Dv);
  if (elements > double(int64_t{1} << 30)) return "shape '" + text + "' needs more than 2^30 elements of q, k, v and o";
  return std::nullopt;
}

std::string shapeText(const Shape& s) {
  std::ostringstream os;
  os << s.B << ',' << s.Hq << ',' << s.Hkv << ',' << s.Q << ',' << s.K << ',' << s.D << ',' << s.Dv;
  return os.str();
}

const std::vector<std::string>& defaultShapes() {
  static const std::vector<std::string> shapes = {
      "1,8,2,1,2053,80,96", "1,8,8,1,2048,64,64",    "1,4,2,32,65,32,32",
      "1,6,2,1,2053,80,96", "1,32,8,1,4096,128,128", "1,32,8,512,512,128,128",
  };
  return shapes;
}

const char* workloadName(Workload w) {
  return w == Workload::Gemm ? "gemm" : "attention";
}

std::string ShapeSpec::text() const {
  if (workload == Workload::Gemm)
    return std::to_string(gemm.M) + "," + std::to_string(gemm.N) + "," + std::to_string(gemm.K);
  return shapeText(attention);
}

std::string ShapeSpec::fields() const {
  return workload == Workload::Gemm ? "M,N,K" : "B,Hq,Hkv,Q,K,D,Dv";
}

std::optional<std::string> parseGemmShape(const std::string& text, GemmShape& out) {
  if (auto e = parseFields(text, {"M", "N", "K"}, {&out.M, &out.N, &out.K})) return e;
  const double elements = double(out.M) * out.K + double(out.K) * out.N + double(out.M) * out.N;
  if (elements > double(int64_t{1} << 30)) return "shape '" + text + "' needs more than 2^30 elements of A, B and C";
  return std::nullopt;
}

const std::vector<std::string>& defaultGemmShapes() {
  static const std::vector<std::string> shapes = {"512,512,512", "1,4096,4096", "64,2048,256"};
  return shapes;
}

std::optional<std::string> parseShapeSpec(Workload w, const std::string& text, ShapeSpec& out) {
  out = ShapeSpec{};
  out.workload = w;
  return w == Workload::Gemm ? parseGemmShape(text, out.gemm) : parseShape(text, out.attention);
}

ShapeSpec Problem::spec() const {
  ShapeSpec s;
  s.workload = workload;
  s.attention = shape;
  s.gemm = gemm;
  return s;
}

double Problem::flops() const {
  if (workload == Workload::Gemm) return 2.0 * gemm.M * gemm.N * double(gemm.K);
  const Shape& s = shape;
  return 2.0 * s.B * s.Hq * s.Q * s.K * double(s.D + s.Dv);
}

double Problem::kvBytes() const {
  if (workload == Workload::Gemm)
    return 4.0 * double(gemm.M) * gemm.K + (b_elem == KvElem::F32 ? 4.0 : 2.0) * double(gemm.K) * gemm.N;
  const Shape& s = shape;
  return (kv_elem == KvElem::F32 ? 4.0 : 2.0) * s.B * s.Hkv * s.K * double(s.D + s.Dv);
}

AttentionArgs Problem::args(float* o) const {
  AttentionArgs a;
  a.q = q.data();
  a.k = k.data();
  a.v = v.data();
  a.o = o;
  a.B = shape.B, a.Hq = shape.Hq, a.Hkv = shape.Hkv, a.Q = shape.Q, a.K = shape.K, a.D = shape.D, a.Dv = shape.Dv;
  a.scale = scale;
  a.causal = causal;
  if (kv_elem != KvElem::F32) {  // the 16-bit bits of the same values
    a.k16 = k16.data();
    a.v16 = v16.data();
    a.kv = kv_elem == KvElem::BF16 ? KvStorage::BF16 : KvStorage::F16;
  }
  return a;
}

std::optional<std::string> makeProblem(const Shape& shape, bool causal, uint64_t seed, Problem& out, KvElem kv) {
  kernels::AttentionOptions options;
  options.causal = causal;
  options.kv_elem = kv;
  dsl::BuildResult built = kernels::attention(shape, options);
  if (!built) return "the attention kernel does not build for this shape:\n" + built.message();
  std::vector<host::ParamData> params;
  if (auto e = host::makeInputs(*built.kernel, seed, {}, params)) return e;
  out = Problem{};
  out.shape = shape;
  out.causal = causal;
  out.scale = kernels::attentionScale(shape, options);
  out.q = std::move(params[0].data);
  out.k = std::move(params[1].data);
  out.v = std::move(params[2].data);
  out.kv_elem = kv;
  if (kv != KvElem::F32) {
    auto bits = [&](const std::vector<float>& x, std::vector<uint16_t>& h) {
      h.resize(x.size());
      for (size_t i = 0; i < x.size(); ++i) h[i] = kv == KvElem::BF16 ? host::f32ToBf16(x[i]) : host::f32ToF16(x[i]);
    };
    bits(out.k, out.k16);
    bits(out.v, out.v16);
  }
  return std::nullopt;
}

std::optional<std::string> makeGemmProblem(const GemmShape& shape, uint64_t seed, Problem& out, KvElem b_elem) {
  dsl::BuildResult built =
      kernels::gemm(shape, kernels::defaultGemmTiles(shape), false, true, false, KvElem::F32, b_elem);
  if (!built) return "the gemm kernel does not build for this shape:\n" + built.message();
  std::vector<host::ParamData> params;
  if (auto e = host::makeInputs(*built.kernel, seed, {}, params)) return e;
  out = Problem{};
  out.workload = Workload::Gemm;
  out.gemm = shape;
  out.a = std::move(params[0].data);
  out.b = std::move(params[1].data);
  out.b_elem = b_elem;
  if (b_elem != KvElem::F32) {
    out.b16.resize(out.b.size());
    for (size_t i = 0; i < out.b.size(); ++i)
      out.b16[i] = b_elem == KvElem::BF16 ? host::f32ToBf16(out.b[i]) : host::f32ToF16(out.b[i]);
  }
  return std::nullopt;
}

std::optional<std::string> makeProblem(const ShapeSpec& spec, bool causal, uint64_t seed, Problem& out, KvElem kv,
                                       KvElem b_elem) {
  return spec.workload == Workload::Gemm ? makeGemmProblem(spec.gemm, seed, out, b_elem)
                                         : makeProblem(spec.attention, causal, seed, out, kv);
}

namespace {

void gemmReference(Problem& p) {
  const GemmShape& g = p.gemm;
  p.reference.assign(p.outputSize(), 0.0);
  p.abs_product.assign(p.outputSize(), 0.0);
  for (int64_t i = 0; i < g.M; ++i)
    for (int64_t k = 0; k < g.K; ++k) {
      const double a = p.a[i * g.K + k];
      const float* b = &p.b[k * g.N];
      double* c = &p.reference[i * g.N];
      for (int64_t j = 0; j < g.N; ++j) c[j] += a * double(b[j]);
      for (int64_t j = 0; j < g.N; ++j) p.abs_product[i * g.N + j] += std::abs(a * double(b[j]));
    }
}

}  // namespace

void computeReference(Problem& p) {
  if (p.workload == Workload::Gemm) return gemmReference(p);
  const Shape& s = p.shape;
  const int64_t group = s.Hq / s.Hkv;
  const double scale = p.scale;
  p.reference.assign(p.outputSize(), 0.0);
  std::vector<double> score(s.K), acc(s.Dv);
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.Hq; ++h) {
      const float* k = &p.k[(b * s.Hkv + h / group) * s.K * s.D];
      const float* v = &p.v[(b * s.Hkv + h / group) * s.K * s.Dv];
      for (int64_t i = 0; i < s.Q; ++i) {
        const float* q = &p.q[((b * s.Hq + h) * s.Q + i) * s.D];
        const int64_t visible = p.causal ? std::clamp<int64_t>(i + s.K - s.Q + 1, 0, s.K) : s.K;
        double mx = -INFINITY;
        for (int64_t j = 0; j < visible; ++j) {
          double dot = 0.0;
          for (int64_t d = 0; d < s.D; ++d) dot += double(q[d]) * double(k[j * s.D + d]);
          score[j] = dot * scale;
          mx = std::max(mx, score[j]);
        }
        double sum = 0.0;
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t j = 0; j < visible; ++j) {
          const double e = std::exp(score[j] - mx);
          sum += e;
          for (int64_t dv = 0; dv < s.Dv; ++dv) acc[dv] += e * double(v[j * s.Dv + dv]);
        }
        double* o = &p.reference[((b * s.Hq + h) * s.Q + i) * s.Dv];
        for (int64_t dv = 0; dv < s.Dv; ++dv) o[dv] = visible > 0 ? acc[dv] / sum : 0.0;
      }
    }
}

}  // namespace kiln::peers
