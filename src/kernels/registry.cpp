// The kernel library: a table of entries (shape fields, options, legal ranges, builder,
// FP64 reference). A request is parsed and validated once into a Spec; building and the
// reference both start from the Spec, so they cannot disagree about defaults.
#include "kernels/registry.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <span>

#include "host/storage.h"
#include "kernels/attention.h"
#include "kernels/elementwise.h"
#include "kernels/gemm.h"
#include "kernels/layernorm.h"
#include "kernels/reference.h"
#include "kernels/registry_spec.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "kernels/softmax.h"

namespace kiln::kernels {

namespace library_detail {

std::string joined(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
  return s;
}

std::optional<int64_t> parseInt(std::string_view text) {
  int64_t v = 0;
  if (!text.empty() && text[0] == '+') text.remove_prefix(1);
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return v;
}

std::optional<double> parseDouble(const std::string& text) {
  if (text.empty()) return std::nullopt;
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (...) {
    return std::nullopt;
  }
  if (used != text.size()) return std::nullopt;
  return v;
}

// "--name" as the CLI spells it.
std::string opt(const std::string& name) {
  return "--" + name;
}

Error optionChoice(const LibraryRequest& r, const std::string& name, const std::vector<std::string>& choices,
                   std::string& out) {
  auto it = r.options.find(name);
  if (it == r.options.end()) return std::nullopt;
  for (const std::string& c : choices)
    if (it->second == c) {
      out = c;
      return std::nullopt;
    }
  return fmt::format("{}: {} '{}' is not one of {}", r.name, opt(name), it->second, joined(choices, "|"));
}

// A finite number within [lo, hi] (lo_open: lo itself excluded).
Error optionNumber(const LibraryRequest& r, const std::string& name, double lo, bool lo_open, double hi, double& out) {
  auto it = r.options.find(name);
  if (it == r.options.end()) return std::nullopt;
  std::optional<double> v = parseDouble(it->second);
  if (!v || !std::isfinite(*v)) return fmt::format("{}: {} '{}' is not a finite number", r.name, opt(name), it->second);
  if (*v < lo || (lo_open && *v == lo) || *v > hi)
    return fmt::format("{}: {}={} is out of range; legal: {} {} and <= {}", r.name, opt(name), it->second,
                       lo_open ? ">" : ">=", lo, hi);
  out = *v;
  return std::nullopt;
}

Error optionFlag(const LibraryRequest& r, const std::string& name, bool& out) {
  auto it = r.options.find(name);
  if (it == r.options.end()) return std::nullopt;
  const std::string& v = it->second;
  if (v.empty() || v == "true" || v == "1" || v == "on") {
    out = true;
  } else if (v == "false" || v == "0" || v == "off") {
    out = false;
  } else {
    return fmt::format("{}: {} takes no value (got '{}')", r.name, opt(name), v);
  }
  return std::nullopt;
}

// A float view's storage: --NAME f32|f16|bf16 (default `fallback`).
Error dtypeOption(const LibraryRequest& r, const std::string& name, dsl::FloatElem& out, dsl::FloatElem fallback) {
  std::string t = dsl::floatElemName(fallback);
  if (auto e = optionChoice(r, name, {"f32", "f16", "bf16"}, t)) return e;
  dsl::floatElemNamed(t, out);
  return std::nullopt;
}

}  // namespace library_detail

namespace {

using namespace library_detail;

struct ViewShape {
  std::string name;
  std::vector<int64_t> shape;
  bool output = false;
  bool integer = false;  // an integer view (lengths, tables): ParamData::ints
  bool scalar = false;   // an i64 scalar (a runtime row count), not a view
};

struct Entry {
  LibraryKernelInfo info;
  std::vector<std::string> fields;                                // shape field names, in order
  std::vector<int64_t> field_min;                                 // smallest legal value of each field
  std::vector<std::string> options;                               // accepted option names (without --)
  std::function<Error(const LibraryRequest&, Spec&)> options_fn;  // parse options, check shape relations
  std::function<std::vector<ViewShape>(const Spec&)> views;       // parameters, in kernel order
  std::function<dsl::BuildResult(const Spec&)> build;
  // outputs[i] for the output views; the parameters' data in parameter order.
  std::function<std::vector<double>(const Spec&, const std::vector<host::ParamData>&)> reference;
};

// --runtime-rows: the row count `rows` (an i64 scalar parameter after the views) comes with
// each launch; rows from it on are not written, so their reference is the initial zero.
Error runtimeRowsOption(const LibraryRequest& r, Spec& s) {
  return optionFlag(r, "runtime-rows", s.runtime_rows);
}
// The row kernels' column chunk and reduction order. CPU: whole rows up to kRowChunk columns,
// sums and maxima in ascending order. GPU (the block realization spreads a chunk over up to 256
// threads by powers of two): chunks of a power of two up to kGpuRowChunk (a row a multiple of
// 32 columns up to that stays whole; on an H200, with per-column running values, softmax
// 33x5000 took 12.1 us with chunks of 1024, 15.2 with 2048 and 22.5 with 4096, whose final folds
// take more contributions each: docs/gpu.md, "Run G"), and the reductions in unordered_tree(16)
// order, so that 16 threads per row fold a partition each (an ordered fold is one thread's chain over the whole chunk).
constexpr int64_t kGpuRowChunk = 1024;
int64_t rowChunk(const Spec& s) {
  const int64_t cols = s.shape[1];
  if (s.row_chunk > 0) return s.row_chunk;
  if (!s.target.gpu) return kRowChunk;
  if (cols % 32 == 0 && cols <= kGpuRowChunk) return cols;
  int64_t c = 32;
  while (c * 2 <= std::min(cols, kGpuRowChunk)) c *= 2;
  return c;
}
// softmax --parts N|auto|off: each row in N parts of whole chunks, two phases (softmax.h; the
// same math in another order, its own bits). auto: on a GPU, a static row count, at most a
// quarter as many rows as SMs and more than kGpuRowChunk columns: chunks of kGpuPartChunk
// columns, a part each (H200, paired, docs/gpu.md "Run I": softmax 33x5000 9.6 us against 10.6
// whole and 14.1 with 1024-column parts; 9x12345 8.9 against 14.6 whole; 64x2000 8.9 against
// 8.3 whole, so 64 rows stay whole). On a CPU auto is off (a core walks its rows whole), and
// so it is where --passes 3 is asked for (auto_parts false).
constexpr int64_t kGpuPartChunk = 256;
Error softmaxPartsOption(const LibraryRequest& r, Spec& s, bool auto_parts) {
  const int64_t rows = s.shape[0], cols = s.shape[1];
  auto it = r.options.find("parts");
  if (it == r.options.end() || it->second == "auto") {
    if (!auto_parts || !s.target.gpu || s.runtime_rows || rows * 4 > s.target.multiprocessors || cols <= kGpuRowChunk)
      return std::nullopt;
    s.row_chunk = kGpuPartChunk;
    s.row_parts = std::min((cols + kGpuPartChunk - 1) / kGpuPartChunk, kGpuPartChunk);
    return std::nullopt;
  }
  if (it->second == "off") return std::nullopt;
  std::optional<int64_t> n = parseInt(it->second);
  const int64_t chunks = (cols + rowChunk(s) - 1) / rowChunk(s);
  if (!n || *n < 2)
    return fmt::format("softmax: --parts '{}' is not a number of parts per row >= 2, auto or off", it->second);
  if (s.runtime_rows) return std::string("softmax: --parts needs a static row count (not with --runtime-rows)");
  if (chunks < 2)
    return fmt::format("softmax: --parts needs rows of more than one column chunk ({} columns, chunks of {})", cols,
                       rowChunk(s));
  s.row_parts = std::min({*n, chunks, rowChunk(s)});
  return std::nullopt;
}

// softmax on a GPU, rows not in parts: a row of at most kGpuWholeRow columns that rowChunk would
// cut into chunks (or keep whole over a count of threads that is not a power of two: cols not a
// multiple of 32) is one tile, padded to the next power of two (at least 32) up to kGpuRowChunk
// columns, else to a multiple of 256 (softmax's `width`): one exp per element where per-column
// running values over chunks take three (H100, paired, docs/gpu.md "Run Y": 1000x1000 0.68 of
// the time, 2048x2048 0.67, 64x3000 0.93, 100x100 0.93; 128x4096 1.19 and 33x5000 1.03, whose
// partitions' folds grow with the row, so rows past 3072 keep their chunks). 0: the chunks.
constexpr int64_t kGpuWholeRow = 3072;
int64_t softmaxWidth(const Spec& s) {
  const int64_t cols = s.shape[1];
  if (!s.target.gpu || s.row_parts > 0 || cols > kGpuWholeRow) return 0;
  if (cols > kGpuRowChunk) return (cols + 255) / 256 * 256;
  return cols % 32 == 0 ? 0 : std::max<int64_t>(32, std::bit_ceil(static_cast<uint64_t>(cols)));
}

// softmax's --parts and --passes 2|3|auto: rows of several chunks in two passes (a running max
// and rescaled sum, then the write) or three (the max, the sum of exps against it, the write).
// auto: three on a GPU, whose per-column running sum takes an exp an element to rescale (H100,
// paired, docs/gpu.md run AC: 0.85-0.91 of the time over 4096-20000 columns, 1000x5000 0.98),
// two on a CPU (its running sum rescales once a chunk: a third pass would only read the row
// again). Parts are a third way through a row: auto takes none where three passes are asked.
Error softmaxRowOptions(const LibraryRequest& r, Spec& s) {
  std::string passes = "auto";
  if (auto e = optionChoice(r, "passes", {"2", "3", "auto"}, passes)) return e;
  if (auto e = softmaxPartsOption(r, s, passes != "3")) return e;
  const bool chunked = s.row_parts == 0 && softmaxWidth(s) == 0 && s.shape[1] > rowChunk(s);
  if (passes == "3" && s.row_parts > 0)
    return std::string("softmax: --passes 3 and --parts are two ways through a row; choose one");
  if (passes == "3" && !chunked)
    return fmt::format("softmax: --passes 3 needs rows of more than one column chunk ({} columns are one tile)",
                       s.shape[1]);
  s.three_passes = passes == "3" || (passes == "auto" && s.target.gpu && chunked);
  return std::nullopt;
}

dsl::ReduceOrder rowOrder(const Spec& s) {
  return s.target.gpu ? dsl::unorderedTree(16) : dsl::ordered;
}

// gemm's tiles: --tile, else the target's default (with --tile TM's rows on a CPU).
GemmTiles gemmTiles(const Spec& s) {
  const GemmShape g{s.shape[0], s.shape[1], s.shape[2]};
  if (s.tiles) return *s.tiles;
  const GemmOrder order = s.bf16_dot ? GemmOrder::Bf16Dot : s.bf16_pairs ? GemmOrder::Bf16Pairs : GemmOrder::Ascending;
  GemmTiles t = s.target.gpu ? defaultGpuGemmTiles(g, s.target.multiprocessors)
                             : defaultGemmTiles(g, s.trans_b, order,
                                                {s.target.threads, s.target.l1d_bytes, s.target.dpbf16, s.target.amx},
                                                s.tile_rows);
  // The bf16 dot order completes each mma's last block of 32 with zeros: K steps of whole blocks
  // (or all of K) keep the blocks where one mma over K has them, so any tile gives its bits.
  if (s.bf16_dot && t.TK % 32 != 0 && t.TK < g.K) t.TK = std::min<int64_t>(g.K, (t.TK + 31) / 32 * 32);
  // The bf16 pairs order pairs contributions k and k+1 from k = 0: even K steps likewise.
  if (s.bf16_pairs && t.TK % 2 != 0 && t.TK < g.K) t.TK = std::min<int64_t>(g.K, t.TK + 1);
  return t;
}

// gemm's K chunks: --split-k, else the target's rule (a CPU: none).
int64_t gemmSplitK(const Spec& s) {
  if (s.split_k > 0) return s.split_k;
  if (!s.target.gpu || s.runtime_rows) return 1;
  return defaultGpuSplitK({s.shape[0], s.shape[1], s.shape[2]}, gemmTiles(s), s.target.multiprocessors);
}

// gemm --split-k N|auto|off.
Error gemmSplitOption(const LibraryRequest& r, Spec& s) {
  auto it = r.options.find("split-k");
  if (it == r.options.end() || it->second == "auto") return std::nullopt;
  if (it->second == "off") {
    s.split_k = 1;
    return std::nullopt;
  }
  std::optional<int64_t> n = parseInt(it->second);
  if (!n || *n < 1 || *n > 4096)
    return fmt::format("gemm: --split-k '{}' is not a number of K chunks 1..4096, auto or off", it->second);
  if (s.runtime_rows && *n > 1) return "gemm: --split-k does not combine with --runtime-rows";
  s.split_k = *n;
  return std::nullopt;
}

// gemm --tile TMxTNxTK: outputs per program (TM rows x TN columns) and K per step. Any tile
// gives the same bits (K is accumulated in ascending order either way); the limits keep a
// program's accumulator and operand tiles within what the planner holds per program.
constexpr int64_t kMaxTileM = 256, kMaxTileN = 16384, kMaxTileK = 1024, kMaxTileElements = kMaxGemmTileOutputs;
Error gemmTileOption(const LibraryRequest& r, Spec& s) {
  auto it = r.options.find("tile");
  if (it == r.options.end()) return std::nullopt;
  std::vector<int64_t> v;
  for (size_t from = 0;;) {  // the fields between the x's
    const size_t x = it->second.find('x', from);
    std::optional<int64_t> n =
        parseInt(std::string_view(it->second).substr(from, x == std::string::npos ? x : x - from));
    v.push_back(n.value_or(0));
    if (!n || x == std::string::npos) break;
    from = x + 1;
  }
  if (v.size() == 1 && parseInt(it->second)) {  // TM alone: the rows; the rule gives the rest
    if (v[0] < 1 || v[0] > kMaxTileM)
      return fmt::format("gemm: --tile TM={} is out of range; legal: 1..{}", v[0], kMaxTileM);
    if (s.target.gpu) return fmt::format("gemm: --tile {} (the rows alone) is for a CPU; on a GPU give TMxTNxTK", v[0]);
    s.tile_rows = v[0];
    return std::nullopt;
  }
  if (v.size() != 3 || !parseInt(it->second.substr(it->second.rfind('x') + 1)))
    return fmt::format("gemm: --tile '{}' is not TMxTNxTK (e.g. 64x64x64) or TM (rows, 1..{})", it->second, kMaxTileM);
  const int64_t limits[3] = {kMaxTileM, kMaxTileN, kMaxTileK};
  const char* names[3] = {"TM", "TN", "TK"};
  for (int d = 0; d < 3; ++d)
    if (v[d] < 1 || v[d] > limits[d])
      return fmt::format("gemm: --tile {}={} is out of range; legal: 1..{}", names[d], v[d], limits[d]);
  if (v[0] * v[1] > kMaxTileElements || v[0] * v[2] > 4 * kMaxTileElements || v[1] * v[2] > 4 * kMaxTileElements)
    return fmt::format(
        "gemm: --tile {}x{}x{} is too large: at most {} outputs (TM*TN) and {} elements of an A or B tile (TM*TK, "
        "TN*TK)",
        v[0], v[1], v[2], kMaxTileElements, 4 * kMaxTileElements);
  s.tiles = GemmTiles{v[0], v[1], v[2]};
  return std::nullopt;
}

// The row kernels' common options: --runtime-rows and --dtype; --out-dtype (default: --dtype)
// where the kernel takes it.
Error rowsOptions(const LibraryRequest& r, Spec& s) {
  if (auto e = runtimeRowsOption(r, s)) return e;
  if (auto e = dtypeOption(r, "dtype", s.io_elem)) return e;
  return dtypeOption(r, "out-dtype", s.out_elem, s.io_elem);
}
void addRowsParam(const Spec& s, std::vector<ViewShape>& v) {
  if (s.runtime_rows) v.push_back({"rows", {}, false, false, true});
}
std::vector<double> cutRows(const Spec& s, const std::vector<host::ParamData>& in, std::vector<double> y) {
  if (!s.runtime_rows) return y;
  const int64_t rowElems = static_cast<int64_t>(y.size()) / s.shape[0];
  const int64_t rows = std::clamp<int64_t>(in.back().i64, 0, s.shape[0]);
  std::fill(y.begin() + rows * rowElems, y.end(), 0.0);
  return y;
}

// Attention's FP64 reference (in: the parameters as makeInputs lays them out). With --order
// bf16_pairs the order's operands q, k and v as bf16 values (their rounding is part of the
// kernel's meaning; the probabilities' is covered by libraryAllowance). `absV`: every v taken
// as |v|, which gives each output's weighted sum of |v| (the allowance's scale).
std::vector<double> attentionReference(const Spec& s, const std::vector<host::ParamData>& in, bool absV) {
  const AttentionShape a = attentionShape(s);
  const float scale = attentionScale(a, attentionOpts(s));
  auto operand = [&](const std::vector<float>& x, bool abs) {
    std::vector<float> r = x;
    for (float& v : r) {
      if (s.bf16_pairs) v = host::roundToStorage(ir::Elem::BF16, v);
      if (abs) v = std::fabs(v);
    }
    return r;
  };
  const std::vector<float> q = operand(in[0].data, false), k = operand(in[1].data, false),
                           v = operand(in[2].data, absV);
  if (s.kv_cache == KvCache::None)
    return reference::attention(a, s.causal, scale, q, k, v, s.stack_heads ? s.block_q : 0, s.block_k);
  const bool paged = s.kv_cache == KvCache::Paged;
  const auto none = std::span<const int64_t>();
  return reference::cachedAttention(a, attentionOpts(s), scale, q, k, v, in[3].ints,
                                    paged ? std::span<const int64_t>(in[4].ints) : none,
                                    s.varlen ? std::span<const int64_t>(in[paged ? 5 : 4].ints) : none);
}

// ---- the table ----

constexpr const char* kRuntimeRowsHelp =
    "--runtime-rows   the row count comes with each launch: rows: i64 in [0, rows of --shape] after the views "
    "(rows from it on are not written); one compile serves every count";
constexpr const char* kDtypeHelp =
    "--dtype f32|f16|bf16   the storage of the input and output views: loads convert to f32 exactly, stores round "
    "to nearest even; the arithmetic is f32 either way (default f32)";
constexpr const char* kOutDtypeHelp =
    "--out-dtype f32|f16|bf16   the storage of y alone (default: --dtype), e.g. bf16 for a GEMM that takes a "
    "16-bit A";

const std::vector<Entry>& entries() {
  static const std::vector<Entry> table = [] {
    std::vector<Entry> t;
    auto rowsViews = [](std::vector<std::string> inputs, bool weight, bool bias) {
      return [=](const Spec& s) {
        const int64_t R = s.shape[0], C = s.shape[1];
        std::vector<ViewShape> v;
        for (const std::string& n : inputs) v.push_back({n, {R, C}});
        if (weight) v.push_back({"w", {C}});
        if (bias) v.push_back({"b", {C}});
        v.push_back({"y", {R, C}, true});
        addRowsParam(s, v);
        return v;
      };
    };
    auto epsOption = [](double fallback) {
      return [=](const LibraryRequest& r, Spec& s) -> Error {
        s.eps = fallback;
        if (auto e = rowsOptions(r, s)) return e;
        return optionNumber(r, "eps", 0.0, false, 1.0, s.eps);
      };
    };

    t.push_back(Entry{
        {"attention", "B,Hq,Hkv,Q,K,D,Dv",
         "--block BQxBK   queries x keys per KV block (stacked heads: BQ = 64/group rows capped at Q, BK 64 "
         "(K <= 96: one block) capped at K rounded up to 16, fewer when 64*max(D,Dv) > 16384; separate heads: "
         "1x16 when Q = 1, else "
         "4x16; BQ 1..128, BK 1..1024, BQ*BK <= 4096)\n"
         "--heads stacked|separate   query heads of one KV head as rows of one program (K/V read once per "
         "group), or one program per query head (default stacked)\n"
         "--fma fused|unfused   mma steps as one fused multiply-add rounded once, or MUL then ADD (default "
         "fused)\n"
         "--order ascending|bf16_pairs   both mmas (q.k^T, p.v) in K ascending, or in the bf16 pairs order of "
         "docs/ir.md: q, k, the probabilities p and v rounded to bf16, two products per step as AVX512-BF16's "
         "VDPBF16PS adds them (AVX-512 code on a CPU with it; elsewhere step by step, the same bits); no --fma, "
         "no --qk dot. A different, equally defined result (default ascending)\n"
         "--mask causal|none   causal is bottom-right aligned: key k is visible to query q iff k <= q + K - Q "
         "(default causal)\n"
         "--scale S   score scale (default 1/sqrt(D)), rounded to f32\n"
         "--split N|auto|off   split the KV sequence into N chunks of whole KV blocks, run as programs of "
         "their own and merged in chunk order by a second phase (stacked heads; auto: when the kernel has "
         "fewer than 16 programs, enough chunks for 16, each of at least 4 KV blocks; default auto). The "
         "chunks depend on the shape only, never on threads\n"
         "--merge-columns N|auto|off   with a split, the merge in programs of N value columns each (the "
         "same bits for any N); auto: on a GPU, enough for a program per multiprocessor (each at least 32 "
         "threads), else one program per row block (default auto)\n"
         "--lanes keys|queries|auto   what lies along the vector lanes (stacked heads): the keys of a KV "
         "block, or the queries of the block (scores [g,n,m]: K rows broadcast, Q transposed once per program, "
         "no padding for a ragged K block); auto: queries when BQ >= 32 and either the keys would pad their "
         "blocks by more than 1/8 or Hq = Hkv, never in the bf16 pairs order "
         "(default auto). Same results either way\n"
         "--qk outer|dot|auto   q.k^T in ascending D (an outer product over the keys), or in the "
         "partitions(16) order of docs/ir.md, which the lanes run as a dot product over D when D is a multiple "
         "of 16; auto: dot when a program has one score row (Hq = Hkv with one query per block) and D is a "
         "multiple of 16 (default auto). A different, equally defined result\n"
         "--kv-cache none|dense|paged   K and V as a cache of capacity K positions per sequence, with each "
         "sequence's length given at launch: lens: view<i32>[B] in [0, K] after v; the Q queries are a "
         "sequence's last Q positions (causal: bottom-right aligned per sequence). dense: k [B,Hkv,K,D]; "
         "paged: k [pages,Hkv,page,D] and block_table: view<i32>[B, ceil(K/page)] in [0, pages-1] after "
         "lens (vLLM's layout). One compile serves every length (default none)\n"
         "--capacity C   the cache's positions per sequence (default: K of --shape)\n"
         "--page P   paged: positions per page, 1..4096, a multiple of BK (BK falls to a divisor of P; "
         "default 16)\n"
         "--pages N   paged: pages in the pool (default B * ceil(K/P))\n"
         "--varlen   with --kv-cache: the queries of all sequences packed (FlashAttention's varlen): q [Q,Hq,D], o "
         "[Q,Hq,Dv] with Q their total capacity, and cu_seqlens: view<i32>[B+1] in [0, Q] ascending after lens (and "
         "block_table): sequence b's queries are rows cu[b] .. cu[b+1]-1, its last positions; one program per "
         "(token, KV head), BQ 1, no split\n"
         "--kv-dtype f32|f16|bf16   the storage of k and v (a KV cache's too): loads convert to f32 exactly, the "
         "arithmetic is f32 either way (default f32)\n"
         "--out-dtype f32|f16|bf16   the storage of o: each result rounded to nearest even (default f32)",
         "softmax(scale q.k^T) v with GQA/MQA (query head h reads KV head h / (Hq/Hkv)); online softmax over KV "
         "blocks"},
        {"B", "Hq", "Hkv", "Q", "K", "D", "Dv"},
        {1, 1, 1, 1, 0, 1, 1},
        {"block", "mask", "scale", "heads", "fma", "order", "split", "merge-columns", "lanes", "qk", "kv-cache",
         "capacity", "page", "pages", "varlen", "kv-dtype", "out-dtype"},
        attentionOptions,
        [](const Spec& s) {
          AttentionShape a = attentionShape(s);
          const bool paged = s.kv_cache == KvCache::Paged;
          std::vector<ViewShape> v = {
              {"q", s.varlen ? std::vector<int64_t>{a.Q, a.Hq, a.D} : std::vector{a.B, a.Hq, a.Q, a.D}},
              {"k", paged ? std::vector<int64_t>{s.pages, a.Hkv, s.page, a.D} : std::vector{a.B, a.Hkv, a.K, a.D}},
              {"v", paged ? std::vector<int64_t>{s.pages, a.Hkv, s.page, a.Dv} : std::vector{a.B, a.Hkv, a.K, a.Dv}}};
          if (s.kv_cache != KvCache::None) v.push_back({"lens", {a.B}, false, true});
          if (paged) v.push_back({"block_table", {a.B, (a.K + s.page - 1) / s.page}, false, true});
          if (s.varlen) v.push_back({"cu_seqlens", {a.B + 1}, false, true});
          v.push_back(
              {"o", s.varlen ? std::vector<int64_t>{a.Q, a.Hq, a.Dv} : std::vector{a.B, a.Hq, a.Q, a.Dv}, true});
          return v;
        },
        [](const Spec& s) { return attention(attentionShape(s), attentionOpts(s)); },
        [](const Spec& s, const std::vector<host::ParamData>& in) { return attentionReference(s, in, false); }});

    t.push_back(Entry{
        {"gemm", "M,N,K",
         "--trans-b   B is given as N x K (default K x N)\n--fma fused|unfused   mma steps as one fused multiply-add "
         "rounded once, or MUL then ADD (default fused)\n"
         "--order ascending|bf16_dot|bf16_pairs   the mma's order: K ascending (default), the bf16 dot order "
         "(operands rounded to bf16, each K step's tile in blocks of 32: AMX's TDPBF16PS, which AVX-512 code on an "
         "AMX host runs), or the bf16 pairs order (operands rounded to bf16, one chain over pairs of K: "
         "AVX512-BF16's VDPBF16PS, which AVX-512 code on a CPU with it runs; docs/ir.md)\n" +
             std::string(kRuntimeRowsHelp) +
             " (M: a partial last row tile runs row by row)\n"
             "--a-dtype f32|f16|bf16, --b-dtype f32|f16|bf16   the storage of A and of B (16-bit weights): loads "
             "convert to f32 exactly; C is f32 and accumulates in f32 in the same order (default f32)\n"
             "--tile TMxTNxTK|TM   outputs per program and K per step, or the rows alone with the rule's columns "
             "and K step (default on a CPU: up to 128 rows, M split evenly, x 64 columns x K steps of 128; 1x256 or "
             "2x128 for 1 or 2 rows; 128 columns in the bf16 pairs order on VDPBF16PS from 64 rows, and 128 x 512 in "
             "the bf16 dot order on AMX with --trans-b; M <= 4: strips of B read row after row); the bits do not "
             "depend on it\n"
             "--split-k N|auto|off   K in N chunks of whole K steps, each a program of its own, their partial "
             "tiles summed in chunk order by a second phase (a different, equally defined result); auto: none on a "
             "CPU, on a GPU enough for 4 blocks per SM when M <= 16 (default auto)",
         "C[M,N] = A[M,K] . B (K = 0 gives zeros); tiles up to 128x64 outputs, K steps up to 128"},
        {"M", "N", "K"},
        {1, 1, 0},
        {"trans-b", "fma", "order", "runtime-rows", "a-dtype", "b-dtype", "tile", "split-k"},
        [](const LibraryRequest& r, Spec& s) -> Error {
          if (auto e = gemmTileOption(r, s)) return e;
          std::string fma = "fused", order = "ascending";
          if (auto e = optionChoice(r, "fma", {"fused", "unfused"}, fma)) return e;
          if (auto e = optionChoice(r, "order", {"ascending", "bf16_dot", "bf16_pairs"}, order)) return e;
          s.fused = fma == "fused";
          s.bf16_dot = order == "bf16_dot";
          s.bf16_pairs = order == "bf16_pairs";
          if (s.bf16_dot && s.tiles && s.tiles->TK % 32 != 0 && s.tiles->TK < s.shape[2])
            return fmt::format(
                "gemm: with --order bf16_dot the K step of --tile must be a multiple of 32 (the order's blocks) or "
                "all of K ({}), not {}: a step's last block is completed with zeros",
                s.shape[2], s.tiles->TK);
          if (s.bf16_pairs && s.tiles && s.tiles->TK % 2 != 0 && s.tiles->TK < s.shape[2])
            return fmt::format(
                "gemm: with --order bf16_pairs the K step of --tile must be even (the order's pairs) or all of K "
                "({}), not {}: a step's last pair is completed with a zero",
                s.shape[2], s.tiles->TK);
          if (auto e = dtypeOption(r, "a-dtype", s.a_elem)) return e;
          if (auto e = dtypeOption(r, "b-dtype", s.b_elem)) return e;
          if (auto e = runtimeRowsOption(r, s)) return e;
          if (auto e = gemmSplitOption(r, s)) return e;
          return optionFlag(r, "trans-b", s.trans_b);
        },
        [](const Spec& s) {
          const int64_t M = s.shape[0], N = s.shape[1], K = s.shape[2];
          std::vector<ViewShape> v = {{"a", {M, K}},
                                      {"b", s.trans_b ? std::vector<int64_t>{N, K} : std::vector<int64_t>{K, N}},
                                      {"c", {M, N}, true}};
          addRowsParam(s, v);
          return v;
        },
        [](const Spec& s) {
          GemmShape g{s.shape[0], s.shape[1], s.shape[2]};
          return gemm(g, gemmTiles(s), s.trans_b, s.fused, s.runtime_rows, s.a_elem, s.b_elem, gemmSplitK(s),
                      s.bf16_dot, s.bf16_pairs);
        },
        [](const Spec& s, const std::vector<host::ParamData>& in) {
          // The bf16 dot order's operands are bf16 values (part of the kernel's meaning).
          auto operand = [&](const std::vector<float>& x) {
            std::vector<float> r = x;
            if (s.bf16_dot || s.bf16_pairs)
              for (float& v : r) v = host::roundToStorage(ir::Elem::BF16, v);
            return r;
          };
          return cutRows(s, in,
                         reference::gemm({s.shape[0], s.shape[1], s.shape[2]}, s.trans_b, operand(in[0].data),
                                         operand(in[1].data)));
        }});

    t.push_back(Entry{
        {"softmax", "rows,cols",
         std::string(kRuntimeRowsHelp) + "\n" + kDtypeHelp +
             "\n--parts N|auto|off   each row in N parts of whole column chunks over programs, two "
             "phases (a part's max and sum, then the merge and the output); auto: on a GPU with at most "
             "a quarter as many rows as SMs, parts of 256 columns\n--passes 2|3|auto   rows of several column chunks "
             "in two passes (running max and sum, then the write) or three (max, sum of exps, write: an exp "
             "fewer per element, a read more); auto: 3 on a GPU, else 2",
         "y[r,:] = softmax(x[r,:]) (max-subtracted, online over column chunks)"},
        {"rows", "cols"},
        {1, 1},
        {"runtime-rows", "dtype", "parts", "passes"},
        [](const LibraryRequest& r, Spec& s) -> Error {
          if (auto e = rowsOptions(r, s)) return e;
          return softmaxRowOptions(r, s);
        },
        rowsViews({"x"}, false, false),
        [](const Spec& s) {
          const int64_t width = softmaxWidth(s);
          return softmax(s.shape[0], s.shape[1], 1, width > 0 ? width : rowChunk(s), s.runtime_rows, s.io_elem,
                         rowOrder(s), s.target.gpu, s.row_parts, width, s.three_passes);
        },
        [](const Spec& s, const std::vector<host::ParamData>& in) {
          return cutRows(s, in, reference::softmax(s.shape[0], s.shape[1], in[0].data));
        }});

    t.push_back(Entry{{"rmsnorm", "rows,cols",
                       std::string("--eps E   added to the mean square (default 1e-6), rounded to f32; 0..1\n") +
                           kRuntimeRowsHelp + "\n" + kDtypeHelp + " (w stays f32)\n" + kOutDtypeHelp,
                       "y[r,c] = x[r,c] / sqrt(mean(x[r,:]^2) + eps) * w[c]"},
                      {"rows", "cols"},
                      {1, 1},
                      {"eps", "runtime-rows", "dtype", "out-dtype"},
                      epsOption(1e-6),
                      rowsViews({"x"}, true, false),
                      [](const Spec& s) {
                        return rmsnorm(s.shape[0], s.shape[1], s.eps, 1, rowChunk(s), s.runtime_rows, s.io_elem,
                                       rowOrder(s), s.out_elem);
                      },
                      [](const Spec& s, const std::vector<host::ParamData>& in) {
                        return cutRows(
                            s, in,
                            reference::rmsnorm(s.shape[0], s.shape[1], double(float(s.eps)), in[0].data, in[1].data));
                      }});

    t.push_back(Entry{
        {"layernorm", "rows,cols",
         "--eps E   added to the variance (default 1e-5), rounded to f32; 0..1\n" + std::string(kDtypeHelp) +
             " (w and b stay f32)",
         "y[r,c] = (x[r,c] - mean) / sqrt(var + eps) * w[c] + b[c] (two-pass mean and variance)"},
        {"rows", "cols"},
        {1, 1},
        {"eps", "dtype"},
        epsOption(1e-5),
        rowsViews({"x"}, true, true),
        [](const Spec& s) {
          return layernorm(s.shape[0], s.shape[1], s.eps, rowChunk(s), s.io_elem, rowOrder(s), s.target.gpu);
        },
        [](const Spec& s, const std::vector<host::ParamData>& in) {
          return reference::layernorm(s.shape[0], s.shape[1], double(float(s.eps)), in[0].data, in[1].data, in[2].data);
        }});

    t.push_back(
        Entry{{"swiglu", "rows,cols", std::string(kRuntimeRowsHelp) + "\n" + kDtypeHelp + "\n" + kOutDtypeHelp,
               "y = gate / (1 + exp(-gate)) * up (SiLU(gate) * up), gate and up [rows,cols]"},
              {"rows", "cols"},
              {1, 1},
              {"runtime-rows", "dtype", "out-dtype"},
              rowsOptions,
              rowsViews({"gate", "up"}, false, false),
              [](const Spec& s) { return swiglu(s.shape[0], s.shape[1], 64, s.runtime_rows, s.io_elem, s.out_elem); },
              [](const Spec& s, const std::vector<host::ParamData>& in) {
                return cutRows(s, in, reference::swiglu(in[0].data, in[1].data));
              }});

    t.push_back(Entry{
        {"rope", "tokens,heads,head_dim",
         "--style neox|interleaved   pairs (j, j + head_dim/2) or (2j, 2j+1) (default neox)\n"
         "--base B   frequency base, > 1 (default 10000)\n"
         "--positions N   token t at position positions[t] of a view positions: view<i32>[tokens] in [0, "
         "N-1] after y, given at launch (default: position t)\n" +
             std::string(kRuntimeRowsHelp) + "\n" + kDtypeHelp,
         "rotary embedding of x [tokens,heads,head_dim]; token t at position t, pair j rotated by t * "
         "base^(-2j/head_dim)"},
        {"tokens", "heads", "head_dim"},
        {1, 1, 2},
        {"style", "base", "positions", "runtime-rows", "dtype"},
        [](const LibraryRequest& r, Spec& s) -> Error {
          if (s.shape[2] % 2 != 0)
            return fmt::format("rope: head_dim={} must be even (--shape tokens,heads,head_dim)", s.shape[2]);
          if (s.shape[0] > kMaxRopeTokens)
            return fmt::format("rope: tokens={} is too large; legal: 1..{} (positions must stay exact in f32)",
                               s.shape[0], kMaxRopeTokens);
          std::string style = "neox";
          if (auto e = optionChoice(r, "style", {"neox", "interleaved"}, style)) return e;
          s.neox = style == "neox";
          if (auto e = rowsOptions(r, s)) return e;
          double positions = 0;
          if (auto e = optionNumber(r, "positions", 1, false, double(kMaxRopeTokens), positions)) return e;
          if (positions != std::floor(positions))
            return fmt::format("rope: --positions {} is not an integer", positions);
          s.positions = static_cast<int64_t>(positions);
          return optionNumber(r, "base", 1.0, true, 1e12, s.base);
        },
        [](const Spec& s) {
          std::vector<int64_t> x = {s.shape[0], s.shape[1], s.shape[2]};
          std::vector<ViewShape> v = {{"x", x}, {"y", x, true}};
          if (s.positions > 0) v.push_back({"positions", {s.shape[0]}, false, true});
          addRowsParam(s, v);
          return v;
        },
        [](const Spec& s) {
          return rope(s.shape[0], s.shape[1], s.shape[2], s.neox, s.base, s.positions, s.runtime_rows, s.io_elem);
        },
        [](const Spec& s, const std::vector<host::ParamData>& in) {
          std::vector<int64_t> at(static_cast<size_t>(s.shape[0]));
          std::iota(at.begin(), at.end(), 0);
          if (s.positions > 0) at = in[2].ints;
          return cutRows(s, in, reference::rope(s.shape[0], s.shape[1], s.shape[2], s.neox, s.base, in[0].data, at));
        }});

    t.push_back(Entry{
        {"gelu", "n",
         "--approx erf|tanh   exact erf form or the tanh approximation (default erf)\n" + std::string(kDtypeHelp),
         "y = 0.5 x (1 + erf(x / sqrt 2)), or the tanh form"},
        {"n"},
        {1},
        {"approx", "dtype"},
        [](const LibraryRequest& r, Spec& s) -> Error {
          std::string approx = "erf";
          if (auto e = optionChoice(r, "approx", {"erf", "tanh"}, approx)) return e;
          s.tanh_form = approx == "tanh";
          return dtypeOption(r, "dtype", s.io_elem);
        },
        [](const Spec& s) {
          return std::vector<ViewShape>{{"x", {s.shape[0]}}, {"y", {s.shape[0]}, true}};
        },
        [](const Spec& s) { return gelu(s.shape[0], 64, s.tanh_form ? GeluForm::Tanh : GeluForm::Erf, s.io_elem); },
        [](const Spec& s, const std::vector<host::ParamData>& in) {
          return reference::gelu(s.tanh_form, in[0].data);
        }});
    return t;
  }();
  return table;
}

const Entry* find(const std::string& name) {
  for (const Entry& e : entries())
    if (e.info.name == name) return &e;
  return nullptr;
}

// The parameters a reference reads: as many as the entry's views, each of its shape's size.
Error referenceSizes(const LibraryRequest& request, const Entry& e, const Spec& spec,
                     const std::vector<host::ParamData>& params) {
  const std::vector<ViewShape> views = e.views(spec);
  if (params.size() != views.size())
    return fmt::format("{}: the reference needs {} parameters, got {}", request.name, views.size(), params.size());
  for (size_t i = 0; i < views.size(); ++i) {
    size_t n = 1;
    for (int64_t d : views[i].shape) n *= size_t(d);
    if (views[i].scalar) continue;
    const size_t got = views[i].integer ? params[i].ints.size() : params[i].data.size();
    if (got != n)
      return fmt::format("{}: parameter {} has {} elements, the shape needs {}", request.name, views[i].name, got, n);
  }
  return std::nullopt;
}

Error parse(const LibraryRequest& r, const Entry*& entry, Spec& spec) {
  entry = find(r.name);
  if (!entry) {
    std::vector<std::string> names;
    for (const Entry& e : entries()) names.push_back(e.info.name);
    return fmt::format("unknown kernel '{}'; the library has: {}", r.name, joined(names, ", "));
  }
  const Entry& e = *entry;
  const std::string fields = joined(e.fields, ",");
  for (const auto& [name, value] : r.options) {
    bool known = false;
    for (const std::string& o : e.options) known = known || o == name;
    if (!known) {
      std::vector<std::string> dashed;
      for (const std::string& o : e.options) dashed.push_back(opt(o));
      return fmt::format("{}: option {} does not apply to {} ({})", r.name, opt(name), r.name,
                         dashed.empty() ? "it takes no options" : "its options: " + joined(dashed, ", "));
    }
  }
  std::vector<std::string> parts;
  for (size_t start = 0;;) {
    const size_t comma = r.shape.find(',', start);
    parts.push_back(r.shape.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (r.shape.empty()) parts.clear();
  if (parts.size() != e.fields.size())
    return fmt::format("{}: --shape '{}' has {} field{}; expected {}: {}", r.name, r.shape, parts.size(),
                       parts.size() == 1 ? "" : "s", e.fields.size(), fields);
  spec = Spec{};
  spec.target = r.target;
  for (size_t i = 0; i < parts.size(); ++i) {
    std::optional<int64_t> v = parseInt(parts[i]);
    if (!v) return fmt::format("{}: {}='{}' is not an integer (--shape {})", r.name, e.fields[i], parts[i], fields);
    if (*v < e.field_min[i])
      return fmt::format("{}: {}={} must be at least {} (--shape {})", r.name, e.fields[i], *v, e.field_min[i], fields);
    if (*v > kMaxExtent)
      return fmt::format("{}: {}={} is too large; at most {} (--shape {})", r.name, e.fields[i], *v, kMaxExtent,
                         fields);
    spec.shape.push_back(*v);
  }
  if (auto err = e.options_fn(r, spec)) return err;
  double total = 0;
  for (const ViewShape& v : e.views(spec)) {
    double n = 1;
    for (int64_t d : v.shape) n *= double(d);
    total += n;
  }
  if (total > kMaxTotalElements)
    return fmt::format("{}: --shape {} needs {:.0f} elements in its views; at most {:.0f} are supported", r.name,
                       r.shape, total, kMaxTotalElements);
  return std::nullopt;
}

}  // namespace

const std::vector<LibraryKernelInfo>& libraryKernels() {
  static const std::vector<LibraryKernelInfo> infos = [] {
    std::vector<LibraryKernelInfo> v;
    for (const Entry& e : entries()) v.push_back(e.info);
    return v;
  }();
  return infos;
}

std::optional<std::string> buildLibraryKernel(const LibraryRequest& request, std::unique_ptr<ir::Kernel>& out) {
  const Entry* e = nullptr;
  Spec spec;
  if (auto err = parse(request, e, spec)) return err;
  dsl::BuildResult r = e->build(spec);
  if (!r) return fmt::format("{}: the kernel did not build:\n{}", request.name, r.message());
  out = std::move(r.kernel);
  return std::nullopt;
}

std::optional<std::string> libraryChoices(const LibraryRequest& request, std::map<std::string, std::string>& out) {
  const Entry* e = nullptr;
  Spec spec;
  if (auto err = parse(request, e, spec)) return err;
  out.clear();
  if (e->info.name == "gemm") {
    const GemmTiles t = gemmTiles(spec);
    out["tile"] = fmt::format("{}x{}x{}{}", t.TM, t.TN, t.TK,
                              spec.tiles           ? " (given)"
                              : spec.target.gpu    ? " (library default for a GPU)"
                              : spec.tile_rows > 0 ? " (rows given, the rest the library default)"
                                                   : " (library default)");
    const int64_t k = gemmSplitK(spec);
    out["split_k"] = fmt::format("{}{}", k,
                                 spec.split_k > 0  ? " (given)"
                                 : spec.target.gpu ? " (library default for a GPU)"
                                                   : " (library default)");
    return std::nullopt;
  }
  if (e->info.name != "attention") return std::nullopt;
  auto origin = [&](const char* option) { return request.options.count(option) ? " (given)" : " (library default)"; };
  out["block"] = fmt::format("{}x{}{}", spec.block_q, spec.block_k, origin("block"));
  out["heads"] = spec.stack_heads ? "stacked" : "separate";
  out["lanes"] = std::string(spec.queries_in_lanes ? "queries" : "keys") + origin("lanes");
  out["qk"] = std::string(spec.qk_dot ? "dot" : "outer") + origin("qk");
  if (spec.kv_cache != KvCache::None)
    out["kv_cache"] = spec.kv_cache == KvCache::Dense
                          ? fmt::format("dense, capacity {}, lengths at launch", spec.shape[4])
                          : fmt::format("paged, capacity {}, {} pages of {}, lengths and block table at launch",
                                        spec.shape[4], spec.pages, spec.page);
  const int64_t nKB = (spec.shape[4] + spec.block_k - 1) / spec.block_k;
  auto split = request.options.find("split");
  const char* how = split == request.options.end() || split->second == "auto" ? " (auto)" : " (given)";
  out["split"] = spec.split_blocks == 0 ? std::string("off") + how
                                        : fmt::format("{} chunks of {} KV blocks ({} keys){}",
                                                      (nKB + spec.split_blocks - 1) / spec.split_blocks,
                                                      spec.split_blocks, spec.split_blocks * spec.block_k, how);
  if (spec.split_blocks > 0) {
    auto mc = request.options.find("merge-columns");
    const char* mhow = mc == request.options.end() || mc->second == "auto" ? " (auto)" : " (given)";
    out["merge_columns"] = spec.merge_columns == 0
                               ? fmt::format("{} (one program per row block){}", spec.shape[6], mhow)
                               : fmt::format("{} ({} programs per row block){}", spec.merge_columns,
                                             (spec.shape[6] + spec.merge_columns - 1) / spec.merge_columns, mhow);
  }
  return std::nullopt;
}

std::optional<std::string> libraryAllowance(const LibraryRequest& request, const std::vector<host::ParamData>& params,
                                            std::vector<std::vector<double>>& allowances) {
  const Entry* e = nullptr;
  Spec spec;
  if (auto err = parse(request, e, spec)) return err;
  allowances.assign(params.size(), {});
  if (request.name == "attention" && spec.bf16_pairs) {
    // The probabilities' rounding to bf16 (part of the kernel's meaning, but of f32 values the
    // reference does not have): each weight's relative error at most 2^-8, so each output within
    // 2^-8 of the weighted sum of |v| (attentionReference with |v|).
    const size_t out = params.size() - 1;
    if (auto err = referenceSizes(request, *e, spec, params)) return err;
    allowances[out] = attentionReference(spec, params, true);
    for (double& x : allowances[out]) x *= std::ldexp(1.0, -8);
    return std::nullopt;
  }
  if (request.name != "gemm") return std::nullopt;
  const GemmShape g{spec.shape[0], spec.shape[1], spec.shape[2]};
  if (params.size() < 3 || params[0].data.size() != size_t(g.M * g.K) || params[1].data.size() != size_t(g.K * g.N))
    return fmt::format("gemm: the allowance needs a [{}, {}] and b of {} elements", g.M, g.K, g.K * g.N);
  const double scale = 2.0 * std::sqrt(double(g.K)) * std::ldexp(1.0, -24);
  std::vector<double> bound = reference::gemmAbs(g, spec.trans_b, params[0].data, params[1].data);
  for (double& x : bound) x *= scale;
  allowances[2] = std::move(bound);
  return std::nullopt;
}

std::optional<std::string> libraryReference(const LibraryRequest& request, const std::vector<host::ParamData>& params,
                                            std::vector<std::vector<double>>& outputs) {
  const Entry* e = nullptr;
  Spec spec;
  if (auto err = parse(request, e, spec)) return err;
  if (auto err = referenceSizes(request, *e, spec, params)) return err;
  const std::vector<ViewShape> views = e->views(spec);
  size_t out_index = 0;
  for (size_t i = 0; i < views.size(); ++i)
    if (!views[i].scalar && views[i].output) out_index = i;
  outputs.assign(params.size(), {});
  outputs[out_index] = e->reference(spec, params);
  return std::nullopt;
}

}  // namespace kiln::kernels
