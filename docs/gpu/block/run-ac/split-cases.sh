#!/usr/bin/env bash
# Session 44's run AC, second archive: prefills of between one and two programs an SM (132 to
# 264 blocks: some SMs run two blocks, the others one), as the library plans them (no split) and
# with their KV in two chunks and a merge (--split 2: twice the programs, each half the keys).
# Each a different, equally defined IR. Usage: split-cases.sh KILN ARCH
source "$(dirname "$0")/../../../../scripts/gpu/exp-attention.sh" "$@"
export KILN_CACHE_DIR=off
two() {  # NAME SHAPE MASK
  att "$1" "$2" "$3"
  att "$1_split2" "$2" "$3" --split 2
}
two d80_causal 1,20,20,512,512,80,80 causal       # 160 programs
two d96_none 2,8,8,700,700,96,96 none             # 176
two gpt2_causal 1,12,12,1024,1024,64,64 causal    # 192
two gpt2_none 1,12,12,1024,1024,64,64 none        # 192
two d128_none 3,8,8,600,600,128,128 none          # 240
two d80_240 1,24,24,640,640,80,80 causal          # 240
two mha_1024 1,16,16,1024,1024,64,64 none         # 256
two gqa_d128 1,32,8,400,400,128,128 causal        # 200 (group 4 x 16 queries)
