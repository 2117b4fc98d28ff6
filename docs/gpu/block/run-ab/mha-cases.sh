#!/usr/bin/env bash
# Session 43's run AB, second archive: the prefills with one query head per KV head of cases.sh
# in the other blocks, splits and thread counts the options give (each a different, equally
# defined IR with its own CPU bits), to see whether any beats the library's choice.
# Usage: mha-cases.sh KILN ARCH
source "$(dirname "$0")/../../../../scripts/gpu/exp-attention.sh" "$@"
export KILN_CACHE_DIR=off
S=1,12,12,1024,1024,64,64
att gpt2_b32x64 $S causal --block 32x64
att gpt2_b64x32 $S causal --block 64x32
att gpt2_split2 $S causal --split 2
att gpt2_t256 $S causal --set gpu_threads=256
S=4,12,12,512,512,64,64
att bert_b32x64 $S none --block 32x64
att bert_b64x32 $S none --block 64x32
att bert_t256 $S none --set gpu_threads=256
S=1,32,32,1024,1024,128,128
att llama2_b32x32 $S causal --block 32x32
att llama2_split2 $S causal --split 2
att llama2_t256 $S causal --set gpu_threads=256
