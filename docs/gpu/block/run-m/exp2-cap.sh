#!/usr/bin/env bash
# usage: cap.sh BIN SUFFIX ARCH
bin=$1; sfx=$2; A=$3
att() { local name=$1 shape=$2; shift 2; IFS=, read -r b hq hkv q k d dv <<<"$shape"; $bin gpu-capture --archive $A --case $name$sfx --kernel attention --shape $shape --flops $((2*b*hq*q*k*(d+dv))) --digest-only "$@" | tail -1; }
gemm() { local name=$1 shape=$2; IFS=, read -r m n k <<<"$shape"; $bin gpu-capture --archive $A --case $name$sfx --kernel gemm --shape $shape --flops $((2*m*n*k)) --digest-only | tail -1; }
att big_prefill 1,32,8,512,512,128,128 --mask none
att causal_sq 1,16,4,1024,1024,64,64 --mask causal
att causal_prefill 2,12,4,77,300,64,64 --mask causal
att small_prefill 1,4,2,32,65,32,32 --mask none
att decode4096 1,32,8,1,4096,128,128 --mask none
att heldout_causal_d128 1,16,4,384,384,128,128 --mask causal
gemm gemm_4096 4096,4096,4096
gemm gemm_1024 1024,1024,1024
gemm gemm_300x200x129 300,200,129
