#!/usr/bin/env bash
# Issue 21's rows (tandem alone: shares of the copy bandwidth measured in the same run) and issue
# 15's ratios, main's bench, on an H200 only; on any other GPU it stops at once.
set -u
g=$(nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader); echo "$g"
[[ $g == *H200* ]] || { echo "not an H200: stopping"; exit 3; }
w=$(mktemp -d /tmp/p-XXXXXX)
tar xJf gpu-out/s60/branches.tar.xz -C "$w"
cat "$w/main/COMMIT"
export LD_LIBRARY_PATH=$w/lib
t0=$(date +%s)
timeout 200 "$w/main/cuda_decode_bench" --synthetic qwen3-30b-a3b --batches 1,8,32 --contexts 1024,4096 \
  --prefill 512,2048 --prefill-batch 8x1024 --no-kernel-table > "$OUT/tandem-bf16.txt" 2>&1; echo "bf16 rc=$? ($(( $(date +%s) - t0 )) s)"
timeout 170 "$w/main/cuda_decode_bench" --synthetic qwen3-30b-a3b --weights bf16,fp8,nvfp4 --batches 1,8,32 \
  --contexts 1024,4096 --prefill= --prefill-batch= --no-kernel-table > "$OUT/tandem-quant.txt" 2>&1; echo "quant rc=$? ($(( $(date +%s) - t0 )) s)"
grep -v "^\s*$" "$OUT/tandem-bf16.txt" | grep -E "^\||GB/s|ceiling|copy" | head -40
sed -n '/^| weights | context/,/^$/p' "$OUT/tandem-quant.txt"
