// The library's internals shared by its files (registry.cpp, registry_attention.cpp): a
// request validated into a Spec, the legal ranges, and the option parsers. Not a public header.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/attention.h"
#include "kernels/gemm.h"
#include "kernels/registry.h"

namespace kiln::kernels::library_detail {

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
  bool three_passes = false;         // softmax --passes 3: max, sum of exps, write (softmax.h)
  int64_t positions = 0;             // rope --positions
  bool causal = true;
  std::optional<double> scale;
  bool trans_b = false;            // gemm
  bool bf16_dot = false;           // gemm --order bf16_dot
  bool bf16_pairs = false;         // gemm, attention --order bf16_pairs
  std::optional<GemmTiles> tiles;  // gemm --tile TMxTNxTK (else the target's default: gemmTiles)
  int64_t tile_rows = 0;           // gemm --tile TM: the rows alone, the rest by the target's rule
  int64_t split_k = 0;             // gemm --split-k: K chunks (0: auto, the target's rule: gemmSplitK)
  LibraryTarget target;
  double eps = 0;    // rmsnorm, layernorm
  bool neox = true;  // rope
  double base = 10000;
  bool tanh_form = false;  // gelu
  // Storage of float views (docs/ir.md, "16-bit views"): attention --kv-dtype (k, v), gemm
  // --a-dtype / --b-dtype, the row kernels' --dtype (their inputs and outputs) and rmsnorm's
  // and swiglu's --out-dtype (their output, when it differs: the next GEMM's 16-bit A).
  dsl::FloatElem kv_elem = dsl::FloatElem::F32, a_elem = dsl::FloatElem::F32, b_elem = dsl::FloatElem::F32;
  dsl::FloatElem io_elem = dsl::FloatElem::F32, out_elem = dsl::FloatElem::F32;
};

std::string joined(const std::vector<std::string>& v, const char* sep);
std::optional<int64_t> parseInt(std::string_view text);
std::optional<double> parseDouble(const std::string& text);
// "--NAME" as the messages spell an option.
std::string opt(const std::string& name);
// --NAME, one of `choices` (out keeps its default when absent).
Error optionChoice(const LibraryRequest& r, const std::string& name, const std::vector<std::string>& choices,
                   std::string& out);
// --NAME, a finite number in [lo, hi] (lo excluded when lo_open).
Error optionNumber(const LibraryRequest& r, const std::string& name, double lo, bool lo_open, double hi, double& out);
// --NAME as a flag: absent, "", true/1/on or false/0/off.
Error optionFlag(const LibraryRequest& r, const std::string& name, bool& out);
// A float view's storage: --NAME f32|f16|bf16 (default `fallback`).
Error dtypeOption(const LibraryRequest& r, const std::string& name, dsl::FloatElem& out,
                  dsl::FloatElem fallback = dsl::FloatElem::F32);

// attention (registry_attention.cpp): its options validated into the Spec, and the builder's
// arguments from it.
Error attentionOptions(const LibraryRequest& r, Spec& s);
AttentionShape attentionShape(const Spec& s);
AttentionOptions attentionOpts(const Spec& s);

}  // namespace kiln::kernels::library_detail
