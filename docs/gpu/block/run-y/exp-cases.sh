#!/usr/bin/env bash
# Session 40's run Y: two blocks of 256 threads per SM (16 warps) instead of two of 128 (8) or
# one of 256. Captured by main's planner (c5c81cc) with two experimental variables, not kept:
# KILN_REGS, the registers a thread is held to (.maxnreg; 128 lets two 256-thread blocks share
# an SM's 64K registers), and KILN_STEP_REGS, the registers a trip of an mma's K steps may take
# (stepMmas, 96). `_t256` cases: gpu_threads=256 as ptxas leaves it (one block per SM).
# Each block size is a different, equally defined IR with its own CPU bits; the registers are
# the same IR.
# Usage: exp-cases.sh KILN ARCH
# att NAME SHAPE MASK [options] (scripts/gpu/exp-attention.sh).
source "$(dirname "$0")/../../../../scripts/gpu/exp-attention.sh" "$@"
export KILN_CACHE_DIR=off
BP=1,32,8,512,512,128,128
att bp_default $BP none
att bp_t256 $BP none --set gpu_threads=256
KILN_REGS=128 att bp_t256_r128 $BP none --set gpu_threads=256
KILN_REGS=128 KILN_STEP_REGS=32 att bp_t256_r128_s32 $BP none --set gpu_threads=256
HC=1,16,4,384,384,128,128
att hc_default $HC causal
KILN_REGS=128 att hc_t256_r128 $HC causal --set gpu_threads=256
N2=1,32,8,1024,1024,128,128
att n2_default $N2 causal
att n2_t256 $N2 causal --set gpu_threads=256
KILN_REGS=128 att n2_t256_r128 $N2 causal --set gpu_threads=256
SQ=1,16,4,1024,1024,64,64
att sq_default $SQ causal
att sq_t256 $SQ causal --set gpu_threads=256
KILN_REGS=128 att sq_t256_r128 $SQ causal --set gpu_threads=256
N1=2,32,8,512,512,64,64
att n1_default $N1 causal
att n1_t256 $N1 causal --set gpu_threads=256
KILN_REGS=128 att n1_t256_r128 $N1 causal --set gpu_threads=256
VL=2,12,4,77,300,64,64
att cp_default $VL causal
KILN_REGS=128 att cp_t256_r128 $VL causal --set gpu_threads=256
