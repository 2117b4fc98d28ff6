#!/usr/bin/env bash
# Session 39's run T: with the grid's longest programs first (the planner's default since this
# session, docs/gpu.md "Program order"), the splits and blocks of the causal prefills still
# slower than torch, or near it, again: a split's chunks and a block's rows trade against the
# last wave, which the order changed. `*_asw` cases: the same IR as written
# (gpu_heavy_first=off), paired. Each variant is a different, equally defined IR with its own
# CPU bits (a block or a split), or the same IR in another grid order (the same bits).
# Usage: exp-cases.sh KILN ARCH
# att NAME SHAPE MASK [options] (scripts/gpu/exp-attention.sh).
source "$(dirname "$0")/../../../../scripts/gpu/exp-attention.sh" "$@"
HC=1,16,4,384,384,128,128
att hc_default $HC causal
att hc_asw $HC causal --set gpu_heavy_first=off
att hc_split2 $HC causal --split 2
att hc_split4 $HC causal --split 4
att hc_split6 $HC causal --split 6
att hc_8x32_split6 $HC causal --block 8x32 --split 6
N2=1,32,8,1024,1024,128,128
att n2_default $N2 causal
att n2_asw $N2 causal --set gpu_heavy_first=off
att n2_16x64 $N2 causal --block 16x64
att n2_8x32 $N2 causal --block 8x32
SQ=1,16,4,1024,1024,64,64
att sq_default $SQ causal
att sq_asw $SQ causal --set gpu_heavy_first=off
att sq_split2 $SQ causal --split 2
att sq_32x32 $SQ causal --block 32x32
att sq_32x32_split2 $SQ causal --block 32x32 --split 2
att sq_16x32 $SQ causal --block 16x32
N1=2,32,8,512,512,64,64
att n1_default $N1 causal
att n1_asw $N1 causal --set gpu_heavy_first=off
att n1_16x32 $N1 causal --block 16x32
att n1_32x32 $N1 causal --block 32x32
# A causal shape not timed before: Llama-3-8B-like GQA prefill of 2048 tokens, D = 128.
L3=1,32,8,2048,2048,128,128
att l3_default $L3 causal
att l3_asw $L3 causal --set gpu_heavy_first=off
M2=1,12,4,150,600,64,64
att m2_default $M2 causal
att m2_asw $M2 causal --set gpu_heavy_first=off
