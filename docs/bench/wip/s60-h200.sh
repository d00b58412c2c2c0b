#!/usr/bin/env bash
# Main's bench: on an H200 the acceptance rows, on any other GPU a kernel timeline of main's batch-1
# layer (the H100 tables of issue 21 and 15 are current: main's device code is unchanged since
# session 57). The pack: scripts/gpu-pack-branches.sh gpu-out/s60 main=main:bench/cuda_decode_bench,
# then cp docs/bench/wip/s60-h200.sh gpu-out/s60/h200.sh and gpu-out/tl/libtandem_kernel_trace.so
# (bench/kernel_trace.cc) into gpu-out/s60. Run from the checkout on the device (carry gpu-out/s60):
#   bash gpu-out/s60/h200.sh        H200: issue 21's rows (tandem alone, shares of the copy bandwidth
#                                   measured in the same run) and issue 15's ratios, about 3 minutes;
#                                   other GPUs: the timeline at 1k in the three formats, about 3 minutes
#   bash gpu-out/s60/h200.sh peer   H200 only: the rows with llama.cpp in the run (scripts/gpu-peer.sh;
#                                   carry gpu-out/p too), about 7 minutes
set -u
g=$(nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader); echo "$g"
[[ $g != *H200* && ${1:-} == peer ]] && { echo "not an H200: no peer table"; exit 3; }
w=$(mktemp -d /tmp/p-XXXXXX)
tar xJf gpu-out/s60/branches.tar.xz -C "$w"
cat "$w/main/COMMIT"
export LD_LIBRARY_PATH=$w/lib
if [[ $g != *H200* ]]; then
  exec scripts/gpu-timeline.sh "$w/main/cuda_decode_bench" gpu-out/s60/libtandem_kernel_trace.so "$OUT/tl" \
    bf16:1:1024 fp8:1:1024 nvfp4:1:1024
fi
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
