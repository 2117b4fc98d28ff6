#!/usr/bin/env bash
# Session 39's run W: GQA groups of 5 and 7 with D = 128 (32-key blocks by the library's rule):
# the default against twice the queries a block, with 32 or 64 keys. Each variant is a
# different, equally defined IR with its own CPU bits.
# Usage: exp-cases.sh KILN ARCH
# att NAME SHAPE MASK [options] (scripts/gpu/exp-attention.sh).
source "$(dirname "$0")/../../../../scripts/gpu/exp-attention.sh" "$@"
att g7none_default 1,28,4,512,512,128,128 none
att g7none_16x64 1,28,4,512,512,128,128 none --block 16x64
att g7hc_default 1,28,4,384,384,128,128 causal
att g7hc_16x32 1,28,4,384,384,128,128 causal --block 16x32
att g7hc_16x64 1,28,4,384,384,128,128 causal --block 16x64
att g5_default 1,20,4,512,512,128,128 causal
att g5_16x64 1,20,4,512,512,128,128 causal --block 16x64
att g5none_default 1,20,4,512,512,128,128 none
att g5none_16x32 1,20,4,512,512,128,128 none --block 16x32
att g5none_16x64 1,20,4,512,512,128,128 none --block 16x64
att g5big_default 1,40,8,1024,1024,128,128 causal
att g5big_16x32 1,40,8,1024,1024,128,128 causal --block 16x32
att g5big_16x64 1,40,8,1024,1024,128,128 causal --block 16x64
