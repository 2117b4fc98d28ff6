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

#include "kernels/attention.h"
#include "kernels/elementwise.h"
#include "kernels/gemm.h"
#include "kernels/layernorm.h"
#include "kernels/reference.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "kernels/softmax.h"

namespace kiln::kernels {

namespace {

using Error = std::optional<std::string>;

// Legal ranges (docs/kernels.md). Extents are capped so that every product fits easily in
// int64; the total element count keeps the host buffers (and the FP64 reference) in memory.
constexpr int64_t kMaxExtent = int64_t(1) << 24;
constexpr double kMaxTotalElements = double(int64_t(1) << 28);
constexpr int64_t kMaxBlockQ = 128, kMaxBlockK = 1024, kMaxBlockElements = 4096;
constexpr int64_t kDefaultKvTileElements = 16384;
// Row kernels (softmax, norms) take a whole row as one tile up to this many columns, and
// loop over chunks of it beyond.
constexpr int64_t kRowChunk = 1024;
// Attention --split auto: split KV when the unsplit kernel has fewer programs than this.
constexpr int64_t kSplitPrograms = 16;

// A validated request: the shape fields and every option with its default filled in.
struct Spec {
  std::vector<int64_t> shape;
  int64_t block_q = 0, block_k = 0;  // attention
  int64_t split_blocks = 0;          // attention: KV blocks per chunk (0: no split)
  int64_t merge_columns = 0;         // attention: value columns per merge program (0: all)
  bool stack_heads = true, fused = true;
  bool queries_in_lanes = false;     // attention --lanes
  bool qk_dot = false;               // attention --qk dot: q.k^T in partitions(16)
  KvCache kv_cache = KvCache::None;  // attention --kv-cache
  int64_t page = 16, pages = 1;      // attention --page, --pages (paged)
  bool varlen = false;               // attention --varlen (packed queries)
  bool runtime_rows = false;         // softmax, rmsnorm, rope --runtime-rows
  int64_t row_parts = 0;             // softmax --parts: parts per row (0: none)
  int64_t row_chunk = 0;             // the row kernels' column chunk (0: rowChunk's rule)
  int64_t positions = 0;             // rope --positions
  bool causal = true;
  std::optional<double> scale;
  bool trans_b = false;            // gemm
  std::optional<GemmTiles> tiles;  // gemm --tile (else the target's default: gemmTiles)
  int64_t split_k = 0;             // gemm --split-k: K chunks (0: auto, the target's rule: gemmSplitK)
  LibraryTarget target;
  double eps = 0;    // rmsnorm, layernorm
  bool neox = true;  // rope
  double base = 10000;
  bool tanh_form = false;  // gelu
  // Storage of float views (docs/ir.md, "16-bit views"): attention --kv-dtype (k, v), gemm
  // --a-dtype / --b-dtype, the row kernels' --dtype (their inputs and outputs).
  dsl::FloatElem kv_elem = dsl::FloatElem::F32, a_elem = dsl::FloatElem::F32, b_elem = dsl::FloatElem::F32;
  dsl::FloatElem io_elem = dsl::FloatElem::F32;
};

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

// A float view's storage: --NAME f32|f16|bf16 (default f32).
Error dtypeOption(const LibraryRequest& r, const std::string& name, dsl::FloatElem& out) {
  std::string t = dsl::floatElemName(dsl::FloatElem::F32);
  if (auto e = optionChoice(r, name, {"f32", "f16", "bf16"}, t)) return e;
  dsl::floatElemNamed(t, out);
  return std::nullopt;
}

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
// 8.3 whole, so 64 rows stay whole). On a CPU auto is off (a core walks its rows whole).
constexpr int64_t kGpuPartChunk = 256;
Error softmaxPartsOption(const LibraryRequest& r, Spec& s) {
  const int64_t rows = s.shape[0], cols = s.shape[1];
  auto it = r.options.find("parts");
  if (it == r.options.end() || it->second == "auto") {
    if (!s.target.gpu || s.runtime_rows || rows * 4 > s.target.multiprocessors || cols <= kGpuRowChunk)
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

dsl::ReduceOrder rowOrder(const Spec& s) {
  return s.target.gpu ? dsl::unorderedTree(16) : dsl::ordered;
}

// gemm's tiles: --tile, else the target's default.
GemmTiles gemmTiles(const Spec& s) {
  const GemmShape g{s.shape[0], s.shape[1], s.shape[2]};
  if (s.tiles) return *s.tiles;
  return s.target.gpu ? defaultGpuGemmTiles(g, s.target.multiprocessors) : defaultGemmTiles(g);
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
constexpr int64_t kMaxTileM = 256, kMaxTileN = 1024, kMaxTileK = 1024, kMaxTileElements = 16384;
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
  if (v.size() != 3 || !parseInt(it->second.substr(it->second.rfind('x') + 1)))
    return fmt::format("gemm: --tile '{}' is not TMxTNxTK (e.g. 64x64x64)", it->second);
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

// The row kernels' common options: --runtime-rows and --dtype.
Error rowsOptions(const LibraryRequest& r, Spec& s) {
  if (auto e = runtimeRowsOption(r, s)) return e;
  return dtypeOption(r, "dtype", s.io_elem);
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

// ---- attention ----

// --lanes auto (stacked heads): the queries of a block along the lanes when there are at least
// two vectors of them and either the keys would pad their KV blocks by more than 1/8 (a ragged
// K: paired, 1,4,2,32,65,32,32 runs at 0.72 of the keys layout's time) or one query head per
// program (1,8,8,128,512,64,64: 0.94). Else the keys: with several query heads per program the
// queries layout reads a vector of P per accumulator row (1,16,8,256,256,64,64: 1.40;
// 1,32,8,512,512,128,128 at 32x32: 1.36), and decode has too few queries to fill a vector.
bool queriesInLanes(int64_t block_q, int64_t group, int64_t K, int64_t keys_block) {
  if (block_q < 32 || K < 1) return false;
  const int64_t padded = (K + keys_block - 1) / keys_block * keys_block;
  return 8 * padded > 9 * K || (group == 1 && block_q >= 64);
}

Error attentionOptions(const LibraryRequest& r, Spec& s) {
  const int64_t Hq = s.shape[1], Hkv = s.shape[2], Q = s.shape[3];
  if (Hq % Hkv != 0)
    return fmt::format("attention: Hq={} is not a multiple of Hkv={} (--shape B,Hq,Hkv,Q,K,D,Dv)", Hq, Hkv);
  std::string heads = "stacked", fma = "fused";
  if (auto e = optionChoice(r, "heads", {"stacked", "separate"}, heads)) return e;
  if (auto e = optionChoice(r, "fma", {"fused", "unfused"}, fma)) return e;
  s.stack_heads = heads == "stacked";
  s.fused = fma == "fused";
  if (auto e = dtypeOption(r, "kv-dtype", s.kv_elem)) return e;
  // A KV cache: K is its capacity (or --capacity); lengths come with each launch.
  std::string kv = "none";
  if (auto e = optionChoice(r, "kv-cache", {"none", "dense", "paged"}, kv)) return e;
  s.kv_cache = kv == "dense" ? KvCache::Dense : kv == "paged" ? KvCache::Paged : KvCache::None;
  for (const char* name : {"capacity", "page", "pages"})
    if (r.options.count(name) && s.kv_cache == KvCache::None)
      return fmt::format("attention: {} needs --kv-cache dense|paged", opt(name));
  if ((r.options.count("page") || r.options.count("pages")) && s.kv_cache != KvCache::Paged)
    return "attention: --page and --pages need --kv-cache paged";
  if (s.kv_cache != KvCache::None) {
    if (!s.stack_heads) return "attention: --kv-cache needs --heads stacked";
    double v = 0;
    if (r.options.count("capacity")) {
      if (auto e = optionNumber(r, "capacity", 1, false, double(kMaxExtent), v)) return e;
      if (v != std::floor(v)) return fmt::format("attention: --capacity {} is not an integer", v);
      s.shape[4] = static_cast<int64_t>(v);
    }
    if (s.shape[4] < 1) return "attention: a KV cache needs a capacity K of at least 1 position";
  }
  std::string lanes = "auto";
  if (auto e = optionChoice(r, "lanes", {"keys", "queries", "auto"}, lanes)) return e;
  if (lanes == "queries" && !s.stack_heads) return "attention: --lanes queries needs --heads stacked";
  const int64_t widest = std::max(s.shape[5], s.shape[6]);
  if (s.stack_heads) {
    // Per shape class: a program's rows are group x BQ queries, up to 64 rows (decode: the
    // group alone); keys per block 64, fewer when a K or V tile would pass
    // kDefaultKvTileElements; never more than the keys there are (rounded up to 16).
    const int64_t group = Hq / Hkv;
    s.block_q = std::clamp<int64_t>(64 / group, 1, Q);
    // A GPU (the block realization, docs/gpu.md): rows a power of two where the group allows
    // (group x BQ rows spread over 16 rows of threads), 64 keys per block, 32 when D or Dv
    // passes 64 (the Q, K, V and P stages of a block then fit its shared memory).
    if (s.target.gpu) s.block_q = std::min(Q, std::max<int64_t>(1, std::bit_floor(uint64_t(64 / group))));
    // The fewest blocks of at most that many keys, split evenly. With the keys along the lanes,
    // rounded up to 16 so the last block is not mostly padding (K = 64 + 1: 2 x 48, not 64 + 1);
    // with the queries along the lanes keys are rows, and a block holds just the keys there are
    // (K = 65: 1 x 65). Up to 96 keys are one block (K = 65, keys in lanes: 1 x 80; kiln peers
    // 1,4,2,32,65,32,32: 15.9 µs against 19.5 for 2 x 48); beyond that, blocks of 64 (decode
    // 1,8,2,1,2053,80,96: 74 µs at 64, 79 at 112, 80 at 128).
    const int64_t K = s.shape[4];
    const int64_t most = s.target.gpu ? (widest <= 64 ? 64 : 32)
                                      : std::clamp<int64_t>(kDefaultKvTileElements / widest, 1, K <= 96 ? 96 : 64);
    const int64_t blocks = std::max<int64_t>(1, (K + most - 1) / most);
    const int64_t even = (K + blocks - 1) / blocks;
    const int64_t keysBlock = std::min(most, std::max<int64_t>(16, (even + 15) / 16 * 16));
    s.queries_in_lanes =
        lanes == "auto" ? !s.target.gpu && queriesInLanes(s.block_q, group, K, keysBlock) : lanes == "queries";
    s.block_k = s.queries_in_lanes ? std::min(most, std::max<int64_t>(1, even)) : keysBlock;
  } else {
    s.block_q = Q == 1 ? 1 : 4;
    // 16 keys per block, fewer when a K or V tile of 16 rows would pass kDefaultKvTileElements.
    s.block_k = std::clamp<int64_t>(kDefaultKvTileElements / widest, 1, 16);
  }
  if (auto it = r.options.find("block"); it != r.options.end()) {
    const std::string& b = it->second;
    const size_t x = b.find('x');
    std::optional<int64_t> bq = x == std::string::npos ? std::nullopt : parseInt(b.substr(0, x));
    std::optional<int64_t> bk = x == std::string::npos ? std::nullopt : parseInt(b.substr(x + 1));
    if (!bq || !bk) return fmt::format("attention: --block '{}' is not BQxBK (e.g. 4x16)", b);
    if (*bq < 1 || *bq > kMaxBlockQ)
      return fmt::format("attention: --block BQ={} is out of range; legal: 1..{} query rows", *bq, kMaxBlockQ);
    if (*bk < 1 || *bk > kMaxBlockK)
      return fmt::format("attention: --block BK={} is out of range; legal: 1..{} keys", *bk, kMaxBlockK);
    if (*bq * *bk > kMaxBlockElements)
      return fmt::format("attention: --block {}x{} is too large: BQ*BK={} exceeds {} score elements", *bq, *bk,
                         *bq * *bk, kMaxBlockElements);
    const int64_t rows = *bq * (s.stack_heads ? Hq / Hkv : 1);
    if (rows * *bk > kMaxBlockElements * 4)
      return fmt::format("attention: --block {}x{} is too large: {} rows x {} keys exceeds {} score elements", *bq, *bk,
                         rows, *bk, kMaxBlockElements * 4);
    s.block_q = *bq;
    s.block_k = *bk;
  }
  if (r.options.count("block"))  // a given block: the rule on it
    s.queries_in_lanes =
        s.stack_heads && (lanes == "auto" ? !s.target.gpu && queriesInLanes(s.block_q, Hq / Hkv, s.shape[4], s.block_k)
                                          : lanes == "queries");
  // Split KV: a number of chunks fixed by the shape (never by the thread count).
  const int64_t nKB = (s.shape[4] + s.block_k - 1) / s.block_k;
  const int64_t programs = s.shape[0] * Hkv * ((Q + s.block_q - 1) / s.block_q);
  int64_t chunks = 1;
  if (auto it = r.options.find("split"); it == r.options.end() || it->second == "auto") {
    // auto: when the unsplit kernel has fewer than 16 programs, enough chunks for 16 programs,
    // each chunk at least 4 blocks (the merge and the partials cost about one block's work).
    // A GPU: when fewer programs than multiprocessors, enough chunks for two programs per
    // multiprocessor, each chunk at least 2 blocks.
    if (s.stack_heads && s.target.gpu && programs < s.target.multiprocessors)
      chunks = std::min((2 * s.target.multiprocessors + programs - 1) / programs, nKB / 2);
    else if (s.stack_heads && !s.target.gpu && programs < kSplitPrograms)
      chunks = std::min((kSplitPrograms + programs - 1) / programs, nKB / 4);
  } else if (it->second != "off") {
    std::optional<int64_t> n = parseInt(it->second);
    if (!n || *n < 1 || *n > 4096)
      return fmt::format("attention: --split '{}' is not a number of KV chunks 1..4096, auto or off", it->second);
    if (!s.stack_heads && *n > 1) return "attention: --split needs --heads stacked";
    chunks = *n;
  }
  if (chunks > 1 && nKB > 1) {
    s.split_blocks = (nKB + chunks - 1) / chunks;
    if (s.split_blocks >= nKB) s.split_blocks = 0;
  }
  // --merge-columns: the split's merge in programs of N value columns each (the same bits for
  // any N). auto: on a GPU, enough column chunks (a power of two of columns) for a program per
  // multiprocessor, each at least a warp of threads; on a CPU one program per row block.
  if (s.split_blocks > 0) {
    const int64_t Dv = s.shape[6], rowsPerProgram = (s.stack_heads ? Hq / Hkv : 1) * s.block_q;
    auto it = r.options.find("merge-columns");
    if (it == r.options.end() || it->second == "auto") {
      if (s.target.gpu && programs < s.target.multiprocessors) {
        // A block spreads its rows over the largest power of two dividing them, the columns over
        // the rest of a warp: a power of two of columns, at least 32 / that many.
        const int64_t want = (s.target.multiprocessors + programs - 1) / programs;
        const int64_t rowThreads = rowsPerProgram & -rowsPerProgram;
        s.merge_columns = static_cast<int64_t>(
            std::bit_ceil(static_cast<uint64_t>(std::max((Dv + want - 1) / want, (32 + rowThreads - 1) / rowThreads))));
      }
    } else if (it->second != "off") {
      std::optional<int64_t> n = parseInt(it->second);
      if (!n || *n < 1 || *n > Dv)
        return fmt::format("attention: --merge-columns '{}' is not a number of value columns 1..{} (Dv), auto or off",
                           it->second, Dv);
      s.merge_columns = *n;
    }
    if (s.merge_columns >= Dv) s.merge_columns = 0;
  } else if (auto it = r.options.find("merge-columns");
             it != r.options.end() && it->second != "auto" && it->second != "off") {
    return "attention: --merge-columns needs a split (--split N, or auto where it splits)";
  }
  // --qk auto: the dot form where a program has one score row (MHA decode: no other row shares
  // a K load, so the outer product has nothing to reuse) and D fills whole 16-lane partitions.
  // Paired (AOT objects, 1 thread): MHA decode 1,32,32,1,1024,128,128 0.85, 1,8,8,1,2048,64,64
  // 0.82; GQA decode 1,8,2,1,2053,80,96 1.35 (four rows share each K row), so keep the outer product there.
  std::string qk = "auto";
  if (auto e = optionChoice(r, "qk", {"outer", "dot", "auto"}, qk)) return e;
  const int64_t rows = (s.stack_heads ? Hq / Hkv : 1) * s.block_q;
  s.qk_dot = qk == "auto" ? !s.target.gpu && rows == 1 && s.shape[5] % 16 == 0 : qk == "dot";
  if (s.kv_cache == KvCache::Paged) {
    double v = 16;
    if (auto e = optionNumber(r, "page", 1, false, 4096, v)) return e;
    if (v != std::floor(v)) return fmt::format("attention: --page {} is not an integer", v);
    s.page = static_cast<int64_t>(v);
    // Default pool: every sequence's pages at full capacity.
    v = double(s.shape[0] * ((s.shape[4] + s.page - 1) / s.page));
    if (auto e = optionNumber(r, "pages", 1, false, double(kMaxExtent), v)) return e;
    if (v != std::floor(v)) return fmt::format("attention: --pages {} is not an integer", v);
    s.pages = static_cast<int64_t>(v);
    // A KV block lies within one page: BK divides the page (the largest divisor up to BK).
    if (s.page % s.block_k != 0) {
      if (r.options.count("block"))
        return fmt::format("attention: --block BK={} does not divide --page {} (a KV block lies within one page)",
                           s.block_k, s.page);
      int64_t bk = std::min(s.block_k, s.page);
      while (s.page % bk != 0) --bk;
      s.block_k = bk;
      if (s.split_blocks > 0) {  // the same chunk length in keys, in the new blocks
        const int64_t nKBp = (s.shape[4] + bk - 1) / bk;
        s.split_blocks = (nKBp + chunks - 1) / chunks;
        if (s.split_blocks >= nKBp) s.split_blocks = 0;
      }
    }
  }
  if (auto e = optionFlag(r, "varlen", s.varlen)) return e;
  if (s.varlen) {  // packed queries: one token per program, every KV block of its sequence
    if (s.kv_cache == KvCache::None) return "attention: --varlen needs --kv-cache dense|paged";
    if (r.options.count("split") && r.options.at("split") != "off" && r.options.at("split") != "auto")
      return "attention: --varlen runs one program per query token; it takes no --split";
    if (r.options.count("block") && s.block_q != 1)
      return fmt::format("attention: --varlen needs --block BQ=1 (got {})", s.block_q);
    if (r.options.count("lanes") && r.options.at("lanes") == "queries")
      return "attention: --varlen keeps the keys along the lanes (--lanes keys|auto)";
    s.block_q = 1;
    s.split_blocks = 0;
    s.queries_in_lanes = false;
  }
  std::string mask = "causal";
  if (auto e = optionChoice(r, "mask", {"causal", "none"}, mask)) return e;
  s.causal = mask == "causal";
  double scale = 0;
  if (r.options.count("scale")) {
    if (auto e = optionNumber(r, "scale", -1e30, false, 1e30, scale)) return e;
    s.scale = scale;
  }
  return std::nullopt;
}

AttentionShape attentionShape(const Spec& s) {
  return {s.shape[0], s.shape[1], s.shape[2], s.shape[3], s.shape[4], s.shape[5], s.shape[6]};
}

AttentionOptions attentionOpts(const Spec& s) {
  AttentionOptions o;
  o.block_q = s.block_q;
  o.block_k = s.block_k;
  o.causal = s.causal;
  o.scale = s.scale;
  o.stack_heads = s.stack_heads;
  o.fused = s.fused;
  o.split_blocks = s.split_blocks;
  o.merge_columns = s.merge_columns;
  o.queries_in_lanes = s.queries_in_lanes;
  o.qk_partitions = s.qk_dot ? 16 : 0;
  o.kv_cache = s.kv_cache;
  o.page = s.page;
  o.pages = s.pages;
  o.varlen = s.varlen;
  o.kv_elem = s.kv_elem;
  return o;
}

// ---- the table ----

constexpr const char* kRuntimeRowsHelp =
    "--runtime-rows   the row count comes with each launch: rows: i64 in [0, rows of --shape] after the views "
    "(rows from it on are not written); one compile serves every count";
constexpr const char* kDtypeHelp =
    "--dtype f32|f16|bf16   the storage of the input and output views: loads convert to f32 exactly, stores round "
    "to nearest even; the arithmetic is f32 either way (default f32)";

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
         "blocks by more than 1/8 or Hq = Hkv "
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
         "[Q,Hq,Dv] with Q their total capacity, and cu_seqlens: view<i32>[B+1] in [0, Q] after lens (and "
         "block_table): sequence b's queries are rows cu[b] .. cu[b+1]-1, its last positions; one program per "
         "(token, KV head), BQ 1, no split\n"
         "--kv-dtype f32|f16|bf16   the storage of k and v (a KV cache's too): loads convert to f32 exactly, the "
         "arithmetic is f32 either way (default f32)",
         "softmax(scale q.k^T) v with GQA/MQA (query head h reads KV head h / (Hq/Hkv)); online softmax over KV "
         "blocks"},
        {"B", "Hq", "Hkv", "Q", "K", "D", "Dv"},
        {1, 1, 1, 1, 0, 1, 1},
        {"block", "mask", "scale", "heads", "fma", "split", "merge-columns", "lanes", "qk", "kv-cache", "capacity",
         "page", "pages", "varlen", "kv-dtype"},
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
        [](const Spec& s, const std::vector<host::ParamData>& in) {
          const AttentionShape a = attentionShape(s);
          const float scale = attentionScale(a, attentionOpts(s));
          if (s.kv_cache == KvCache::None)
            return reference::attention(a, s.causal, scale, in[0].data, in[1].data, in[2].data);
          const bool paged = s.kv_cache == KvCache::Paged;
          const auto none = std::span<const int64_t>();
          return reference::cachedAttention(a, attentionOpts(s), scale, in[0].data, in[1].data, in[2].data, in[3].ints,
                                            paged ? std::span<const int64_t>(in[4].ints) : none,
                                            s.varlen ? std::span<const int64_t>(in[paged ? 5 : 4].ints) : none);
        }});

    t.push_back(Entry{
        {"gemm", "M,N,K",
         "--trans-b   B is given as N x K (default K x N)\n--fma fused|unfused   mma steps as one fused multiply-add "
         "rounded once, or MUL then ADD (default fused)\n" +
             std::string(kRuntimeRowsHelp) +
             " (M: a partial last row tile runs row by row)\n"
             "--a-dtype f32|f16|bf16, --b-dtype f32|f16|bf16   the storage of A and of B (16-bit weights): loads "
             "convert to f32 exactly; C is f32 and accumulates in f32 in the same order (default f32)\n"
             "--tile TMxTNxTK   outputs per program and K per step (default: up to 64x64x64; 1x256 or 2x128 "
             "when M is 1 or 2); the bits do not depend on it\n"
             "--split-k N|auto|off   K in N chunks of whole K steps, each a program of its own, their partial "
             "tiles summed in chunk order by a second phase (a different, equally defined result); auto: none on a "
             "CPU, on a GPU enough for 4 blocks per SM when M <= 16 (default auto)",
         "C[M,N] = A[M,K] . B (K = 0 gives zeros); tiles up to 64x64 outputs, K steps up to 64"},
        {"M", "N", "K"},
        {1, 1, 0},
        {"trans-b", "fma", "runtime-rows", "a-dtype", "b-dtype", "tile", "split-k"},
        [](const LibraryRequest& r, Spec& s) -> Error {
          if (auto e = gemmTileOption(r, s)) return e;
          std::string fma = "fused";
          if (auto e = optionChoice(r, "fma", {"fused", "unfused"}, fma)) return e;
          s.fused = fma == "fused";
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
          return gemm(g, gemmTiles(s), s.trans_b, s.fused, s.runtime_rows, s.a_elem, s.b_elem, gemmSplitK(s));
        },
        [](const Spec& s, const std::vector<host::ParamData>& in) {
          return cutRows(s, in,
                         reference::gemm({s.shape[0], s.shape[1], s.shape[2]}, s.trans_b, in[0].data, in[1].data));
        }});

    t.push_back(Entry{{"softmax", "rows,cols",
                       std::string(kRuntimeRowsHelp) + "\n" + kDtypeHelp +
                           "\n--parts N|auto|off   each row in N parts of whole column chunks over programs, two "
                           "phases (a part's max and sum, then the merge and the output); auto: on a GPU with at most "
                           "a quarter as many rows as SMs, parts of 256 columns",
                       "y[r,:] = softmax(x[r,:]) (max-subtracted, online over column chunks)"},
                      {"rows", "cols"},
                      {1, 1},
                      {"runtime-rows", "dtype", "parts"},
                      [](const LibraryRequest& r, Spec& s) -> Error {
                        if (auto e = rowsOptions(r, s)) return e;
                        return softmaxPartsOption(r, s);
                      },
                      rowsViews({"x"}, false, false),
                      [](const Spec& s) {
                        return softmax(s.shape[0], s.shape[1], 1, rowChunk(s), s.runtime_rows, s.io_elem, rowOrder(s),
                                       s.target.gpu, s.row_parts);
                      },
                      [](const Spec& s, const std::vector<host::ParamData>& in) {
                        return cutRows(s, in, reference::softmax(s.shape[0], s.shape[1], in[0].data));
                      }});

    t.push_back(
        Entry{{"rmsnorm", "rows,cols",
               std::string("--eps E   added to the mean square (default 1e-6), rounded to f32; 0..1\n") +
                   kRuntimeRowsHelp + "\n" + kDtypeHelp + " (w stays f32)",
               "y[r,c] = x[r,c] / sqrt(mean(x[r,:]^2) + eps) * w[c]"},
              {"rows", "cols"},
              {1, 1},
              {"eps", "runtime-rows", "dtype"},
              epsOption(1e-6),
              rowsViews({"x"}, true, false),
              [](const Spec& s) {
                return rmsnorm(s.shape[0], s.shape[1], s.eps, 1, rowChunk(s), s.runtime_rows, s.io_elem, rowOrder(s));
              },
              [](const Spec& s, const std::vector<host::ParamData>& in) {
                return cutRows(
                    s, in, reference::rmsnorm(s.shape[0], s.shape[1], double(float(s.eps)), in[0].data, in[1].data));
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

    t.push_back(Entry{{"swiglu", "rows,cols", std::string(kRuntimeRowsHelp) + "\n" + kDtypeHelp,
                       "y = gate / (1 + exp(-gate)) * up (SiLU(gate) * up), gate and up [rows,cols]"},
                      {"rows", "cols"},
                      {1, 1},
                      {"runtime-rows", "dtype"},
                      rowsOptions,
                      rowsViews({"gate", "up"}, false, false),
                      [](const Spec& s) { return swiglu(s.shape[0], s.shape[1], 64, s.runtime_rows, s.io_elem); },
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
                              spec.tiles        ? " (given)"
                              : spec.target.gpu ? " (library default for a GPU)"
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
  const std::vector<ViewShape> views = e->views(spec);
  if (params.size() != views.size())
    return fmt::format("{}: the reference needs {} parameters, got {}", request.name, views.size(), params.size());
  size_t out_index = 0;
  for (size_t i = 0; i < views.size(); ++i) {
    size_t n = 1;
    for (int64_t d : views[i].shape) n *= size_t(d);
    if (views[i].scalar) continue;
    const size_t got = views[i].integer ? params[i].ints.size() : params[i].data.size();
    if (got != n)
      return fmt::format("{}: parameter {} has {} elements, the shape needs {}", request.name, views[i].name, got, n);
    if (views[i].output) out_index = i;
  }
  outputs.assign(params.size(), {});
  outputs[out_index] = e->reference(spec, params);
  return std::nullopt;
}

}  // namespace kiln::kernels
