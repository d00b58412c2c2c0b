#!/usr/bin/env bash
# Session 62's A/B of paced early loads (wip/s62-pace: the batch-1 bf16 o_proj issues its 16 MB of
# early loads in P groups, each once the one before it has landed, and the FP8 and NVFP4 o_proj
# (the split product) the same by groups of its 8 rows; TANDEM_WIP_PACE=P; TANDEM_WIP_ATTN_EARLY=1 lets
# o_proj launch at attention's start, as before session 50). The pack:
# scripts/gpu-pack-branches.sh gpu-out/s62 pace=wip/s62-pace:bench/cuda_decode_bench,tests/kernels/kernels_cuda_test,
# tests/kernels/quant_fp8_cuda_test,tests/kernels/quant_nvfp4_cuda_test,tests/kernels/attention_decode_cuda_test
# main=main:bench/cuda_decode_bench, the trace library copied in, this script as gpu-out/s62/call.sh.
# On the device (carry gpu-out/s62): bash gpu-out/s62/call.sh. The SASS order of the paced loads, the
# product kernel tests under every P, then (only if all pass) the A/B at batch 1, then on an H200
# issue 21's rows and issue 15's ratios on main, then bf16 1k timelines of P=4 and main.
set -u
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
w=$(mktemp -d /tmp/p-XXXXXX)
tar xJf gpu-out/s62/branches.tar.xz -C "$w"
export LD_LIBRARY_PATH=$w/lib
if command -v cuobjdump > /dev/null || [[ -x /usr/local/cuda/bin/cuobjdump ]]; then
  cob=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
  fn=$("$cob" -elf "$w/pace/kernels_cuda_test" 2>/dev/null | grep -o '_ZN6tandem7kernels[A-Za-z0-9_]*MatmulKernelILi1ELi16ELi1ELi4ELi5ELi4E[A-Za-z0-9_]*' | head -1)
  echo "SASS of $fn (loads and the ops between them):"
  "$cob" -sass -fun "$fn" "$w/pace/kernels_cuda_test" 2>/dev/null | grep -E "LDG|LOP3|ACQ|griddep|BAR|EXIT" | head -30
fi
ok=1
for v in 1 2 4 8; do
  for t in kernels_cuda_test:'*MatmulBf16*' quant_fp8_cuda_test:'*Matmul*' quant_nvfp4_cuda_test:'*Matmul*' \
    attention_decode_cuda_test:'*'; do
    TANDEM_WIP_ATTN_EARLY=$((v == 4)) TANDEM_WIP_PACE=$v timeout 120 "$w/pace/${t%%:*}" --gtest_filter="${t#*:}" > "$OUT/test-${t%%:*}-pace$v.log" 2>&1
    rc=$?
    echo "${t%%:*} TANDEM_WIP_PACE=$v rc=$rc $(grep -E '^\[  (PASSED|FAILED)' "$OUT/test-${t%%:*}-pace$v.log" | tr '\n' ' ')"
    ((rc == 0)) || ok=0
  done
done
((ok == 1)) || { echo "a test failed: no A/B"; exit 1; }
scripts/gpu-run-branches.sh gpu-out/s62 --ab "pace%TANDEM_WIP_PACE=2 pace%TANDEM_WIP_PACE=4 pace%TANDEM_WIP_PACE=8 \
  pace%TANDEM_WIP_ATTN_EARLY=1 pace%TANDEM_WIP_PACE=2%TANDEM_WIP_ATTN_EARLY=1 pace%TANDEM_WIP_PACE=4%TANDEM_WIP_ATTN_EARLY=1 \
  pace main" --rounds 5 --deadline "${AB_DEADLINE:-200}" --margin 25 -- --synthetic qwen3-30b-a3b --weights bf16,fp8,nvfp4 \
  --batches 1 --contexts 1024,4096 --prefill= --prefill-batch= --runs 3 --steps 16 --no-kernel-table
# On an H200: issue 21's rows (no llama.cpp) and issue 15's ratios on main, as s61-h200.sh's `rows`.
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && scripts/gpu-issue-rows.sh "$w/main/cuda_decode_bench" "$OUT"
TANDEM_WIP_PACE=4 timeout 60 scripts/gpu-timeline.sh "$w/pace/cuda_decode_bench" gpu-out/s62/libtandem_kernel_trace.so "$OUT/tl-p4" bf16:1:1024 fp8:1:1024 2>&1 | tail -30
timeout 60 scripts/gpu-timeline.sh "$w/main/cuda_decode_bench" gpu-out/s62/libtandem_kernel_trace.so "$OUT/tl-main" bf16:1:1024 fp8:1:1024 2>&1 | tail -30
