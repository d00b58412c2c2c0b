#!/usr/bin/env bash
# Main's bench on an H200 only (on any other GPU it stops at once, so a call that lands on an H100
# costs only its start). Copy into the pack gpu-out/s60 (scripts/gpu-pack-branches.sh gpu-out/s60
# main=main:bench/cuda_decode_bench) and run from the checkout on the device:
#   bash gpu-out/s60/h200.sh        issue 21's rows (tandem alone, shares of the copy bandwidth
#                                   measured in the same run) and issue 15's ratios, about 3 minutes
#   bash gpu-out/s60/h200.sh peer   the same with llama.cpp in the run (scripts/gpu-peer.sh; carry
#                                   gpu-out/p too), about 7 minutes
set -u
g=$(nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader); echo "$g"
[[ $g == *H200* ]] || { echo "not an H200: stopping"; exit 3; }
w=$(mktemp -d /tmp/p-XXXXXX)
tar xJf gpu-out/s60/branches.tar.xz -C "$w"
cat "$w/main/COMMIT"
export LD_LIBRARY_PATH=$w/lib
if [[ ${1:-} == peer ]]; then
  exec scripts/gpu-peer.sh all gpu-out/p/peer gpu-out/p/tokenizer.json.xz "$w/main/cuda_decode_bench" "$OUT/peer"
fi
t0=$(date +%s)
timeout 200 "$w/main/cuda_decode_bench" --synthetic qwen3-30b-a3b --batches 1,8,32 --contexts 1024,4096 \
  --prefill 512,2048 --prefill-batch 8x1024 --no-kernel-table > "$OUT/tandem-bf16.txt" 2>&1; echo "bf16 rc=$? ($(( $(date +%s) - t0 )) s)"
timeout 170 "$w/main/cuda_decode_bench" --synthetic qwen3-30b-a3b --weights bf16,fp8,nvfp4 --batches 1,8,32 \
  --contexts 1024,4096 --prefill= --prefill-batch= --no-kernel-table > "$OUT/tandem-quant.txt" 2>&1; echo "quant rc=$? ($(( $(date +%s) - t0 )) s)"
grep -E "^\||GB/s|ceiling|copy" "$OUT/tandem-bf16.txt" | head -40
sed -n '/^| weights | context/,/^$/p' "$OUT/tandem-quant.txt"
