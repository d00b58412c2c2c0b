#!/usr/bin/env bash
# Issue 21's rows (without llama.cpp: scripts/gpu-peer.sh has them with it) and issue 15's ratios, the
# cases of scripts/lib-gpu.sh, from one cuda_decode_bench on the GPU machine. Prints the tables; the
# whole outputs go to OUT_DIR.
# Usage: scripts/gpu-issue-rows.sh BENCH OUT_DIR [QUANT_BATCHES]   (QUANT_BATCHES default 1,8,32)
# About a minute on an H200; each run has its own deadline (200 s, 170 s).
set -u
# shellcheck source=scripts/lib-gpu.sh
. "$(dirname "$0")/lib-gpu.sh"
bench=${1:?usage: gpu-issue-rows.sh BENCH OUT_DIR [QUANT_BATCHES]} out=${2:?usage: gpu-issue-rows.sh BENCH OUT_DIR [QUANT_BATCHES]}
qb=${3:-1,8,32}
mkdir -p "$out"
t0=$(date +%s)
# shellcheck disable=SC2086  # the argument strings split into words
timeout 200 "$bench" $GPU_TABLE_ARGS > "$out/tandem-bf16.txt" 2>&1
echo "bf16 rc=$? ($(($(date +%s) - t0)) s)"
# shellcheck disable=SC2046  # likewise
timeout 170 "$bench" $(gpu_quant_args "$qb") > "$out/tandem-quant.txt" 2>&1
echo "quant rc=$? ($(($(date +%s) - t0)) s)"
grep -E "^\||GB/s|ceiling|copy" "$out/tandem-bf16.txt" | head -40
gpu_quant_table "$out/tandem-quant.txt"
