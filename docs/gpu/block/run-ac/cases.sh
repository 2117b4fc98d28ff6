#!/usr/bin/env bash
# Session 44's run AC: the library's 32-key rule (src/kernels/registry_attention.cpp: no mask,
# D <= 64, 64-row programs in 32-key blocks where three blocks an SM take fewer waves than two)
# on shapes where it picks 32 keys and where it keeps 64, each against the other block; and
# softmax rows of several chunks in two passes (the default) and three (--passes 3).
# Each a different, equally defined IR. Captured by the session's first rule (32 keys for
# 32 < D <= 64, softmax in two passes by default); at a later commit the library's own choice
# differs for mha_d48 (64 keys) and softmax_* (three passes). Usage: cases.sh KILN ARCH
source "$(dirname "$0")/../../../../scripts/gpu/exp-attention.sh" "$@"
export KILN_CACHE_DIR=off
# NAME SHAPE MASK OTHER-BLOCK: the default and the other key block of the same rows
pair() {
  att "$1" "$2" "$3"
  att "$1_other" "$2" "$3" --block "$4"
}
pair bert 4,12,12,512,512,64,64 none 64x64             # 384 programs: 32 keys
pair mha_8x16x512 8,16,16,512,512,64,64 none 64x64     # 1024: 32 keys
pair gqa_2x777 2,32,8,777,777,64,64 none 16x64         # 784: 32 keys
pair mha_d48 4,12,12,512,512,48,48 none 64x64          # D = 48: 32 keys
pair mha_2x12x384 2,12,12,384,384,64,64 none 64x32     # 144: 64 keys
pair mha_3x20x400 3,20,20,400,400,64,64 none 64x32     # 420, two waves either way: 64 keys
pair bert_causal 4,12,12,512,512,64,64 causal 64x32    # causal: 64 keys
for s in 250,10000 500,8192 130,20000 128,4096 200,12000 1000,5000 64,8192 33,5000; do
  sm "softmax_${s/,/x}" $s
  sm "softmax_${s/,/x}_passes3" $s --passes 3 --parts off
done
