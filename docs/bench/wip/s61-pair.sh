#!/usr/bin/env bash
# Session 61's A/B of the pair merge (wip/s61-attn-pair: batch-1 decode attention at long contexts
# over two 16-block clusters per kv head, TANDEM_WIP_ATTN_PAIR=1). The pack:
# scripts/gpu-pack-branches.sh gpu-out/s61b pair=wip/s61-attn-pair:bench/cuda_decode_bench,tests/kernels/attention_decode_cuda_test
# main=main:bench/cuda_decode_bench, then cp this script to gpu-out/s61b/call.sh. On the device
# (carry gpu-out/s61b): bash gpu-out/s61b/call.sh. The kernel test with the switch off and on, then
# (only if both pass) the A/B: pair on, the same build off, main; batch 1 at 1k and 4k, three formats.
set -u
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
w=$(mktemp -d /tmp/p-XXXXXX)
tar xJf gpu-out/s61b/branches.tar.xz -C "$w"
export LD_LIBRARY_PATH=$w/lib
ok=1
for v in 0 1; do
  TANDEM_WIP_ATTN_PAIR=$v timeout 90 "$w/pair/attention_decode_cuda_test" > "$OUT/test-pair$v.log" 2>&1
  rc=$?
  echo "attention_decode_cuda_test TANDEM_WIP_ATTN_PAIR=$v rc=$rc"
  grep -E "^\[  (PASSED|FAILED) |pair merge|decode 1 x ctx" "$OUT/test-pair$v.log" | head -12
  ((rc == 0)) || ok=0
done
((ok == 1)) || { echo "a test failed: no A/B"; exit 1; }
exec scripts/gpu-run-branches.sh gpu-out/s61b --ab "pair%TANDEM_WIP_ATTN_PAIR=1 pair main" --rounds 5 \
  --deadline "${AB_DEADLINE:-150}" --margin 25 -- --synthetic qwen3-30b-a3b --weights bf16,fp8,nvfp4 --batches 1 \
  --contexts 1024,4096 --prefill= --prefill-batch= --runs 3 --steps 16 --no-kernel-table
