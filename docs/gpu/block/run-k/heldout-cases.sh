#!/usr/bin/env bash
# Run K's held-out cases (docs/gpu.md, "Run K"), added to gpu-archive after
# scripts/gpu/capture.sh. Usage (repository root): bash docs/gpu/block/run-k/heldout-cases.sh
# In the run, three of the --digest-only cases (heldout_varlen_prefill, heldout_varlen_mixed,
# heldout_prefill_causal) were captured whole and made digest-only by hand (expected bytes
# removed, "digest" on the output line), so their source lines do not say --digest-only and
# torch_peers.py reports "no GPU output" for their Kiln FP64 check; the replay compared digests.
set -e
k=build/bin/kiln; a=gpu-archive
cap() { "$k" gpu-capture --archive "$a" "$@"; }
cap --case heldout_varlen_prefill --kernel attention --shape 3,16,4,700,600,64,64 --kv-cache dense --mask causal --varlen --arg lens=100,250,350 --arg cu_seqlens=0,100,350,700 --flops $((2*16*(100*101/2+250*251/2+350*351/2)*128)) --digest-only
cap --case heldout_varlen_mixed --kernel attention --shape 6,32,8,264,1024,128,128 --kv-cache dense --mask causal --varlen --arg lens=500,300,1,200,900,120 --arg cu_seqlens=0,1,2,3,203,204,264 --digest-only
cap --case heldout_kv_prefill --kernel attention --shape 3,12,4,128,900,64,32 --kv-cache dense --mask causal --arg lens=128,500,900
cap --case heldout_varlen_paged --kernel attention --shape 4,8,2,300,512,64,64 --kv-cache paged --mask causal --page 32 --pages 70 --varlen --arg lens=37,260,3,512 --arg cu_seqlens=0,37,200,203,300
# new this run
cap --case heldout_varlen_prefill_d96 --kernel attention --shape 5,24,8,1200,640,96,96 --kv-cache dense --mask causal --varlen --arg lens=40,333,77,600,150 --arg cu_seqlens=0,40,373,450,1050,1200 --flops $((2*24*(40*41/2+333*334/2+77*78/2+600*601/2+150*151/2)*192)) --digest-only
cap --case heldout_decode_d96 --kernel attention --shape 2,16,4,1,3001,96,96 --mask none --flops $((2*2*16*3001*192))
cap --case heldout_prefill_causal --kernel attention --shape 1,16,4,384,384,128,128 --mask causal --flops $((2*16*384*385/2*256)) --digest-only
cap --case heldout_gemm_1500x900x700 --kernel gemm --shape 1500,900,700 --flops $((2*1500*900*700)) --digest-only
cap --case heldout_gemm_2x5000x3000 --kernel gemm --shape 2,5000,3000 --flops $((2*2*5000*3000))
cap --case heldout_softmax_64x3000 --kernel softmax --shape 64,3000 --flops 0
cap --case heldout_rmsnorm_29x5120 --kernel rmsnorm --shape 29,5120 --flops 0
