#!/usr/bin/env bash
# Issue 21's table and issue 15's rows on an H200 only (main's bench, llama.cpp in the same run);
# on any other GPU it stops at once, so a call that lands on an H100 costs only its start.
set -u
g=$(nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader); echo "$g"
[[ $g == *H200* ]] || { echo "not an H200: stopping"; exit 3; }
w=$(mktemp -d /tmp/p-XXXXXX)
tar xJf gpu-out/s60/branches.tar.xz -C "$w"
cat "$w/main/COMMIT"
export LD_LIBRARY_PATH=$w/lib
scripts/gpu-peer.sh all gpu-out/p/peer gpu-out/p/tokenizer.json.xz "$w/main/cuda_decode_bench" "$OUT/peer"
