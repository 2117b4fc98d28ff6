#!/usr/bin/env bash
# Session 44's run AC, third archive: the rules made from the first two (32 keys where they take
# fewer waves; causal prefills of one to two programs an SM in 2 chunks; softmax in three
# passes) on shapes they had not seen: each as the library now plans it and as before.
# Each a different, equally defined IR. Usage: rule-cases.sh KILN ARCH
source "$(dirname "$0")/../../../../scripts/gpu/exp-attention.sh" "$@"
export KILN_CACHE_DIR=off
pair() {  # NAME SHAPE MASK OPTIONS-AS-BEFORE...
  local name=$1 shape=$2 mask=$3
  shift 3
  att "$name" "$shape" "$mask"
  att "${name}_before" "$shape" "$mask" "$@"
}
pair big_causal 1,32,8,512,512,128,128 causal --split off
pair g4_768_d128 1,16,4,768,768,128,128 causal --split off
pair mha_1000 1,16,16,1000,1000,64,64 causal --split off
pair mha_8x2048 1,8,8,2048,2048,64,64 causal --split off
pair d96_160 2,10,10,512,512,96,96 causal --split off
pair mha_2x24 2,24,24,512,512,64,64 none --block 64x64
pair mha_6x12 6,12,12,512,512,64,64 none --block 64x64
for s in 300,9000 150,16384 400,6000; do
  sm "softmax_${s/,/x}" $s
  sm "softmax_${s/,/x}_before" $s --passes 2
done
