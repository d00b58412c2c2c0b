#!/usr/bin/env bash
# Session 62's third pace call (the second's start failed; this replaces it): main with the bf16 o_proj
# paced in 8 groups (`new`) against the main before it (`old`), beside wip/s62-pace's 16 groups and
# its paced q/k/v chunk. The second call's text:
# Session 62's second pace call: the bf16 one-token o_proj's early loads in 8 or 16 groups (P=8 won
# the first call, -4.0% / -3.9% at batch 1 on an H100) and the bf16 one-token q/k/v product's early
# chunk in 2 or 4 (TANDEM_WIP_PACE_QKV). The pack: scripts/gpu-pack-branches.sh gpu-out/s62c
# new=main:bench/cuda_decode_bench,tests/kernels/kernels_cuda_test old=36a98e7:bench/cuda_decode_bench
# pace=wip/s62-pace:bench/cuda_decode_bench,tests/kernels/kernels_cuda_test,
# the trace library copied in, this script as gpu-out/s62c/call.sh. On the device (carry gpu-out/s62c):
# bash gpu-out/s62c/call.sh. The kernel tests under the switches, the bf16 A/B at batch 1, then on an
# H200 issue 21's rows and issue 15's ratios on main, elsewhere the bf16 1k timelines of P=8 and main.
set -u
g=$(nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader); echo "$g"
w=$(mktemp -d /tmp/p-XXXXXX)
tar xJf gpu-out/s62c/branches.tar.xz -C "$w"
export LD_LIBRARY_PATH=$w/lib
"$w/new/kernels_cuda_test" --gtest_filter='*MatmulBf16*' > /tmp/test-new.log 2>&1 || { echo "new: MatmulBf16 failed"; exit 1; }
echo "new: kernels_cuda_test MatmulBf16 passed"
ok=1
for v in "16 1" "8 2" "8 4"; do
  read -r p q <<< "$v"
  TANDEM_WIP_PACE=$p TANDEM_WIP_PACE_QKV=$q timeout 120 "$w/pace/kernels_cuda_test" \
    --gtest_filter='*MatmulBf16*:*AddRmsnormMatmul*' > "/tmp/test-$p-$q.log" 2>&1
  rc=$?
  echo "kernels_cuda_test PACE=$p PACE_QKV=$q rc=$rc $(grep -E '^\[  (PASSED|FAILED)' "/tmp/test-$p-$q.log" | tr '\n' ' ')"
  ((rc == 0)) || { ok=0; grep -E "Failure|error|mismatch" "/tmp/test-$p-$q.log" | head -5; }
done
((ok == 1)) || { echo "a test failed: no A/B"; exit 1; }
scripts/gpu-run-branches.sh gpu-out/s62c --ab "new pace%TANDEM_WIP_PACE=16 \
  pace%TANDEM_WIP_PACE=8%TANDEM_WIP_PACE_QKV=2 pace%TANDEM_WIP_PACE=8%TANDEM_WIP_PACE_QKV=4 old" --rounds 5 \
  --deadline "${AB_DEADLINE:-150}" --margin 20 -- --synthetic qwen3-30b-a3b --weights bf16 --batches 1 \
  --contexts 1024,4096 --prefill= --prefill-batch= --runs 3 --steps 16 --no-kernel-table 2>&1 | grep -v "^AB "
if [[ $g == *H200* ]]; then
  scripts/gpu-issue-rows.sh "$w/new/cuda_decode_bench" "$OUT" 1
else
  for b in "new 1" "old 1"; do
    read -r n p <<< "$b"
    TANDEM_WIP_PACE=$p timeout 60 scripts/gpu-timeline.sh "$w/$n/cuda_decode_bench" gpu-out/s62c/libtandem_kernel_trace.so \
      "/tmp/tl-$n" bf16:1:1024 > /dev/null 2>&1 || echo "timeline $n failed"
    cp "/tmp/tl-$n/bf16-b1-c1024-timeline.md" "$OUT/tl-$n-bf16.md" 2>/dev/null
    echo "== timeline $n (P=$p)"; sed -n '/^one layer/,$p' "/tmp/tl-$n/bf16-b1-c1024-timeline.md" 2>/dev/null | head -14
  done
fi
# the landed build against the one before it in the other formats and at batch 8 (its paced o_proj is
# bf16 and batch 1 only: these rows should not move)
scripts/gpu-run-branches.sh gpu-out/s62c --ab "new old" --rounds 3 --deadline 60 --margin 10 -- \
  --synthetic qwen3-30b-a3b --weights fp8,nvfp4,bf16 --batches 8 --contexts 1024 --prefill= --prefill-batch= --runs 3 \
  --steps 16 --no-kernel-table 2>&1 | grep -v "^AB "
