#!/usr/bin/env bash
# The GPU archive of docs/gpu.md: every examples/ kernel and the library attention on the shapes
# of `kiln peers` (mask none, as `kiln peers` times them) plus a batched decode, each checked on
# the CPU against the interpreter (bit for bit) and the FP64 oracle, with its PTX for sm_90a.
# Decode shapes are captured twice: as the library plans them for the CPU, and with a split
# chosen for the GPU (the split sets the parallelism); two with the lanes kept in one thread's
# registers (gpu_lanes=registers) for a paired comparison; then lengths at launch (KV caches,
# dense and paged, and a runtime extent). The replay times them all.
# Outputs over a few MB travel as digests (--digest-only; the paired variants of a case, and
# gemm 2048x2048x1024), so that the archive stays under the 64 MiB that reach the device.
# Usage: scripts/gpu/capture.sh [KILN] [ARCHIVE] [CASE...]   (defaults: build/bin/kiln,
# gpu-archive, every case; with CASE names only those, as tests/cli/gpu_record.sh does)
set -euo pipefail
kiln=${1:-build/bin/kiln}
arch=${2:-gpu-archive}
shift $(($# < 2 ? $# : 2))
only=" $* "
kiln=$(realpath "$kiln")
arch=$(realpath -m "$arch")
cd "$(dirname "$0")/../.."  # examples/ is the repository's
wanted() { [[ "$only" == "  " || "$only" == *" $1 "* ]]; }
rm -rf "$arch"
for f in examples/*.tile; do
  case_name="example_$(basename "$f" .tile)"
  wanted "$case_name" || continue
  "$kiln" gpu-capture --archive "$arch" --case "$case_name" "$f"
done
attention() {  # NAME SHAPE [OPTIONS...]
  local name=$1 shape=$2
  shift 2
  wanted "$name" || return 0
  IFS=, read -r b hq hkv q k d dv <<<"$shape"
  local flops=$((2 * b * hq * q * k * (d + dv)))
  "$kiln" gpu-capture --archive "$arch" --case "$name" --kernel attention --shape "$shape" --mask none \
    --flops "$flops" "$@"
}
# The shapes of `kiln peers` as the library plans them for the GPU (`auto` split and blocks:
# the block realization, docs/gpu.md "Thread blocks") ...
attention decode 1,8,2,1,2053,80,96
attention mha_decode 1,8,8,1,2048,64,64
attention small_prefill 1,4,2,32,65,32,32
attention tail 1,6,2,1,2053,80,96
attention decode4096 1,32,8,1,4096,128,128
attention big_prefill 1,32,8,512,512,128,128
# Blocks of 256 threads (knob gpu_threads), as before the rule that sizes an mma's block for a
# full microtile per thread: the paired comparison.
attention big_prefill_t256 1,32,8,512,512,128,128 --set gpu_threads=256 --digest-only
attention small_prefill_t256 1,4,2,32,65,32,32 --set gpu_threads=256
# The split's merge in one program per row block (as before --merge-columns): the paired comparison.
attention decode4096_merge_off 1,32,8,1,4096,128,128 --merge-columns off
attention decode4096_merge16 1,32,8,1,4096,128,128 --merge-columns 16
attention decode_merge_off 1,8,2,1,2053,80,96 --merge-columns off
attention tail_merge_off 1,6,2,1,2053,80,96 --merge-columns off
# Double-buffered stages through registers instead of cp.async (gpu_async_copy=off; decode4096's
# next trip then takes more than a microtile of registers: single buffers): the paired comparison.
attention decode4096_async_off 1,32,8,1,4096,128,128 --set gpu_async_copy=off
attention big_prefill_async_off 1,32,8,512,512,128,128 --set gpu_async_copy=off --digest-only
# A loop's first cp.async copies issued before the program stages Q (gpu_early_copies=on, off by
# default until paired here): the paired comparison.
attention decode4096_early 1,32,8,1,4096,128,128 --set gpu_early_copies=on
attention decode_early 1,8,2,1,2053,80,96 --set gpu_early_copies=on
attention kv_dense_early 5,8,2,1,1024,64,64 --kv-cache dense --set gpu_early_copies=on
# A GQA group of 3 rows as 3 x 32 threads (the largest divisor of the rows); 32 threads, the
# largest power of two dividing them, before: the paired comparison.
attention tail_t32 1,6,2,1,2053,80,96 --set gpu_threads=32
attention batched_decode32 32,8,2,1,2053,80,96
for t in auto 256; do  # issue 31's causal prefill (bottom-right aligned); and with 256 threads
  name=causal_prefill$([[ $t == auto ]] || echo "_t$t")
  wanted "$name" || continue
  "$kiln" gpu-capture --archive "$arch" --case "$name" --kernel attention --shape 2,12,4,77,300,64,64 \
    --mask causal --flops $((2 * 2 * 12 * 77 * 300 * 128)) --set gpu_threads=$t
done
# ... and the lane realization with the split that suited it (a sweep on the H200: docs/gpu.md,
# "Speed"), kept as the record of that realization (tests/cli/gpu_record.sh); its merge in one
# program per row block and launched after the split's phase has finished, as then.
as_recorded=(--merge-columns off --set gpu_realization=lanes --set gpu_dependent_launch=off)
attention decode_split16 1,8,2,1,2053,80,96 --split 16 --block 1x32 "${as_recorded[@]}"
attention mha_decode_split16 1,8,8,1,2048,64,64 --split 16 --block 1x32 "${as_recorded[@]}"
attention tail_split16 1,6,2,1,2053,80,96 --split 16 --block 1x32 "${as_recorded[@]}"
attention decode4096_split16 1,32,8,1,4096,128,128 --split 16 --block 1x32 "${as_recorded[@]}"
attention batched_decode32_split4 32,8,2,1,2053,80,96 --split 4 --block 1x32 "${as_recorded[@]}"
# The lanes in one thread's registers instead of over W threads: the paired comparison.
attention decode_split16_registers 1,8,2,1,2053,80,96 --split 16 --block 1x32 --set gpu_lanes=registers "${as_recorded[@]}"
attention mha_decode_split16_registers 1,8,8,1,2048,64,64 --split 16 --block 1x32 --set gpu_lanes=registers "${as_recorded[@]}"
# Lengths at launch (docs/kernels.md, "KV caches"): a varlen batch on a dense and on a paged
# cache (the generated lengths lie in [0, K], the block table's pages in the pool), split and
# not, causal queries at the ends of their sequences, and a runtime extent.
attention kv_dense 5,8,2,1,1024,64,64 --kv-cache dense
attention kv_dense_split4 5,8,2,1,1024,64,64 --kv-cache dense --split 4
attention kv_paged 5,8,2,1,1024,64,64 --kv-cache paged --page 64 --pages 83
attention kv_paged_split3 5,8,2,1,1024,64,64 --kv-cache paged --page 64 --pages 83 --split 3
if wanted kv_dense_causal; then
  "$kiln" gpu-capture --archive "$arch" --case kv_dense_causal --kernel attention --shape 5,8,2,3,1024,64,64 \
    --kv-cache dense --mask causal
fi
# Packed queries take their lengths and offsets given (generated offsets decrease, and such a
# batch is of no sequence: zeros): sequences of 1, 5, 20, 1 and 37 queries at the ends of caches
# of 1, 17, 300, 301 and 1024 positions, as the GPU plans them (16 queries a sequence on
# average: one token per program) and in blocks of 16 queries: the paired comparison.
varlen_args=(--varlen --arg lens=1,17,300,301,1024 --arg cu_seqlens=0,1,6,26,27,64)
for v in kv_varlen:dense kv_varlen_paged:paged kv_varlen_blocks:dense:16x64 kv_varlen_paged_blocks:paged:16x64; do
  IFS=: read -r name cache block <<<"$v"
  wanted "$name" || continue
  extra=()
  [[ $cache == paged ]] && extra=(--page 64 --pages 83)
  [[ -n $block ]] && extra+=(--block "$block")
  "$kiln" gpu-capture --archive "$arch" --case "$name" --kernel attention --shape 5,8,2,80,1024,64,64 \
    --kv-cache "$cache" "${varlen_args[@]}" "${extra[@]}"
done
# Causal varlen prefills (issue 31): fresh prompts of different lengths packed in one batch,
# each sequence's cache holding just its prompt; flops counted over the visible pairs,
# n (n + 1) / 2 per sequence of n queries.
varlen_prefill() {  # NAME SHAPE PROMPTS(comma-separated) [OPTIONS...]
  local name=$1 shape=$2 prompts=$3
  shift 3
  wanted "$name" || return 0
  IFS=, read -r b hq hkv t k d dv <<<"$shape"
  local cu=0 at=0 pairs=0 n
  for n in ${prompts//,/ }; do
    at=$((at + n))
    cu+=",$at"
    pairs=$((pairs + n * (n + 1) / 2))
  done
  "$kiln" gpu-capture --archive "$arch" --case "$name" --kernel attention --shape "$shape" --kv-cache dense \
    --varlen --mask causal --arg "lens=$prompts" --arg "cu_seqlens=$cu" --flops $((2 * hq * pairs * (d + dv))) "$@"
}
varlen_prefill varlen_prefill_llama 4,32,4,1024,512,64,64 64,192,256,512
varlen_prefill varlen_prefill_d128 2,32,8,1024,768,128,128 256,768 --digest-only
# One token per program (the CPU's form): the paired comparison.
varlen_prefill varlen_prefill_llama_tokens 4,32,4,1024,512,64,64 64,192,256,512 --block 1x64 --digest-only
varlen_prefill varlen_prefill_llama_async_off 4,32,4,1024,512,64,64 64,192,256,512 --set gpu_async_copy=off --digest-only
if wanted runtime_extents; then
  "$kiln" gpu-capture --archive "$arch" --case runtime_extents tests/ir/runtime_extents.tile
fi
# Programs of tests/ir/ that the block realization runs: reductions over either dim and both
# (ordered with a tile init, partitioned), a store read back by other threads, several
# policies in one program.
for t in block_reduce softmax_rows; do
  wanted "ir_$t" || continue
  "$kiln" gpu-capture --archive "$arch" --case "ir_$t" "tests/ir/$t.tile"
done
# Library kernels beside attention, sized for the GPU by the library (gemm's tiles: the block
# realization, docs/gpu.md "Thread blocks"), edges included; one gemm as the lane realization
# with the CPU's tile for the paired comparison; the row kernels of issue 31's table.
library() {  # NAME KERNEL SHAPE FLOPS [OPTIONS...]
  local name=$1 kernel=$2 shape=$3 flops=$4
  shift 4
  wanted "$name" || return 0
  "$kiln" gpu-capture --archive "$arch" --case "$name" --kernel "$kernel" --shape "$shape" --flops "$flops" "$@"
}
library gemm_300x200x129 gemm 300,200,129 $((2 * 300 * 200 * 129))
library gemm_77x131x50_tn gemm 77,131,50 $((2 * 77 * 131 * 50)) --trans-b
library gemm_1024 gemm 1024,1024,1024 $((2 * 1024 * 1024 * 1024))
library gemm_2048x2048x1024 gemm 2048,2048,1024 $((2 * 2048 * 2048 * 1024)) --digest-only
library gemm_decode_4x4096x4096 gemm 4,4096,4096 $((2 * 4 * 4096 * 4096))
# 4096^3 (issue 31's 30 TFLOP/s): its 64 MB output travels as a digest (about 2.5 minutes here,
# most of it the interpreter's check).
library gemm_4096 gemm 4096,4096,4096 $((2 * 4096 * 4096 * 4096)) --digest-only
library gemm_4096_async_off gemm 4096,4096,4096 $((2 * 4096 * 4096 * 4096)) --digest-only --set gpu_async_copy=off
library gemm_1024_async_off gemm 1024,1024,1024 $((2 * 1024 * 1024 * 1024)) --set gpu_async_copy=off --digest-only
library gemm_decode_1x4096x4096 gemm 1,4096,4096 $((2 * 1 * 4096 * 4096))
library gemm_300x200x129_t256 gemm 300,200,129 $((2 * 300 * 200 * 129)) --set gpu_threads=256
library gemm_1024_t256 gemm 1024,1024,1024 $((2 * 1024 * 1024 * 1024)) --set gpu_threads=256 --digest-only
library gemm_decode_4x4096x4096_t256 gemm 4,4096,4096 $((2 * 4 * 4096 * 4096)) --set gpu_threads=256
library gemm_300x200x129_lanes gemm 300,200,129 $((2 * 300 * 200 * 129)) --tile 64x64x64 --set gpu_realization=lanes
library softmax_33x5000 softmax 33,5000 0
# softmax's rows in parts over the SMs (--parts auto, the GPU's default); whole rows: the paired
# comparison.
library softmax_33x5000_whole softmax 33,5000 0 --parts off
library layernorm_19x3000 layernorm 19,3000 0
library rmsnorm_37x4096 rmsnorm 37,4096 0
# 16-bit views (docs/ir.md, "16-bit views"; docs/gpu.md, "16-bit views on the GPU"): K/V caches,
# weights and rows in f16 / bf16, their inputs carried in inputs/ (STORAGE f16 | bf16), outputs
# compared half by half. The exhaustive sweep of the conversions is capture-storage-sweep.sh's.
for t in half_views half_single_lane_store; do
  wanted "ir_$t" || continue
  "$kiln" gpu-capture --archive "$arch" --case "ir_$t" "tests/ir/$t.tile"
done
attention decode_kv_bf16 1,8,2,1,2053,80,96 --kv-dtype bf16
attention decode_kv_f16 1,8,2,1,2053,80,96 --kv-dtype f16
attention small_prefill_kv_f16 1,4,2,32,65,32,32 --kv-dtype f16
attention kv_paged_bf16 5,8,2,1,1024,64,64 --kv-cache paged --page 64 --pages 83 --kv-dtype bf16
library gemm_300x200x129_b_bf16 gemm 300,200,129 $((2 * 300 * 200 * 129)) --b-dtype bf16
library gemm_77x131x50_tn_f16 gemm 77,131,50 $((2 * 77 * 131 * 50)) --trans-b --a-dtype f16 --b-dtype f16
library gemm_decode_1x2048x1024_b_bf16 gemm 1,2048,1024 $((2 * 2048 * 1024)) --b-dtype bf16
library softmax_33x5000_bf16 softmax 33,5000 0 --dtype bf16
library layernorm_19x3000_f16 layernorm 19,3000 0 --dtype f16
library rmsnorm_37x4096_bf16 rmsnorm 37,4096 0 --dtype bf16
library swiglu_7x3000_f16 swiglu 7,3000 0 --dtype f16
library rope_9x4x64_bf16 rope 9,4,64 0 --dtype bf16
library gelu_10000_f16 gelu 10000 0 --dtype f16
echo "archive: $arch ($(du -sh "$arch" | cut -f1))"
