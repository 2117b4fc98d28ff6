// The kernel library (src/kernels/registry.h): request validation and its messages, the FP64
// references against the FP64 interpreter, every kernel compiled and run natively on ragged
// shapes (f64 against the reference, bitexact against strict-f32), the NaN/Inf rules of
// docs/kernels.md, attention's edge cases (K = 0, rows with no visible key, large scores,
// blocks larger than Q) and the f64_reference hook of driver::check.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "driver/check.h"
#include "driver/compile.h"
#include "host/data.h"
#include "host/isa.h"
#include "host_isa.h"
#include "interp/interp.h"
#include "kernels/registry.h"
#include "plan/knobs.h"

namespace kiln::kernels {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

LibraryRequest req(std::string name, std::string shape, std::map<std::string, std::string> options = {}) {
  return LibraryRequest{std::move(name), std::move(shape), std::move(options)};
}

std::string describe(const LibraryRequest& r) {
  std::string s = r.name + " --shape " + r.shape;
  for (const auto& [k, v] : r.options) s += " --" + k + (v.empty() ? "" : " " + v);
  return s;
}

std::unique_ptr<ir::Kernel> build(const LibraryRequest& r) {
  std::unique_ptr<ir::Kernel> k;
  auto err = buildLibraryKernel(r, k);
  EXPECT_FALSE(err) << describe(r) << ": " << *err;
  return k;
}

// The index of the kernel's (single) output parameter.
size_t outputIndex(const ir::Kernel& k) {
  return static_cast<size_t>(k.outputs().at(0)->index);
}

// Compiles with default knobs and runs natively on `params` (inside guard zones).
std::vector<host::ParamData> runNative(const ir::Kernel& k, std::vector<host::ParamData> params) {
  plan::Knobs knobs;
  driver::Compilation c;
  auto err = driver::compile(k, knobs, c, driver::Stage::Obj);
  EXPECT_FALSE(err) << *err;
  if (err) return params;
  std::unique_ptr<runtime::LoadedKernel> loaded;
  err = driver::load(c.object, k, knobs.isa, 1, loaded);
  EXPECT_FALSE(err) << *err;
  if (err) return params;
  err = driver::run(*loaded, params, /*guarded=*/true);
  EXPECT_FALSE(err) << *err;
  return params;
}

// ---- requests and their errors ----

TEST(Library, ListsEveryKernel) {
  std::vector<std::string> names;
  for (const LibraryKernelInfo& k : libraryKernels()) {
    names.push_back(k.name);
    EXPECT_FALSE(k.shape_fields.empty());
    EXPECT_FALSE(k.summary.empty());
  }
  EXPECT_EQ(names, (std::vector<std::string>{"attention", "gemm", "softmax", "rmsnorm", "layernorm", "swiglu", "rope",
                                             "gelu"}));
}

TEST(Library, BadRequestsAreErrorsNamingTheParameter) {
  struct Bad {
    LibraryRequest request;
    std::string message;  // a substring of the error
  };
  const Bad cases[] = {
      {req("attention", "1,6,4,1,16,8,8"), "attention: Hq=6 is not a multiple of Hkv=4 (--shape B,Hq,Hkv,Q,K,D,Dv)"},
      {req("attention", "1,8,2,1,16,0,8"), "attention: D=0 must be at least 1"},
      {req("attention", "1,8,2,1,16,8,0"), "Dv=0 must be at least 1"},
      {req("attention", "0,8,2,1,16,8,8"), "B=0 must be at least 1"},
      {req("attention", "1,8,2,0,16,8,8"), "Q=0 must be at least 1"},
      {req("attention", "1,8,2,1,-1,8,8"), "K=-1 must be at least 0"},
      {req("attention", "1,8,0,1,16,8,8"), "Hkv=0 must be at least 1"},
      {req("attention", "1,8,2,1,16,8"), "--shape '1,8,2,1,16,8' has 6 fields; expected 7: B,Hq,Hkv,Q,K,D,Dv"},
      {req("attention", "1,8,2,1,16,8,8,1"), "has 8 fields; expected 7"},
      {req("attention", ""), "has 0 fields; expected 7"},
      {req("attention", "1,8,2,1,16,8,q"), "Dv='q' is not an integer"},
      {req("attention", "1,8,2,1,16,8,1.5"), "Dv='1.5' is not an integer"},
      {req("attention", "1,8,2,1,99999999999,8,8"), "K=99999999999 is too large"},
      {req("attention", "1,8,2,1,16,8,8", {{"block", "129x16"}}), "--block BQ=129 is out of range; legal: 1..128"},
      {req("attention", "1,8,2,1,16,8,8", {{"block", "1x1025"}}), "--block BK=1025 is out of range; legal: 1..1024"},
      {req("attention", "1,8,2,1,16,8,8", {{"block", "0x16"}}), "--block BQ=0 is out of range"},
      {req("attention", "1,8,2,1,16,8,8", {{"block", "64x128"}}), "BQ*BK=8192 exceeds 4096"},
      {req("attention", "1,8,2,1,16,8,8", {{"block", "4by16"}}), "--block '4by16' is not BQxBK"},
      {req("attention", "1,8,2,1,16,8,8", {{"mask", "upper"}}), "--mask 'upper' is not one of causal|none"},
      {req("attention", "1,8,2,1,16,8,8", {{"scale", "inf"}}), "--scale 'inf' is not a finite number"},
      {req("attention", "1,8,2,1,16,8,8", {{"eps", "1e-5"}}),
       "option --eps does not apply to attention (its options: --block, --mask, --scale, --heads, --fma, --order, "
       "--split, --merge-columns, --lanes, --qk, --kv-cache, --capacity, --page, --pages, --varlen, --kv-dtype, "
       "--out-dtype)"},
      {req("attention", "1,8,2,1,16,8,8", {{"order", "bf16_dot"}}),
       "attention: --order 'bf16_dot' is not one of ascending|bf16_pairs"},
      {req("attention", "1,8,2,1,16,8,8", {{"order", "bf16_pairs"}, {"fma", "fused"}}),
       "attention: --fma does not apply with --order bf16_pairs"},
      {req("attention", "1,8,8,1,16,16,16", {{"order", "bf16_pairs"}, {"qk", "dot"}}),
       "attention: --qk dot (the partitions(16) order) and --order bf16_pairs are two orders of q.k^T"},
      {req("softmax", "3,5000", {{"parts", "1"}}),
       "softmax: --parts '1' is not a number of parts per row >= 2, auto or off"},
      {req("softmax", "3,500", {{"parts", "2"}}),
       "softmax: --parts needs rows of more than one column chunk (500 columns, chunks of 1024)"},
      {req("softmax", "3,5000", {{"parts", "2"}, {"runtime-rows", ""}}),
       "softmax: --parts needs a static row count (not with --runtime-rows)"},
      {req("softmax", "3,5000", {{"passes", "4"}}), "softmax: --passes '4' is not one of 2|3|auto"},
      {req("softmax", "3,500", {{"passes", "3"}}),
       "softmax: --passes 3 needs rows of more than one column chunk (500 columns are one tile)"},
      {req("softmax", "3,5000", {{"passes", "3"}, {"parts", "2"}}),
       "softmax: --passes 3 and --parts are two ways through a row; choose one"},
      {req("attention", "1,8,2,1,300,16,24", {{"merge-columns", "4"}, {"split", "off"}}),
       "attention: --merge-columns needs a split"},
      {req("attention", "1,8,2,1,300,16,24", {{"merge-columns", "25"}, {"split", "3"}}),
       "attention: --merge-columns '25' is not a number of value columns 1..24 (Dv), auto or off"},
      {req("attention", "1,8,2,1,16,8,8", {{"kv-dtype", "fp8"}}), "--kv-dtype 'fp8' is not one of f32|f16|bf16"},
      {req("gemm", "4,4,4", {{"b-dtype", "half"}}), "--b-dtype 'half' is not one of f32|f16|bf16"},
      {req("rmsnorm", "4,4", {{"kv-dtype", "bf16"}}), "option --kv-dtype does not apply to rmsnorm"},
      {req("attention", "1,8,2,1,16,8,8", {{"kv-cache", "ring"}}), "--kv-cache 'ring' is not one of none|dense|paged"},
      {req("attention", "1,8,2,1,16,8,8", {{"capacity", "64"}}), "--capacity needs --kv-cache dense|paged"},
      {req("attention", "1,8,2,1,16,8,8", {{"kv-cache", "dense"}, {"page", "16"}}),
       "--page and --pages need --kv-cache paged"},
      {req("attention", "1,8,2,1,16,8,8", {{"kv-cache", "dense"}, {"heads", "separate"}}),
       "--kv-cache needs --heads stacked"},
      {req("attention", "1,8,2,1,0,8,8", {{"kv-cache", "dense"}}), "a KV cache needs a capacity K of at least 1"},
      {req("attention", "1,8,2,1,16,8,8", {{"kv-cache", "paged"}, {"page", "0"}}), "--page=0 is out of range"},
      {req("attention", "1,8,2,4,16,8,8", {{"varlen", "true"}}), "--varlen needs --kv-cache dense|paged"},
      {req("attention", "1,8,2,4,16,8,8", {{"kv-cache", "dense"}, {"varlen", "true"}, {"split", "2"}}),
       "--varlen walks every KV block of a sequence in one program; it takes no --split"},
      {req("attention", "1,8,2,4,16,8,8", {{"kv-cache", "dense"}, {"varlen", "true"}, {"lanes", "queries"}}),
       "--varlen keeps the keys along the lanes"},
      {req("attention", "1,8,2,1,16,8,8", {{"lanes", "rows"}}), "--lanes 'rows' is not one of keys|queries|auto"},
      {req("attention", "1,8,2,1,16,8,8", {{"qk", "inner"}}), "--qk 'inner' is not one of outer|dot|auto"},
      {req("attention", "1,8,2,1,16,8,8", {{"lanes", "queries"}, {"heads", "separate"}}),
       "--lanes queries needs --heads stacked"},
      {req("attention", "1,8,1,1,16,8,8", {{"block", "64x64"}}), "512 rows x 64 keys exceeds 16384"},
      {req("attention", "1,8,2,1,16,8,8", {{"heads", "all"}}), "--heads 'all' is not one of stacked|separate"},
      {req("attention", "1,8,2,1,16,8,8", {{"fma", "yes"}}), "--fma 'yes' is not one of fused|unfused"},
      {req("flash", "1"), "unknown kernel 'flash'; the library has: attention, gemm"},
      {req("gemm", "0,4,4"), "gemm: M=0 must be at least 1 (--shape M,N,K)"},
      {req("gemm", "4,4,-2"), "gemm: K=-2 must be at least 0"},
      {req("gemm", "4,4,4", {{"trans-b", "maybe"}}), "--trans-b takes no value"},
      {req("gemm", "4,4,4", {{"tile", "64x64"}}), "gemm: --tile '64x64' is not TMxTNxTK (e.g. 64x64x64)"},
      {req("gemm", "4,4,4", {{"tile", "8x8x8x8"}}), "--tile '8x8x8x8' is not TMxTNxTK"},
      {req("gemm", "4,4,4", {{"tile", "8x8xk"}}), "--tile '8x8xk' is not TMxTNxTK"},
      {req("gemm", "4,4,100", {{"order", "bf16_dot"}, {"tile", "4x4x40"}}),
       "with --order bf16_dot the K step of --tile must be a multiple of 32 (the order's blocks) or all of K (100), "
       "not 40"},
      {req("gemm", "4,4,100", {{"order", "bf16_pairs"}, {"tile", "4x4x33"}}),
       "with --order bf16_pairs the K step of --tile must be even (the order's pairs) or all of K (100), not 33"},
      {req("gemm", "4,4,4", {{"order", "k"}}), "--order 'k' is not one of ascending|bf16_dot|bf16_pairs"},
      {req("gemm", "4,4,4", {{"tile", "0x8x8"}}), "--tile TM=0 is out of range; legal: 1..256"},
      {req("gemm", "4,4,4", {{"tile", "8x8x2000"}}), "--tile TK=2000 is out of range; legal: 1..1024"},
      {req("gemm", "4,4,4", {{"tile", "256x128x8"}}), "--tile 256x128x8 is too large: at most 16384 outputs"},
      {req("softmax", "4,4", {{"tile", "8x8x8"}}), "option --tile does not apply to softmax"},
      {req("gemm", "4,4,4", {{"split-k", "0"}}), "gemm: --split-k '0' is not a number of K chunks 1..4096"},
      {req("gemm", "4,4,4", {{"split-k", "2"}, {"runtime-rows", ""}}),
       "gemm: --split-k does not combine with --runtime-rows"},
      {req("gemm", "100000,100000,100"), "at most 268435456 are supported"},
      {req("softmax", "0,5"), "softmax: rows=0 must be at least 1 (--shape rows,cols)"},
      {req("softmax", "5,0"), "softmax: cols=0 must be at least 1"},
      {req("softmax", "5"), "softmax: --shape '5' has 1 field; expected 2: rows,cols"},
      {req("softmax", "3,4", {{"trans-b", "true"}}),
       "option --trans-b does not apply to softmax (its options: --runtime-rows, --dtype, --parts, --passes)"},
      {req("swiglu", "3,4", {{"trans-b", "true"}}),
       "option --trans-b does not apply to swiglu (its options: --runtime-rows, --dtype, --out-dtype)"},
      {req("rmsnorm", "3,4", {{"out-dtype", "f8"}}), "rmsnorm: --out-dtype 'f8' is not one of f32|f16|bf16"},
      {req("attention", "1,2,1,1,8,4,4", {{"out-dtype", "bf8"}}),
       "attention: --out-dtype 'bf8' is not one of f32|f16|bf16"},
      {req("layernorm", "3,4", {{"out-dtype", "bf16"}}), "option --out-dtype does not apply to layernorm"},
      {req("rmsnorm", "3,4", {{"runtime-rows", "yes"}}), "--runtime-rows takes no value (got 'yes')"},
      {req("rope", "3,4,8", {{"positions", "0"}}), "--positions=0 is out of range"},
      {req("rmsnorm", "4,0"), "rmsnorm: cols=0 must be at least 1"},
      {req("rmsnorm", "4,4", {{"eps", "-1"}}), "rmsnorm: --eps=-1 is out of range"},
      {req("rmsnorm", "4,4", {{"eps", "x"}}), "rmsnorm: --eps 'x' is not a finite number"},
      {req("layernorm", "0,4"), "layernorm: rows=0 must be at least 1"},
      {req("swiglu", "4,-4"), "swiglu: cols=-4 must be at least 1"},
      {req("rope", "4,2,7"), "rope: head_dim=7 must be even"},
      {req("rope", "4,2,0"), "rope: head_dim=0 must be at least 2"},
      {req("rope", "0,2,8"), "rope: tokens=0 must be at least 1"},
      {req("rope", "4,2,8", {{"style", "gptj"}}), "rope: --style 'gptj' is not one of neox|interleaved"},
      {req("rope", "4,2,8", {{"base", "1"}}), "rope: --base=1 is out of range"},
      {req("rope", "2000000,1,2"), "rope: tokens=2000000 is too large"},
      {req("gelu", "0"), "gelu: n=0 must be at least 1 (--shape n)"},
      {req("gelu", "8", {{"approx", "fast"}}), "gelu: --approx 'fast' is not one of erf|tanh"},
  };
  for (const Bad& b : cases) {
    std::unique_ptr<ir::Kernel> k;
    auto err = buildLibraryKernel(b.request, k);
    ASSERT_TRUE(err) << describe(b.request) << " should be refused";
    EXPECT_NE(err->find(b.message), std::string::npos) << describe(b.request) << "\n  got: " << *err;
    EXPECT_FALSE(k);
    std::vector<std::vector<double>> out;
    EXPECT_TRUE(libraryReference(b.request, {}, out)) << describe(b.request);
  }
}

TEST(Library, ReferenceRefusesParametersOfTheWrongSize) {
  std::vector<host::ParamData> p(2);
  std::vector<std::vector<double>> out;
  auto err = libraryReference(req("gelu", "8"), p, out);
  ASSERT_TRUE(err);
  EXPECT_NE(err->find("parameter x has 0 elements, the shape needs 8"), std::string::npos) << *err;
}

TEST(Library, AttentionDefaults) {
  // Stacked heads (default): one program per (batch, KV head, query block) whose rows are the
  // group's 4 query heads x BQ = min(64/4, Q) queries. Separate heads (the seed's kernel): one
  // program per query head, block 1x16 when Q = 1, else 4x16.
  auto decode = build(req("attention", "1,8,2,1,40,8,8"));
  auto prefill = build(req("attention", "1,8,2,9,40,8,8"));
  auto longPrefill = build(req("attention", "1,8,2,40,40,8,8"));
  auto seedDecode = build(req("attention", "1,8,2,1,40,8,8", {{"heads", "separate"}}));
  auto seedPrefill = build(req("attention", "1,8,2,9,40,8,8", {{"heads", "separate"}}));
  ASSERT_TRUE(decode && prefill && longPrefill && seedDecode && seedPrefill);
  auto domain = [](const ir::Kernel& k) { return k.root()->extents; };
  EXPECT_EQ(domain(*decode), (std::vector<int64_t>{1, 2, 1}));
  EXPECT_EQ(domain(*prefill), (std::vector<int64_t>{1, 2, 1}));
  EXPECT_EQ(domain(*longPrefill), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(domain(*seedDecode), (std::vector<int64_t>{1, 8, 1}));
  EXPECT_EQ(domain(*seedPrefill), (std::vector<int64_t>{1, 8, 3}));
  // The default is causal: the reference differs from --mask none when Q > 1.
  std::vector<host::ParamData> in;
  ASSERT_FALSE(host::makeInputs(*prefill, 1, {}, in));
  std::vector<std::vector<double>> causal, dflt, none;
  ASSERT_FALSE(libraryReference(req("attention", "1,8,2,9,40,8,8", {{"mask", "causal"}}), in, causal));
  ASSERT_FALSE(libraryReference(req("attention", "1,8,2,9,40,8,8"), in, dflt));
  ASSERT_FALSE(libraryReference(req("attention", "1,8,2,9,40,8,8", {{"mask", "none"}}), in, none));
  EXPECT_EQ(dflt[3], causal[3]);
  EXPECT_NE(dflt[3], none[3]);
}

// ---- the references agree with the FP64 interpreter ----

const std::vector<LibraryRequest>& smallRequests() {
  static const std::vector<LibraryRequest> v = {
      req("attention", "1,4,2,5,37,8,6", {{"block", "2x16"}}),
      req("attention", "2,3,3,7,23,5,4", {{"block", "3x8"}, {"mask", "none"}}),
      req("attention", "1,8,1,1,67,16,16"),
      req("attention", "1,2,1,9,4,4,4", {{"block", "4x2"}}),
      req("attention", "1,4,2,3,10,6,5", {{"block", "8x32"}, {"scale", "0.3"}, {"mask", "none"}}),
      req("attention", "1,2,1,3,0,4,4"),
      req("gemm", "13,10,21"),
      req("gemm", "5,7,3", {{"trans-b", ""}}),
      req("gemm", "3,4,0"),
      req("softmax", "7,13"),
      req("softmax", "3,1031"),
      req("rmsnorm", "5,6", {{"eps", "1e-3"}}),
      req("rmsnorm", "2,1031"),
      req("layernorm", "7,13"),
      req("layernorm", "2,1031", {{"eps", "0.5"}}),
      req("swiglu", "3,67"),
      req("rope", "17,3,10"),
      req("rope", "9,2,12", {{"style", "interleaved"}, {"base", "500000"}}),
      req("rope", "300,1,4", {{"base", "10"}}),
      req("gelu", "97"),
      req("gelu", "97", {{"approx", "tanh"}}),
  };
  return v;
}

TEST(Library, ReferencesAgreeWithTheFp64Interpreter) {
  for (const LibraryRequest& r : smallRequests()) {
    SCOPED_TRACE(describe(r));
    auto k = build(r);
    ASSERT_TRUE(k);
    std::vector<host::ParamData> in;
    ASSERT_FALSE(host::makeInputs(*k, 5, {}, in));
    std::vector<host::ParamData> scratch = in;
    interp::F64Views interp;
    auto err = interp::evaluate(*k, scratch, {interp::Mode::F64}, &interp);
    ASSERT_FALSE(err) << *err;
    std::vector<std::vector<double>> ref;
    err = libraryReference(r, in, ref);
    ASSERT_FALSE(err) << *err;
    const size_t o = outputIndex(*k);
    ASSERT_EQ(ref[o].size(), interp[o].size());
    // The kernels' f32 constants (1/sqrt 2, sqrt(2/pi), 2 pi, Taylor coefficients) differ
    // from double by ~1e-8 relative; everything else is the same function.
    double worst = 0;
    for (size_t i = 0; i < ref[o].size(); ++i)
      worst = std::max(worst, std::abs(ref[o][i] - interp[o][i]) / (1 + std::abs(ref[o][i])));
    EXPECT_LE(worst, 2e-7);
  }
}

// ---- compiled kernels against the reference, on ragged shapes ----

void expectNativePasses(const LibraryRequest& r) {
  SCOPED_TRACE(describe(r));
  auto k = build(r);
  ASSERT_TRUE(k);
  for (driver::CheckMode mode : {driver::CheckMode::F64, driver::CheckMode::Bitexact}) {
    driver::CheckOptions o;
    o.mode = mode;
    o.seed = 11;
    o.f64_reference = [&r](const std::vector<host::ParamData>& in, std::vector<std::vector<double>>& out) {
      return libraryReference(r, in, out);
    };
    o.f64_allowance = [&r](const std::vector<host::ParamData>& in, std::vector<std::vector<double>>& out) {
      return libraryAllowance(r, in, out);
    };
    driver::CheckResult res;
    auto err = driver::check(*k, plan::Knobs{}, o, res);
    ASSERT_FALSE(err) << *err;
    EXPECT_TRUE(res.pass) << (mode == driver::CheckMode::F64 ? "f64" : "bitexact") << ": max_abs_err "
                          << res.max_abs_err << ", first bad " << res.outputs.at(0).first_bad;
  }
}

TEST(LibraryNative, SmallShapes) {
  for (const LibraryRequest& r : smallRequests()) expectNativePasses(r);
}

TEST(LibraryNative, RaggedAndLargeRows) {
  // Primes, 1, sizes that are not multiples of W = 8, of the 64-element tiles or of the
  // 1024-column chunk, and rows of 8192 columns and more.
  for (const char* shape : {"1,1", "1,8193", "3,1031", "2,8192", "5,2048", "11,127", "7,1"}) {
    expectNativePasses(req("softmax", shape));
    expectNativePasses(req("rmsnorm", shape));
    expectNativePasses(req("layernorm", shape));
    expectNativePasses(req("swiglu", shape));
  }
  expectNativePasses(req("softmax", "1,16411"));
  expectNativePasses(req("layernorm", "2,9001", {{"eps", "0"}}));
  for (const char* shape : {"1", "7", "8", "65", "8193"}) {
    expectNativePasses(req("gelu", shape));
    expectNativePasses(req("gelu", shape, {{"approx", "tanh"}}));
  }
  for (const char* shape : {"1,1,1", "13,17,29", "37,20,45", "8,8,8", "1,19,67", "5,3,0"}) {
    expectNativePasses(req("gemm", shape));
    expectNativePasses(req("gemm", shape, {{"trans-b", ""}}));
  }
  // Split K: chunks of whole K steps (the last one shorter, one K step per chunk, more chunks
  // than steps), partial tiles summed in chunk order.
  expectNativePasses(req("gemm", "5,300,1000", {{"split-k", "3"}}));
  expectNativePasses(req("gemm", "13,17,29", {{"split-k", "4"}, {"tile", "8x8x8"}, {"trans-b", ""}}));
  expectNativePasses(req("gemm", "3,40,70", {{"split-k", "100"}, {"tile", "4x16x16"}}));
  for (const char* shape : {"1,1,2", "17,3,10", "5,7,6", "31,2,64"}) {
    expectNativePasses(req("rope", shape));
    expectNativePasses(req("rope", shape, {{"style", "interleaved"}}));
  }
  // Long positions: angles up to ~8000 radians still reduce exactly.
  expectNativePasses(req("rope", "8191,1,8", {{"base", "500000"}}));
}

// 16-bit storage (--kv-dtype, --a-dtype/--b-dtype, --dtype): every kernel kind, f64 against
// its reference (one unit of the type for a 16-bit output) and bit-exact against the
// interpreter, ragged shapes and KV caches included.
TEST(LibraryNative, SixteenBitStorage) {
  for (const char* t : {"bf16", "f16"}) {
    SCOPED_TRACE(t);
    expectNativePasses(req("attention", "1,8,2,1,203,80,96", {{"mask", "none"}, {"kv-dtype", t}}));
    expectNativePasses(req("attention", "2,4,2,9,67,16,24", {{"kv-dtype", t}}));
    expectNativePasses(req("attention", "1,4,2,40,65,32,32", {{"lanes", "queries"}, {"kv-dtype", t}}));
    expectNativePasses(req("attention", "1,4,4,1,70,32,32", {{"qk", "dot"}, {"kv-dtype", t}}));
    expectNativePasses(req("attention", "2,4,1,3,37,8,8", {{"heads", "separate"}, {"kv-dtype", t}}));
    expectNativePasses(req("attention", "2,4,2,1,300,64,64", {{"kv-cache", "dense"}, {"kv-dtype", t}}));
    expectNativePasses(req("attention", "3,4,2,9,100,32,32",
                           {{"kv-cache", "paged"}, {"page", "32"}, {"varlen", ""}, {"kv-dtype", t}}));
    expectNativePasses(req("gemm", "13,17,29", {{"b-dtype", t}}));
    expectNativePasses(req("gemm", "37,20,45", {{"a-dtype", t}, {"b-dtype", t}, {"trans-b", ""}}));
    // The bf16 dot order (AMX tiles where the host has them), B as K x N and N x K, K steps of 32.
    expectNativePasses(req("gemm", "37,20,100", {{"b-dtype", t}, {"order", "bf16_dot"}, {"tile", "16x16x32"}}));
    expectNativePasses(
        req("gemm", "37,20,100", {{"a-dtype", t}, {"b-dtype", t}, {"order", "bf16_dot"}, {"trans-b", ""}}));
    // Few rows, B as N x K (AMX: B's rows as the instruction's A, from the view itself where a
    // tile lies inside it; the last column tile copied).
    expectNativePasses(
        req("gemm", "5,40,64", {{"b-dtype", t}, {"order", "bf16_dot"}, {"trans-b", ""}, {"tile", "5x16x32"}}));
    // A 16-bit A's rows straight from its view where a tile lies inside it, the last row tile copied.
    expectNativePasses(req("gemm", "40,20,64", {{"a-dtype", t}, {"order", "bf16_dot"}, {"tile", "32x16x32"}}));
    // The bf16 pairs order (VDPBF16PS where the host has AVX512-BF16): K steps even, an odd K's
    // last contribution alone; B as K x N and N x K.
    expectNativePasses(req("gemm", "37,40,101", {{"a-dtype", t}, {"b-dtype", t}, {"order", "bf16_pairs"}}));
    expectNativePasses(
        req("gemm", "5,40,65", {{"b-dtype", t}, {"order", "bf16_pairs"}, {"trans-b", ""}, {"tile", "5x16x32"}}));
    for (const char* k : {"softmax", "rmsnorm", "layernorm", "swiglu"})
      expectNativePasses(req(k, "3,1031", {{"dtype", t}}));
    expectNativePasses(req("swiglu", "5,70", {{"dtype", t}, {"runtime-rows", ""}}));
    // A 16-bit output alone (--out-dtype: a GEMM's 16-bit A), and a 16-bit input to an f32 one.
    expectNativePasses(req("rmsnorm", "5,1031", {{"out-dtype", t}, {"runtime-rows", ""}}));
    expectNativePasses(req("swiglu", "5,70", {{"out-dtype", t}}));
    expectNativePasses(req("rmsnorm", "3,100", {{"dtype", t}, {"out-dtype", "f32"}}));
    // attention's o alone, written by a split decode's merge, by packed queries, by a causal prefill.
    expectNativePasses(req("attention", "1,8,2,1,300,32,48", {{"out-dtype", t}, {"split", "4"}}));
    expectNativePasses(req("attention", "3,4,2,9,100,32,32",
                           {{"kv-cache", "dense"}, {"varlen", ""}, {"mask", "causal"}, {"out-dtype", t}}));
    expectNativePasses(req("attention", "2,4,2,17,33,16,16", {{"mask", "causal"}, {"out-dtype", t}, {"kv-dtype", t}}));
    expectNativePasses(req("rope", "17,3,10", {{"dtype", t}}));
    expectNativePasses(req("gelu", "65", {{"dtype", t}}));
  }
  auto k = build(req("attention", "1,8,2,1,64,16,16", {{"kv-dtype", "bf16"}}));
  ASSERT_TRUE(k);
  EXPECT_EQ(k->params[1]->type.elem, ir::Elem::BF16);
  EXPECT_EQ(k->params[2]->type.elem, ir::Elem::BF16);
  EXPECT_EQ(k->params[0]->type.elem, ir::Elem::F32);
  auto ao = build(req("attention", "1,8,2,1,64,16,16", {{"out-dtype", "f16"}}));
  ASSERT_TRUE(ao);
  EXPECT_EQ(ao->params[1]->type.elem, ir::Elem::F32);  // k
  EXPECT_EQ(ao->params[3]->type.elem, ir::Elem::F16);  // o
  auto n = build(req("rmsnorm", "4,64", {{"out-dtype", "bf16"}}));
  ASSERT_TRUE(n);
  EXPECT_EQ(n->params[0]->type.elem, ir::Elem::F32);   // x
  EXPECT_EQ(n->params[2]->type.elem, ir::Elem::BF16);  // y
}

TEST(LibraryNative, AttentionEdgeCases) {
  expectNativePasses(req("attention", "1,2,1,3,0,4,4"));                        // K = 0: zeros
  expectNativePasses(req("attention", "1,2,1,9,4,4,4", {{"block", "4x2"}}));    // Q > K: rows with no key
  expectNativePasses(req("attention", "1,8,2,1,37,8,8", {{"block", "4x16"}}));  // BQ > Q
  expectNativePasses(req("attention", "1,8,2,3,67,8,8", {{"block", "8x32"}}));
  expectNativePasses(req("attention", "1,3,1,5,17,3,2", {{"block", "1x1"}}));
  expectNativePasses(req("attention", "1,2,2,2,5,4,4", {{"block", "2x1024"}}));  // BK > K
  expectNativePasses(req("attention", "1,4,4,6,6,7,9", {{"mask", "none"}, {"scale", "-2.5"}}));
  expectNativePasses(req("attention", "1,2,1,1,40,4096,8"));  // wide heads: default BK shrinks
}

// --lanes queries: the queries along the lanes (scores [g, n, m]). Same IR results as the keys
// layout for the same blocks (dims are named), on every edge case; auto picks it only for
// prefill with enough queries and a ragged K, or one query head per KV head.
TEST(LibraryNative, AttentionQueriesInLanes) {
  auto lanes = [](const LibraryRequest& r) {
    std::map<std::string, std::string> c;
    EXPECT_FALSE(libraryChoices(r, c));
    return c["lanes"] + " " + c["block"];
  };
  EXPECT_EQ(lanes(req("attention", "1,4,2,32,65,32,32")), "queries (library default) 32x65 (library default)");
  EXPECT_EQ(lanes(req("attention", "1,8,8,128,512,64,64")), "queries (library default) 64x64 (library default)");
  EXPECT_EQ(lanes(req("attention", "1,16,8,256,256,64,64")), "keys (library default) 32x64 (library default)");
  EXPECT_EQ(lanes(req("attention", "1,8,2,1,2053,80,96")), "keys (library default) 1x64 (library default)");
  EXPECT_EQ(lanes(req("attention", "1,4,2,32,65,32,32", {{"lanes", "keys"}})), "keys (given) 32x80 (library default)");
  // The bf16 pairs order: keys (p a splat, made bf16 words once), unless queries are asked for.
  EXPECT_EQ(lanes(req("attention", "1,4,2,32,65,32,32", {{"order", "bf16_pairs"}})),
            "keys (library default) 32x80 (library default)");
  EXPECT_EQ(lanes(req("attention", "1,8,8,128,512,64,64", {{"order", "bf16_pairs"}})),
            "keys (library default) 64x64 (library default)");
  EXPECT_EQ(lanes(req("attention", "1,4,2,32,65,32,32", {{"order", "bf16_pairs"}, {"lanes", "queries"}})),
            "queries (given) 32x65 (library default)");
  const std::map<std::string, std::string> q = {{"lanes", "queries"}};
  auto with = [](std::map<std::string, std::string> a, const std::map<std::string, std::string>& b) {
    a.insert(b.begin(), b.end());
    return a;
  };
  expectNativePasses(req("attention", "1,2,1,3,0,4,4", q));                                  // K = 0
  expectNativePasses(req("attention", "1,2,1,9,4,4,4", with(q, {{"block", "4x2"}})));        // rows with no key
  expectNativePasses(req("attention", "2,6,3,37,101,40,24", with(q, {{"block", "33x7"}})));  // ragged everything
  expectNativePasses(req("attention", "1,4,4,70,33,16,48", with(q, {{"mask", "none"}})));
  expectNativePasses(req("attention", "1,8,2,40,300,8,8", with(q, {{"split", "3"}})));  // split KV
  // The same blocks in both layouts: identical bits.
  for (const char* shape : {"1,4,2,32,65,32,32", "2,6,3,37,101,40,24"}) {
    SCOPED_TRACE(shape);
    std::vector<std::vector<float>> outs;
    for (const char* l : {"keys", "queries"}) {
      auto k = build(req("attention", shape, {{"lanes", l}, {"block", "16x32"}}));
      ASSERT_TRUE(k);
      std::vector<host::ParamData> in;
      ASSERT_FALSE(host::makeInputs(*k, 3, {}, in));
      outs.push_back(runNative(*k, in).at(outputIndex(*k)).data);
    }
    ASSERT_EQ(outs[0].size(), outs[1].size());
    EXPECT_EQ(std::memcmp(outs[0].data(), outs[1].data(), 4 * outs[0].size()), 0);
  }
}

// The GPU's row kernels (per-column running values across chunks, unordered_tree(16) folds):
// another IR of the same math, bit for bit against the interpreter on the CPU too, ragged
// chunks and 16-bit rows included.
TEST(LibraryNative, GpuRowKernelsOnTheCpu) {
  for (const char* shape : {"3,1025", "2,5000", "1,2048"})
    for (const char* name : {"softmax", "layernorm"}) {
      LibraryRequest r = req(name, shape);
      r.target = {true, 132};
      expectNativePasses(r);
      r.options["dtype"] = "bf16";
      expectNativePasses(r);
    }
}

// softmax's rows in parts (two phases) on the CPU: parts of several chunks with a ragged last
// one (5 chunks of 1024 in 2, 3 or 5 parts), 16-bit storage; each its own IR, checked bit for bit
// against the interpreter and against FP64.
// gemm's f64 check allows its K-term dot product's rounding bound, 2·sqrt(K)·u·(|A||B|)[i,j]:
// with K = 65536 the FP32 sums are off by more than 5e-5 + 5e-5·|ref| (and fail without it), yet
// well inside the bound; an error of ten bounds still fails.
TEST(LibraryNative, GemmLongKIsCheckedWithItsRoundingBound) {
  const LibraryRequest r = req("gemm", "4,3,65536");
  auto k = build(r);
  ASSERT_TRUE(k);
  std::vector<host::ParamData> in;
  ASSERT_FALSE(host::makeInputs(*k, 11, {}, in));
  std::vector<std::vector<double>> ref, allow;
  ASSERT_FALSE(libraryReference(r, in, ref));
  ASSERT_FALSE(libraryAllowance(r, in, allow));
  ASSERT_EQ(allow.size(), 3u);
  EXPECT_TRUE(allow[0].empty() && allow[1].empty());
  ASSERT_EQ(allow[2].size(), 12u);
  std::vector<float> got = runNative(*k, in).at(2).data;
  EXPECT_FALSE(host::compareF64(got, ref[2], 5e-5, 5e-5, ir::Elem::F32).pass);
  EXPECT_TRUE(host::compareF64(got, ref[2], 5e-5, 5e-5, ir::Elem::F32, &allow[2]).pass);
  got[5] += static_cast<float>(10 * allow[2][5]);
  EXPECT_FALSE(host::compareF64(got, ref[2], 5e-5, 5e-5, ir::Elem::F32, &allow[2]).pass);
  std::vector<std::vector<double>> none;
  ASSERT_FALSE(libraryAllowance(req("softmax", "2,3"), {}, none));
  for (const auto& v : none) EXPECT_TRUE(v.empty());
}

// A skinny GEMM (M <= 4, B as K x N) reads B's rows whole: one strip per thread, more where a
// strip's accumulators would pass half of L1; K in steps of 8. The strips run bit for bit as the
// interpreter (any tile gives the same bits).
TEST(LibraryNative, SkinnyGemmStreamsWholeRowsOfB) {
  auto tile = [](const char* shape, int64_t threads, int64_t l1, std::map<std::string, std::string> o = {}) {
    LibraryRequest r = req("gemm", shape, std::move(o));
    r.target.threads = threads;
    r.target.l1d_bytes = l1;
    std::map<std::string, std::string> c;
    EXPECT_FALSE(libraryChoices(r, c));
    return c["tile"];
  };
  EXPECT_EQ(tile("1,5632,2048", 1, 49152), "1x5632x8 (library default)");  // 22 KB of accumulators
  EXPECT_EQ(tile("1,5632,2048", 2, 49152), "1x2816x8 (library default)");
  EXPECT_EQ(tile("1,5632,2048", 1, 32768), "1x2816x8 (library default)");  // past 16 KB: two strips
  EXPECT_EQ(tile("1,5632,2048", 1, 0), "1x2816x8 (library default)");      // unknown L1: 32 KiB
  EXPECT_EQ(tile("4,5632,2048", 1, 49152), "4x1408x8 (library default)");
  EXPECT_EQ(tile("1,32000,2048", 3, 49152), "1x5344x8 (library default)");
  EXPECT_EQ(tile("2,100,5", 1, 49152), "2x112x5 (library default)");
  EXPECT_EQ(tile("4,512,512", 1, 49152, {{"trans-b", ""}}), "4x64x128 (library default)");  // B as N x K
  EXPECT_EQ(tile("5,512,512", 1, 49152), "5x64x128 (library default)");
  // The rows given as all of M (<= 4): the skinny rule still.
  EXPECT_EQ(tile("4,512,512", 1, 49152, {{"tile", "4"}}), "4x512x8 (rows given, the rest the library default)");
  for (int64_t threads : {1, 3}) {
    LibraryRequest r = req("gemm", "3,1000,37");
    r.target.threads = threads;
    expectNativePasses(r);
  }
}

// The CPU's tile rule past the skinny GEMM (kernels::defaultGemmTiles): up to 128 rows with M
// split evenly, 64 columns, K steps of up to 128; fewer rows where the tiles would leave a
// thread without one; the rows alone from --tile TM; 128 columns for the bf16 pairs order on
// VDPBF16PS (from 64 rows) and 128 x 512 for the bf16 dot order on AMX with B as N x K. Every
// choice gives the same bits (checked natively on two of them).
TEST(LibraryNative, GemmTilesByTheCpuRule) {
  auto tile = [](const char* shape, std::map<std::string, std::string> o = {}, int64_t threads = 1, bool dp = false,
                 bool amx = false) {
    LibraryRequest r = req("gemm", shape, std::move(o));
    r.target.threads = threads;
    r.target.dpbf16 = dp;
    r.target.amx = amx;
    std::map<std::string, std::string> c;
    EXPECT_FALSE(libraryChoices(r, c));
    return c["tile"];
  };
  EXPECT_EQ(tile("128,5632,2048"), "128x64x128 (library default)");
  EXPECT_EQ(tile("512,512,512"), "128x64x128 (library default)");
  EXPECT_EQ(tile("300,100,50"), "100x64x50 (library default)");  // 3 row tiles of 100, not 128 + 128 + 44
  EXPECT_EQ(tile("129,40,200"), "65x48x128 (library default)");
  EXPECT_EQ(tile("128,64,512", {}, 2), "64x64x128 (library default)");  // two tiles for two threads
  EXPECT_EQ(tile("128,64,512", {}, 4), "32x64x128 (library default)");
  EXPECT_EQ(tile("512,5632,2048", {{"runtime-rows", ""}, {"tile", "64"}}),
            "64x64x128 (rows given, the rest the library default)");
  EXPECT_EQ(tile("512,5632,2048", {{"tile", "2"}}), "2x128x128 (rows given, the rest the library default)");
  const std::map<std::string, std::string> pairs = {{"order", "bf16_pairs"}, {"b-dtype", "bf16"}};
  EXPECT_EQ(tile("128,5632,2048", pairs, 1, true), "128x128x128 (library default)");
  EXPECT_EQ(tile("64,5632,2048", pairs, 1, true), "64x128x128 (library default)");
  EXPECT_EQ(tile("48,5632,2048", pairs, 1, true), "48x64x128 (library default)");
  // Two threads: 64 rows' 128 columns would be one tile; 32 rows take 64 columns, four tiles.
  EXPECT_EQ(tile("64,128,256", pairs, 2, true), "32x64x128 (library default)");
  EXPECT_EQ(tile("64,256,256", pairs, 2, true), "64x128x128 (library default)");
  EXPECT_EQ(tile("128,5632,2048", pairs, 1, false), "128x64x128 (library default)");  // steps in software
  const std::map<std::string, std::string> dot = {{"order", "bf16_dot"}, {"b-dtype", "bf16"}, {"trans-b", ""}};
  EXPECT_EQ(tile("128,5632,2048", dot, 1, false, true), "128x128x512 (library default)");
  EXPECT_EQ(tile("128,5632,2048", dot, 1, false, false), "128x64x128 (library default)");
  EXPECT_EQ(tile("128,5632,100", {{"order", "bf16_dot"}}, 1, false, true), "128x64x100 (library default)");
  // Refused: rows out of range, and the rows alone for a GPU (its tiles are a block's).
  LibraryRequest bad = req("gemm", "128,64,64", {{"tile", "257"}});
  std::unique_ptr<ir::Kernel> k;
  EXPECT_EQ(buildLibraryKernel(bad, k).value_or(""), "gemm: --tile TM=257 is out of range; legal: 1..256");
  bad.options["tile"] = "64";
  bad.target.gpu = true;
  bad.target.multiprocessors = 132;
  EXPECT_EQ(buildLibraryKernel(bad, k).value_or(""),
            "gemm: --tile 64 (the rows alone) is for a CPU; on a GPU give TMxTNxTK");
  for (const char* shape : {"300,100,50", "129,40,200"}) expectNativePasses(req("gemm", shape));
}

// The bf16 pairs order on VDPBF16PS: a bf16 B's strip that several register tiles of rows read
// is kept as pair words (plan::Layout::pair_words) — K steps odd and even (an odd step's last
// row alone, +0 beside it), panels unrolled and walked by loops, a last strip ragged — bit for
// bit the interpreter's. Where the host has no AVX512-BF16 the same requests run in software.
TEST(LibraryNative, Bf16PairsPanelsOfPairWords) {
  const bool dp = host::cpuHasAvx512Bf16();
  for (auto [shape, tile] : {std::pair{"37,100,65", "37x32x34"},  // K steps 34 and 31
                             {"12,70,33", "12x48x33"},            // one odd step
                             {"30,100,200", "30x48x200"},         // K in one step
                             {"20,300,6", "20x144x6"},            // 9 chunks a row: a chunk loop
                             {"20,300,7", "20x144x7"},            // and an odd last row's loop
                             {"300,70,66", "128x48x34"}}) {       // rows at launch: A's pair one load
    for (const char* a : {"f32", "bf16"}) {
      std::map<std::string, std::string> o = {
          {"a-dtype", a}, {"b-dtype", "bf16"}, {"order", "bf16_pairs"}, {"tile", tile}};
      if (std::string(shape) == "300,70,66") o["runtime-rows"] = "";
      LibraryRequest r = req("gemm", shape, o);
      expectNativePasses(r);
      auto k = build(r);
      ASSERT_TRUE(k);
      driver::Compilation c;
      ASSERT_FALSE(driver::compile(*k, plan::Knobs{}, c, driver::Stage::Obj));
      int pairPanels = 0;
      for (const auto& phase : c.report["phases"])
        if (phase.contains("lanes") && phase["lanes"].is_object())
          for (const auto& l : phase["lanes"]["layouts"]) pairPanels += l.value("pair_words", false) ? 1 : 0;
      EXPECT_EQ(pairPanels, dp ? 1 : 0) << shape << " " << tile << " a " << a;
      const auto& code = c.report["phases"][0]["lanes"]["code_per_program"];
      EXPECT_EQ(code["predicted"], code["realized"]) << shape << " " << tile;
    }
  }
  if (!dp)
    testhost::sayNotRun("Bf16Pairs panels of pair words on VDPBF16PS",
                        "this host has no AVX512-BF16 (or KILN_HOST_WITHOUT_AVX512 is set): the software steps ran");
}

// Attention in the bf16 pairs order (--order bf16_pairs): on VDPBF16PS q and the probabilities
// are rounded to bf16 words once (ConversionKind::Bf16Words) and K's transposed pairs are
// 32-bit words, in registers (decode's few rows: the fused transpose) or a panel (prefill) —
// D even and odd (an odd D's last contribution alone), a ragged last chunk of D, ragged K
// blocks, queries in the lanes, separate heads, a split, a paged cache with packed queries —
// bit for bit the interpreter's, within the FP64 reference's allowance for the probabilities'
// rounding, and the code the plan predicts. Without AVX512-BF16 the same requests run in software.
TEST(LibraryNative, AttentionInBf16PairsOrder) {
  const bool dp = host::cpuHasAvx512Bf16();
  struct Case {
    const char* shape;
    std::map<std::string, std::string> options;
    bool fused;  // decode: K's pair words in registers
  };
  const std::vector<Case> cases = {
      {"1,8,2,1,203,80,96", {{"mask", "none"}}, true},
      {"1,6,2,1,77,33,17", {}, true},    // odd D: the last contribution alone
      {"1,12,3,1,150,72,40", {}, true},  // D = 72: a ragged last chunk of 16
      {"1,8,2,1,300,32,48", {{"split", "4"}}, true},
      {"2,4,2,9,67,16,24", {{"mask", "causal"}}, false},  // 18 rows: a panel of pair words
      {"1,4,2,40,65,32,32", {{"lanes", "queries"}}, false},
      {"2,4,1,3,37,8,8", {{"heads", "separate"}}, true},  // 4 query rows per program
      {"3,4,2,9,100,32,32", {{"kv-cache", "paged"}, {"page", "32"}, {"varlen", ""}}, true},
  };
  for (const Case& c : cases)
    for (const char* kv : {"bf16", "f32"}) {
      std::map<std::string, std::string> o = c.options;
      o["order"] = "bf16_pairs";
      o["kv-dtype"] = kv;
      LibraryRequest r = req("attention", c.shape, o);
      expectNativePasses(r);
      auto k = build(r);
      ASSERT_TRUE(k);
      driver::Compilation comp;
      ASSERT_FALSE(driver::compile(*k, plan::Knobs{}, comp, driver::Stage::Obj));
      int words = 0, pairs = 0, fused = 0;
      for (const auto& phase : comp.report["phases"]) {
        if (!phase.contains("lanes") || !phase["lanes"].is_object()) continue;
        for (const auto& cv : phase["lanes"]["conversions"]) {
          words += cv["kind"] == "bf16_words" ? 1 : 0;
          pairs += cv.value("pair_words", false) ? 1 : 0;
          fused += cv.value("pair_words", false) && cv["made"] == "in registers inside the mma (no panel)" ? 1 : 0;
        }
        const auto& code = phase["lanes"]["code_per_program"];
        EXPECT_EQ(code["predicted"], code["realized"]) << describe(r);
      }
      // Queries in the lanes: K's rows and V's are splats (a bf16 view's pairs read from it as
      // they are) and Q is transposed with its two heads as rows (not pairs of K values).
      const bool queries = c.options.count("lanes") > 0;
      EXPECT_EQ(words > 0, dp && !(queries && std::string(kv) == "bf16")) << describe(r);
      EXPECT_EQ(pairs > 0, dp && !queries) << describe(r);
      EXPECT_EQ(fused, c.fused ? pairs : 0) << describe(r);
    }
  if (!dp)
    testhost::sayNotRun("attention's bf16 pairs on VDPBF16PS",
                        "this host has no AVX512-BF16 (or KILN_HOST_WITHOUT_AVX512 is set): the software steps ran");
}

// The FP64 check of attention in the bf16 pairs order allows each output 2^-8 of its weighted
// sum of |v| (the probabilities' rounding): never more than 2^-8 max|v|, and enough that the
// compiled result passes (above) — but a result off by a few percent fails.
TEST(LibraryNative, AttentionBf16PairsAllowanceIsTheProbabilitiesRounding) {
  LibraryRequest r = req("attention", "1,8,2,1,203,80,96", {{"order", "bf16_pairs"}, {"kv-dtype", "bf16"}});
  auto k = build(r);
  ASSERT_TRUE(k);
  std::vector<host::ParamData> in;
  ASSERT_FALSE(host::makeInputs(*k, 11, {}, in));
  std::vector<std::vector<double>> allow, ref;
  ASSERT_FALSE(libraryAllowance(r, in, allow));
  ASSERT_FALSE(libraryReference(r, in, ref));
  double maxV = 0;
  for (float v : in[2].data) maxV = std::max(maxV, double(std::fabs(v)));
  ASSERT_EQ(allow[3].size(), ref[3].size());
  for (double a : allow[3]) {
    EXPECT_GT(a, 0.0);
    EXPECT_LE(a, std::ldexp(maxV, -8) * (1 + 1e-12));
  }
  std::vector<float> off(ref[3].begin(), ref[3].end());
  off[5] += static_cast<float>(0.05 * maxV);
  host::CompareResult bad = host::compareF64(off, ref[3], 5e-5, 5e-5, ir::Elem::F32, &allow[3]);
  EXPECT_FALSE(bad.pass);
  std::vector<float> near(ref[3].begin(), ref[3].end());
  host::CompareResult good = host::compareF64(near, ref[3], 5e-5, 5e-5, ir::Elem::F32, &allow[3]);
  EXPECT_TRUE(good.pass);
}

TEST(LibraryNative, SoftmaxInParts) {
  for (const char* parts : {"2", "4", "7"})
    for (const char* dtype : {"f32", "bf16"}) {
      SCOPED_TRACE(std::string(parts) + " " + dtype);
      expectNativePasses(req("softmax", "3,5000", {{"parts", parts}, {"dtype", dtype}}));
    }
}

// softmax in three passes (the max, the sum of exps against it, the write) on the CPU and in the
// GPU's per-column form run on the CPU: ragged last chunks, a row of one chunk and a half, 16-bit
// storage; its own IR, checked bit for bit and against FP64.
TEST(LibraryNative, SoftmaxInThreePasses) {
  for (const char* shape : {"3,5000", "2,1537", "1,4097"})
    for (bool gpu : {false, true})
      for (const char* dtype : {"f32", "f16"}) {
        LibraryRequest r = req("softmax", shape, {{"passes", "3"}, {"dtype", dtype}});
        if (gpu) r.target = {true, 132};
        if (gpu && std::string(shape) == "2,1537") continue;  // one padded tile on a GPU: no passes
        SCOPED_TRACE(std::string(shape) + (gpu ? " gpu " : " cpu ") + dtype);
        expectNativePasses(r);
      }
}

// A split's merge in programs of a few value columns recomputes each row's factors in the same
// order: the same bits as one program per row block (a ragged last column chunk, a KV cache).
TEST(LibraryNative, SplitMergeByColumnsGivesTheSameBits) {
  for (auto [shape, extra] : std::vector<std::pair<std::string, std::map<std::string, std::string>>>{
           {"1,8,2,1,300,16,24", {}}, {"2,4,1,3,200,8,20", {{"kv-cache", "dense"}, {"mask", "causal"}}}}) {
    SCOPED_TRACE(shape);
    std::vector<std::vector<float>> outs;
    for (const char* mc : {"off", "7", "8"}) {
      auto opts = extra;
      opts.insert({{"split", "3"}, {"merge-columns", mc}, {"mask", "none"}});
      auto k = build(req("attention", shape, opts));
      ASSERT_TRUE(k);
      std::vector<host::ParamData> in;
      ASSERT_FALSE(host::makeInputs(*k, 4, {}, in));
      for (auto& p : in)
        for (int64_t& x : p.ints) x = std::max<int64_t>(0, std::min<int64_t>(x, 200));  // lengths in [0, K]
      outs.push_back(runNative(*k, in).at(outputIndex(*k)).data);
      expectNativePasses(req("attention", shape, opts));
    }
    EXPECT_EQ(std::memcmp(outs[0].data(), outs[1].data(), 4 * outs[0].size()), 0);
    EXPECT_EQ(std::memcmp(outs[0].data(), outs[2].data(), 4 * outs[0].size()), 0);
  }
}

TEST(LibraryNative, AttentionZeroKeysAndMaskedRowsGiveZeros) {
  {
    auto k = build(req("attention", "1,2,1,3,0,4,4"));
    ASSERT_TRUE(k);
    std::vector<host::ParamData> in;
    ASSERT_FALSE(host::makeInputs(*k, 0, {}, in));
    in[3].data.assign(in[3].data.size(), 7.0f);  // the kernel must overwrite every output
    auto got = runNative(*k, in);
    for (float x : got[3].data) EXPECT_EQ(x, 0.0f);
  }
  {
    // Q = 9 > K = 4, causal: query row i sees keys j <= i - 5, so rows 0..4 see none.
    const LibraryRequest r = req("attention", "1,2,1,9,4,4,4", {{"block", "4x2"}});
    auto k = build(r);
    ASSERT_TRUE(k);
    std::vector<host::ParamData> in;
    ASSERT_FALSE(host::makeInputs(*k, 0, {}, in));
    auto got = runNative(*k, in);
    for (int h = 0; h < 2; ++h)
      for (int i = 0; i < 9; ++i)
        for (int e = 0; e < 4; ++e) {
          const float x = got[3].data[(h * 9 + i) * 4 + e];
          if (i < 5) {
            EXPECT_EQ(x, 0.0f) << h << " " << i;
          } else {
            EXPECT_NE(x, 0.0f) << h << " " << i;
          }
        }
  }
}

// Scores of order 1e6 (exact in f32: integer inputs): exp(1e6) overflows, the online softmax
// never computes it.
TEST(LibraryNative, AttentionLargeScoresDoNotOverflow) {
  const LibraryRequest r = req("attention", "1,2,1,7,50,16,16", {{"mask", "none"}, {"block", "4x16"}});
  auto k = build(r);
  ASSERT_TRUE(k);
  std::vector<host::ParamData> in;
  ASSERT_FALSE(host::makeInputs(*k, 3, {}, in));
  for (int p = 0; p < 2; ++p)
    for (float& x : in[p].data) x = 64.0f * std::round(x * 4.0f);  // integers in [-256, 256]
  std::vector<std::vector<double>> ref;
  ASSERT_FALSE(libraryReference(r, in, ref));
  auto got = runNative(*k, in);
  double maxScore = 0;
  for (int i = 0; i < 16; ++i) maxScore = std::max(maxScore, std::abs(double(in[0].data[i]) * in[1].data[i]));
  EXPECT_GT(maxScore, 1e3);
  for (float x : got[3].data) ASSERT_TRUE(std::isfinite(x));
  host::CompareResult c = host::compareF64(got[3].data, ref[3]);
  EXPECT_TRUE(c.pass) << "first bad " << c.first_bad << " max_abs_err " << c.max_abs_err;
}

// ---- NaN and Inf (docs/kernels.md, "NaN and Inf") ----

struct Poisoned {
  std::vector<host::ParamData> in, got;
  std::vector<double> ref;
};

// Runs `r` natively on its seed-0 inputs edited by `poison`; the result must match the
// reference class for class (NaN as NaN, ±inf as ±inf) and within tolerance elsewhere.
Poisoned runPoisoned(const LibraryRequest& r, const std::function<void(std::vector<host::ParamData>&)>& poison) {
  Poisoned p;
  auto k = build(r);
  if (!k) return p;
  EXPECT_FALSE(host::makeInputs(*k, 0, {}, p.in));
  poison(p.in);
  std::vector<std::vector<double>> ref;
  auto err = libraryReference(r, p.in, ref);
  EXPECT_FALSE(err) << *err;
  const size_t o = outputIndex(*k);
  p.ref = ref[o];
  p.got = runNative(*k, p.in);
  host::CompareResult c = host::compareF64(p.got[o].data, p.ref);
  EXPECT_TRUE(c.pass) << describe(r) << ": first bad " << c.first_bad << " got "
                      << (c.first_bad >= 0 ? p.got[o].data[c.first_bad] : 0.0f) << " ref "
                      << (c.first_bad >= 0 ? p.ref[c.first_bad] : 0.0);
  return p;
}

int64_t countNaN(const std::vector<double>& v) {
  int64_t n = 0;
  for (double x : v) n += std::isnan(x);
  return n;
}

TEST(LibraryNaN, AttentionRules) {
  // B=1 Hq=4 Hkv=2 Q=5 K=37 D=8 Dv=6, causal: row i sees keys j <= i + 32. Heads 0,1 read KV head 0.
  const LibraryRequest r = req("attention", "1,4,2,5,37,8,6", {{"block", "2x16"}});
  auto at = [](int h, int i, int e) { return (h * 5 + i) * 6 + e; };
  {  // NaN in q of head 1, row 2: that row, every column, is NaN; nothing else.
    Poisoned p = runPoisoned(r, [](auto& in) { in[0].data[(1 * 5 + 2) * 8 + 3] = kNaN; });
    for (int e = 0; e < 6; ++e) EXPECT_TRUE(std::isnan(p.ref[at(1, 2, e)]));
    EXPECT_EQ(countNaN(p.ref), 6);
  }
  {  // NaN in k at key 34 of KV head 0: visible to rows 2..4 of heads 0 and 1 only.
    Poisoned p = runPoisoned(r, [](auto& in) { in[1].data[34 * 8 + 0] = kNaN; });
    for (int h = 0; h < 2; ++h)
      for (int i = 0; i < 5; ++i) EXPECT_EQ(std::isnan(p.ref[at(h, i, 0)]), i >= 2) << h << " " << i;
    EXPECT_EQ(countNaN(p.ref), 2 * 3 * 6);
  }
  {  // NaN in v at key 36 of KV head 1, column 2: every row of heads 2 and 3 reads it (a masked
     // key enters with weight 0, and 0 * NaN = NaN), in column 2 only.
    Poisoned p = runPoisoned(r, [](auto& in) { in[2].data[(37 + 36) * 6 + 2] = kNaN; });
    for (int h = 2; h < 4; ++h)
      for (int i = 0; i < 5; ++i) EXPECT_TRUE(std::isnan(p.ref[at(h, i, 2)]));
    EXPECT_EQ(countNaN(p.ref), 2 * 5);
  }
  {  // +inf in v at a key every row sees: +inf in that column (weights are > 0).
    Poisoned p = runPoisoned(r, [](auto& in) { in[2].data[3 * 6 + 1] = kInf; });
    for (int h = 0; h < 2; ++h)
      for (int i = 0; i < 5; ++i) EXPECT_EQ(p.ref[at(h, i, 1)], INFINITY);
  }
  // ±inf in q or k: whatever IEEE makes of the scores, kernel and reference agree.
  runPoisoned(r, [](auto& in) { in[0].data[0] = kInf; });
  runPoisoned(r, [](auto& in) { in[0].data[9] = -kInf; });
  runPoisoned(r, [](auto& in) { in[1].data[8 * 20 + 1] = -kInf; });
  runPoisoned(r, [](auto& in) {
    for (int d = 0; d < 8; ++d) in[1].data[5 * 8 + d] = kInf;
  });
  {  // Causal, block 2x2, Q = K = 8: the program of rows q0, q0+1 visits keys [0, q0 + 2). NaN in
     // v at key 5, column 1 reaches rows 4..7 (row 4 with weight 0), not rows 0..3, whose
     // programs stop before key 5's block.
    const LibraryRequest c = req("attention", "1,2,1,8,8,4,4", {{"block", "2x2"}});
    Poisoned p = runPoisoned(c, [](auto& in) { in[2].data[5 * 4 + 1] = kNaN; });
    for (int h = 0; h < 2; ++h)
      for (int i = 0; i < 8; ++i) EXPECT_EQ(std::isnan(p.got[3].data[(h * 8 + i) * 4 + 1]), i >= 4) << h << " " << i;
    EXPECT_EQ(countNaN(p.ref), 2 * 4);
  }
  // A row with no visible key stays 0 (Q > K) as long as v is finite; a score of -inf acts
  // like a masked key.
  runPoisoned(req("attention", "1,2,1,9,4,4,4", {{"block", "4x2"}}), [](auto& in) { in[1].data[0] = kNaN; });
}

TEST(LibraryNaN, RowKernelsAndElementwise) {
  for (const char* shape : {"6,13", "6,1031"}) {
    // softmax: a NaN or +inf in a row makes the row NaN; -inf elements give 0; a row of
    // only -inf is NaN (0/0); -inf in a whole first chunk does not disturb the online sum.
    Poisoned s = runPoisoned(req("softmax", shape), [&](auto& in) {
      const int64_t cols = std::string(shape) == "6,13" ? 13 : 1031;
      in[0].data[1 * cols + 5] = kNaN;
      in[0].data[2 * cols + 7] = kInf;
      in[0].data[3 * cols + 2] = -kInf;
      for (int64_t c = 0; c < cols; ++c) in[0].data[4 * cols + c] = -kInf;
      for (int64_t c = 0; c < std::min<int64_t>(cols, 1024); ++c) in[0].data[5 * cols + c] = -kInf;
    });
    EXPECT_GT(countNaN(s.ref), 0);
    runPoisoned(req("rmsnorm", shape), [](auto& in) {
      in[0].data[3] = kNaN;
      in[0].data[20] = kInf;
      in[1].data[4] = kNaN;
    });
    runPoisoned(req("layernorm", shape), [](auto& in) {
      in[0].data[3] = kNaN;
      in[0].data[20] = -kInf;
      in[2].data[6] = kInf;
    });
    runPoisoned(req("swiglu", shape), [](auto& in) {
      in[0].data[1] = kNaN;
      in[0].data[2] = kInf;
      in[0].data[3] = -kInf;
      in[1].data[4] = kInf;
    });
  }
  for (const char* approx : {"erf", "tanh"}) {
    Poisoned g = runPoisoned(req("gelu", "17", {{"approx", approx}}), [](auto& in) {
      in[0].data[1] = kNaN;
      in[0].data[2] = kInf;
      in[0].data[3] = -kInf;  // -inf * 0: NaN
    });
    EXPECT_TRUE(std::isnan(g.ref[1]));
    EXPECT_EQ(g.ref[2], INFINITY);
    EXPECT_TRUE(std::isnan(g.ref[3]));
  }
  runPoisoned(req("gemm", "5,7,9"), [](auto& in) {
    in[0].data[2] = kNaN;
    in[1].data[10] = kInf;
  });
  Poisoned rope = runPoisoned(req("rope", "3,2,8"), [](auto& in) { in[0].data[(1 * 2 + 1) * 8 + 2] = kNaN; });
  EXPECT_EQ(countNaN(rope.ref), 2);  // the pair (2, 6) of token 1, head 1
}

}  // namespace
}  // namespace kiln::kernels
