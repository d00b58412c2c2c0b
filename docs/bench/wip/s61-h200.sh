#!/usr/bin/env bash
# Session 61's device calls. The pack: scripts/gpu-pack-branches.sh gpu-out/s61
# s42=27a59d4:bench/cuda_decode_bench main=main:bench/cuda_decode_bench, then cp this script to
# gpu-out/s61/call.sh and gpu-out/tl/libtandem_kernel_trace.so (bench/kernel_trace.cc) into gpu-out/s61.
# Run from the checkout on the device (carry gpu-out/s61, and gpu-out/p for `peer`):
#   bash gpu-out/s61/call.sh peer   H200 only: issue 21's table with llama.cpp in the same run, then
#                                   issue 15's rows (scripts/gpu-peer.sh), about 7 minutes
#   bash gpu-out/s61/call.sh ab     main against session 42's build (27a59d4, the last H200 table's)
#                                   and main with 2 attention buffers, batch 1, the three formats,
#                                   builds alternating (20 s of work on an H100): do sessions 43-60's
#                                   H100 gains hold on this card? (AB_DEADLINE: its seconds, default 560)
#   bash gpu-out/s61/call.sh tl     main's batch-1 kernel timeline at 1k in the three formats (10 s)
#   bash gpu-out/s61/call.sh rows   H200 only: issue 21's rows without llama.cpp, then issue 15's
#                                   ratios (at most 370 s; likely well under a minute)
#   bash gpu-out/s61/call.sh auto   rows on an H200, tl on any other card
set -u
g=$(nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader); echo "$g"
[[ $g != *H200* && ( ${1:-} == peer || ${1:-} == rows ) ]] && { echo "not an H200: no ${1} table"; exit 3; }
mode=${1:-}
# The pack into $w, its shared libraries on the path.
unpack() {
  w=$(mktemp -d /tmp/p-XXXXXX)
  tar xJf gpu-out/s61/branches.tar.xz -C "$w"
  cat "$w/main/COMMIT"
  export LD_LIBRARY_PATH=$w/lib
}
[[ $mode == auto ]] && { [[ $g == *H200* ]] && mode=rows || mode=tl; }
case $mode in
  peer)
    unpack
    exec scripts/gpu-peer.sh all gpu-out/p/peer gpu-out/p/tokenizer.json.xz "$w/main/cuda_decode_bench" "$OUT/peer" ;;
  ab)
    exec scripts/gpu-run-branches.sh gpu-out/s61 --ab "s42 main@--decode-attention-buffers=2 main" --rounds 3 \
      --deadline "${AB_DEADLINE:-560}" -- --synthetic qwen3-30b-a3b --weights bf16,fp8,nvfp4 --batches 1 --contexts 1024,4096 \
      --prefill= --prefill-batch= --runs 3 --steps 16 --no-kernel-table ;;
  tl)
    unpack
    exec scripts/gpu-timeline.sh "$w/main/cuda_decode_bench" gpu-out/s61/libtandem_kernel_trace.so "$OUT/tl" \
      bf16:1:1024 fp8:1:1024 nvfp4:1:1024 ;;
  rows)
    unpack
    exec scripts/gpu-issue-rows.sh "$w/main/cuda_decode_bench" "$OUT" ;;
  *) echo "usage: call.sh peer|rows|auto|ab|tl"; exit 2 ;;
esac
