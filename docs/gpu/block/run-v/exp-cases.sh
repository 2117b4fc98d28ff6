#!/usr/bin/env bash
# Session 39's run V: GQA groups of 5 and 7 on the GPU. The library's query block (the largest
# power of two with group x BQ <= 64 rows) gives them 40 and 56 rows, which do not spread over 16
# rows of threads: a group of 7 in 8 x 32 blocks runs 448 threads with 4 x 1 scores each and
# spills (run U: 1,28,4,512,512,128,128 at 1.76x torch). Here the default against BQ doubled
# (80 and 112 rows over 16 rows of threads, no spill by ptxas). Each variant is a different,
# equally defined IR with its own CPU bits.
# Usage: exp-cases.sh KILN ARCH
# att NAME SHAPE MASK [options] (scripts/gpu/exp-attention.sh).
source "$(dirname "$0")/../../../../scripts/gpu/exp-attention.sh" "$@"
att g7_default 1,28,4,512,512,128,128 causal
att g7_16x32 1,28,4,512,512,128,128 causal --block 16x32
att g7_16x64 1,28,4,512,512,128,128 causal --block 16x64
att g7none_default 1,28,4,512,512,128,128 none
att g7none_16x32 1,28,4,512,512,128,128 none --block 16x32
att g5_default 1,20,4,512,512,128,128 causal
att g5_16x32 1,20,4,512,512,128,128 causal --block 16x32
att g7d64_default 1,28,4,1024,1024,64,64 causal
att g7d64_16x64 1,28,4,1024,1024,64,64 causal --block 16x64
att g5d64_default 2,10,2,300,300,64,64 causal
att g5d64_16x64 2,10,2,300,300,64,64 causal --block 16x64
