#!/usr/bin/env bash
# Issue 21's rows (batches 1, 8 and 32 at 1k and 4k, the prefill rows; no llama.cpp: scripts/gpu-peer.sh
# has them with it) and issue 15's ratios (the three weight formats in one process), from one
# cuda_decode_bench on the GPU machine. Prints the tables; the whole outputs go to OUT_DIR.
# Usage: scripts/gpu-issue-rows.sh BENCH OUT_DIR [QUANT_BATCHES]   (QUANT_BATCHES default 1,8,32)
# About a minute on an H200; each run has its own deadline (200 s, 170 s).
set -u
bench=${1:?usage: gpu-issue-rows.sh BENCH OUT_DIR [QUANT_BATCHES]} out=${2:?usage: gpu-issue-rows.sh BENCH OUT_DIR [QUANT_BATCHES]}
qb=${3:-1,8,32}
mkdir -p "$out"
t0=$(date +%s)
timeout 200 "$bench" --synthetic qwen3-30b-a3b --batches 1,8,32 --contexts 1024,4096 \
  --prefill 512,2048 --prefill-batch 8x1024 --no-kernel-table > "$out/tandem-bf16.txt" 2>&1
echo "bf16 rc=$? ($(($(date +%s) - t0)) s)"
timeout 170 "$bench" --synthetic qwen3-30b-a3b --weights bf16,fp8,nvfp4 --batches "$qb" \
  --contexts 1024,4096 --prefill= --prefill-batch= --no-kernel-table > "$out/tandem-quant.txt" 2>&1
echo "quant rc=$? ($(($(date +%s) - t0)) s)"
grep -E "^\||GB/s|ceiling|copy" "$out/tandem-bf16.txt" | head -40
sed -n '/^| weights | context/,/^$/p' "$out/tandem-quant.txt"
