// The library's attention entry: its options (blocks, split, merge columns, lanes, q.k form,
// KV caches, storage) validated into the Spec, and the builder's arguments from it.
#include <fmt/format.h>

#include <algorithm>
#include <bit>

#include "kernels/registry_spec.h"

namespace kiln::kernels::library_detail {

// --lanes auto (stacked heads): the queries of a block along the lanes when there are at least
// two vectors of them and either the keys would pad their KV blocks by more than 1/8 (a ragged
// K: paired, 1,4,2,32,65,32,32 runs at 0.72 of the keys layout's time) or one query head per
// program (1,8,8,128,512,64,64: 0.94). Else the keys: with several query heads per program the
// queries layout reads a vector of P per accumulator row (1,16,8,256,256,64,64: 1.40;
// 1,32,8,512,512,128,128 at 32x32: 1.36), and decode has too few queries to fill a vector.
// Never in the bf16 pairs order: there p.v's lane operand p (keys as rows) is rounded and paired
// at each use, where with the keys along the lanes p is a splat made bf16 words once (paired,
// AMD Zen 5, bf16 K/V: keys 0.47 of the queries layout's time at 1,4,2,32,65,32,32, 0.77 at
// 1,8,8,128,512,64,64).
static bool queriesInLanes(int64_t block_q, int64_t group, int64_t K, int64_t keys_block, bool pairs) {
  if (pairs || block_q < 32 || K < 1) return false;
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
  std::string mask = "causal";
  if (auto e = optionChoice(r, "mask", {"causal", "none"}, mask)) return e;
  s.causal = mask == "causal";
  // --order bf16_pairs: both mmas in VDPBF16PS's order (docs/ir.md, MMA), which defines each
  // step itself (no --fma); q, k, p and v rounded to bf16 as its operands.
  std::string order = "ascending";
  if (auto e = optionChoice(r, "order", {"ascending", "bf16_pairs"}, order)) return e;
  s.bf16_pairs = order == "bf16_pairs";
  if (s.bf16_pairs && r.options.count("fma"))
    return "attention: --fma does not apply with --order bf16_pairs (the order defines each step: one fused "
           "step per contribution, rounded and flushed as docs/ir.md says)";
  if (auto e = dtypeOption(r, "kv-dtype", s.kv_elem)) return e;
  if (auto e = dtypeOption(r, "out-dtype", s.out_elem)) return e;
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
    // Where those rows are not a multiple of 16 but twice them are (groups 5 and 7: 40 and 56
    // rows, 320 or 448 threads of 4 x 1 or 4 x 2 scores that spill), BQ doubles and KV blocks
    // take 64 keys for D, Dv up to 128: 80 and 112 rows over 16 rows of threads (H100, runs V
    // and W, every shape faster: causal 1,28,4,1024,1024,64,64 230.0 us against 1394.5,
    // 1,40,8,1024,1024,128,128 429.1 against 762.7, 1,20,4,512,512,128,128 98.2 against 106.5;
    // run X: packed prefills 0.28-0.62 of the time). Not with a paged cache, whose pages cut
    // the blocks to 16 keys by default: 112 rows x 16 keys spilled 10 KB (2.9x the time).
    bool wide_rows = false;
    if (s.target.gpu) {
      int64_t bq = std::max<int64_t>(1, std::bit_floor(uint64_t(64 / group)));
      wide_rows = widest <= 128 && group * bq % 16 != 0 && 2 * group * bq % 16 == 0 && 2 * bq <= Q &&
                  s.kv_cache != KvCache::Paged;
      if (wide_rows) bq *= 2;
      s.block_q = std::min(Q, bq);
    }
    // The fewest blocks of at most that many keys, split evenly. With the keys along the lanes,
    // rounded up to 16 so the last block is not mostly padding (K = 64 + 1: 2 x 48, not 64 + 1);
    // with the queries along the lanes keys are rows, and a block holds just the keys there are
    // (K = 65: 1 x 65). Up to 96 keys are one block (K = 65, keys in lanes: 1 x 80; kiln peers
    // 1,4,2,32,65,32,32: 15.9 µs against 19.5 for 2 x 48); beyond that, blocks of 64 (decode
    // 1,8,2,1,2053,80,96: 74 µs at 64, 79 at 112, 80 at 128).
    const int64_t K = s.shape[4];
    const int64_t most = s.target.gpu ? (widest <= 64 || wide_rows ? 64 : 32)
                                      : std::clamp<int64_t>(kDefaultKvTileElements / widest, 1, K <= 96 ? 96 : 64);
    const int64_t blocks = std::max<int64_t>(1, (K + most - 1) / most);
    const int64_t even = (K + blocks - 1) / blocks;
    const int64_t keysBlock = std::min(most, std::max<int64_t>(16, (even + 15) / 16 * 16));
    s.queries_in_lanes = lanes == "auto" ? !s.target.gpu && queriesInLanes(s.block_q, group, K, keysBlock, s.bf16_pairs)
                                         : lanes == "queries";
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
        s.stack_heads &&
        (lanes == "auto" ? !s.target.gpu && queriesInLanes(s.block_q, Hq / Hkv, s.shape[4], s.block_k, s.bf16_pairs)
                         : lanes == "queries");
  // Split KV: a number of chunks fixed by the shape (never by the thread count).
  const int64_t nKB = (s.shape[4] + s.block_k - 1) / s.block_k;
  const int64_t programs = s.shape[0] * Hkv * ((Q + s.block_q - 1) / s.block_q);
  const int64_t sms = s.target.multiprocessors;
  int64_t chunks = 1;
  if (auto it = r.options.find("split"); it == r.options.end() || it->second == "auto") {
    // auto: when the unsplit kernel has fewer than 16 programs, enough chunks for 16 programs,
    // each chunk at least 4 blocks (the merge and the partials cost about one block's work).
    // A GPU: when fewer programs than multiprocessors, enough chunks for two programs per
    // multiprocessor, each chunk at least 2 blocks. A causal prefill (no KV cache) of one to
    // two programs an SM and at least 384 keys: 2 chunks, so that the long programs' halves
    // fill the SMs that the short ones leave (H100, paired, docs/gpu.md run AC: 160-256
    // programs, chunks of 200-1024 keys, 0.68-0.93 of the time; runs T, U likewise). Not with
    // chunks of 128 keys, whose merge costs more than the balance gains (run U:
    // 4,16,4,256,256,128,128 1.13), nor without a mask, where the programs are equal (1.08-1.18).
    if (s.stack_heads && s.target.gpu && programs < sms)
      chunks = std::min((2 * sms + programs - 1) / programs, nKB / 2);
    else if (s.stack_heads && s.target.gpu && s.causal && s.kv_cache == KvCache::None && programs < 2 * sms &&
             s.shape[4] >= 384)
      chunks = std::min<int64_t>(2, nKB / 2);
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
      if (s.target.gpu && programs < sms) {
        // A block spreads its rows over the largest power of two dividing them, the columns over
        // the rest of a warp: a power of two of columns, at least 32 / that many.
        const int64_t want = (sms + programs - 1) / programs;
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
  if (s.bf16_pairs && qk == "dot")
    return "attention: --qk dot (the partitions(16) order) and --order bf16_pairs are two orders of q.k^T; choose one";
  s.qk_dot = qk == "auto" ? !s.target.gpu && !s.bf16_pairs && rows == 1 && s.shape[5] % 16 == 0 : qk == "dot";
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
  if (s.varlen) {  // packed queries: programs of BQ queries of one sequence, every KV block of it
    if (s.kv_cache == KvCache::None) return "attention: --varlen needs --kv-cache dense|paged";
    if (r.options.count("split") && r.options.at("split") != "off" && r.options.at("split") != "auto")
      return "attention: --varlen walks every KV block of a sequence in one program; it takes no --split";
    if (r.options.count("lanes") && r.options.at("lanes") == "queries")
      return "attention: --varlen keeps the keys along the lanes (--lanes keys|auto)";
    // Default: one token per program on a CPU. On a GPU, blocks of queries as for a prefill (a
    // block's K/V stages serve all its rows; a second phase puts the rows in token order) where
    // the sequences average at least two such blocks of queries (Q / B >= 2 BQ), else one token
    // per program: with few queries per sequence, blocks leave most SMs idle while a few walk
    // the longest caches (H200, 5,8,2,80,1024,64,64 with 1-37 queries a sequence: 112.8 us in
    // blocks of 16, 49.6 one token per program; 1024 queries over 4 prompts: blocks, 0.52x
    // torch's SDPA).
    if (!r.options.count("block") && !(s.target.gpu && Q >= 2 * s.block_q * s.shape[0])) s.block_q = 1;
    s.split_blocks = 0;
    s.queries_in_lanes = false;
  }
  // A GPU, no mask, 48 < D, Dv <= 64, programs of 64 rows in 64-key blocks: 32-key blocks where
  // they take fewer waves of blocks. A 64 x 64 program's stages take 104 KB and its threads 214
  // registers: two blocks an SM; a 64 x 32 program's 61 KB and 168 registers: three (the
  // driver's numbers, H100, docs/gpu.md runs AB and AC). Where a wave goes, they win (384-1024
  // programs: 0.74-0.97 of the time); where the waves are the same, 0.97-1.05. Not at D = 48
  // (64 keys: 254 registers, 32 keys 191: two blocks an SM either way; 32 keys 1.15 of the time)
  // nor with a causal mask (4,12,12,512,512: 1.20; the heavy programs start first and the light
  // ones fill the last wave).
  if (s.target.gpu && s.stack_heads && !s.causal && !s.varlen && s.kv_cache != KvCache::Paged &&
      s.kv_elem == dsl::FloatElem::F32 && !r.options.count("block") && widest > 48 && widest <= 64 && s.block_k == 64 &&
      s.block_q * (Hq / Hkv) == 64 && s.split_blocks == 0) {
    auto waves = [&](int64_t perSm) { return (programs + perSm * sms - 1) / (perSm * sms); };
    if (waves(3) < waves(2)) s.block_k = 32;
  }
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
  o.bf16_pairs = s.bf16_pairs;
  o.split_blocks = s.split_blocks;
  o.merge_columns = s.merge_columns;
  o.queries_in_lanes = s.queries_in_lanes;
  o.qk_partitions = s.qk_dot ? 16 : 0;
  o.kv_cache = s.kv_cache;
  o.page = s.page;
  o.pages = s.pages;
  o.varlen = s.varlen;
  o.kv_elem = s.kv_elem;
  o.out_elem = s.out_elem;
  return o;
}

}  // namespace kiln::kernels::library_detail
