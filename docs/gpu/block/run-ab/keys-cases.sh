#!/usr/bin/env bash
# Session 43's run AB, second call: prefills without a mask and D <= 64 in the library's blocks
# (64 keys per KV block) and in 32-key blocks of the same rows: whether 32 keys, whose stages
# leave room for three blocks an SM, pay where they take fewer waves of blocks (the first call's
# BERT-like shape: 0.77 of the time). Each a different, equally defined IR.
# Usage: keys-cases.sh KILN ARCH
source "$(dirname "$0")/../../../../scripts/gpu/exp-attention.sh" "$@"
export KILN_CACHE_DIR=off
two() {  # NAME SHAPE BQ
  att "$1" "$2" none
  att "$1_k32" "$2" none --block "$3x32"
}
two bert 4,12,12,512,512,64,64 64
two gqa_777 1,32,8,777,777,64,64 16
two gqa_4x512 4,32,8,512,512,64,64 16
two mha_2x512 2,16,16,512,512,64,64 64
two mha_8x256 8,12,12,256,256,64,64 64
two mha_1024 1,16,16,1024,1024,64,64 64
two gqa_600 2,8,2,600,600,64,64 16
two mha_16x128 16,12,12,128,128,64,64 64
two d32 4,16,16,512,512,32,32 64
# softmax of rows too many for parts by the library's rule (at most SMs/4 rows) and too long to
# be one tile (the first call: 250x10000 at 1.98x torch), in 2, 4 and 10 parts over programs.
for s in 250,10000 500,8192 130,20000; do
  sm "softmax_${s/,/x}" $s
  for p in 2 4 10; do sm "softmax_${s/,/x}_parts$p" $s --parts $p; done
done
