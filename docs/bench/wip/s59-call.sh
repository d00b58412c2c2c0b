#!/usr/bin/env bash
# Sessions 58-59's built, unmeasured variants in one call (wip/s58-e4m3-bits = bits, wip/s59-fp8w-f16bits = f16b,
# main = old): e4m3_decode_bench, the kernel tests, the fp8-KV A/B, the FP8-weights A/B, then the goldens.
# About 7 minutes. The pack (here, about 2 minutes with a warm ccache; branches rebuilt from the diffs
# in this folder if they are gone: main + s58-e4m3-bits.diff, then + s59-fp8w-f16bits.diff):
#   scripts/gpu-pack-branches.sh gpu-out/s59 bits=wip/s58-e4m3-bits:bench/cuda_decode_bench,bench/e4m3_decode_bench,tests/kernels/attention_decode_cuda_test,tests/kernels/attention_prefill_cuda_test,tests/engine/cuda/cuda_model_kv_fp8_test,tests/engine/cuda/cuda_model_quant_golden_test,tests/kernels/quant_fp8_cuda_test,tests/kernels/quant_nvfp4_cuda_test,tests/engine/cuda/cuda_llm_engine_hybrid_test f16b=wip/s59-fp8w-f16bits:bench/cuda_decode_bench,tests/kernels/quant_fp8_cuda_test,tests/engine/cuda/cuda_model_quant_golden_test old=main:bench/cuda_decode_bench
#   cp docs/bench/wip/s59-call.sh gpu-out/s59/call.sh
# On the device, carrying gpu-out/s59: bash gpu-out/s59/call.sh
set -u
t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
w=$(mktemp -d /tmp/f-XXXXXX)
tar xJf gpu-out/s59/branches.tar.xz -C "$w"
LD_LIBRARY_PATH=$w/lib timeout 30 "$w/bits/e4m3_decode_bench"
export TANDEM_TESTDATA=$PWD/tests/data
run() { local b=$1 t=$2; shift 2; LD_LIBRARY_PATH=$w/lib timeout 60 "$w/$b/$t" "$@" > "$OUT/$b-$t.log" 2>&1; echo "$b $t rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/$b-$t.log" | tr '\n' ' ') ($(( $(date +%s) - t0 )) s)"; }
for t in attention_decode_cuda_test attention_prefill_cuda_test quant_fp8_cuda_test; do run bits $t; done
run f16b quant_fp8_cuda_test
# fp8 cache in every weight format (the bf16 and NVFP4 rows: the attention change alone); main's bf16 cache beside it
scripts/gpu-run-branches.sh gpu-out/s59 --tag kv --ab "bits old@--kv-dtype=bf16 old" --rounds 3 --deadline 120 --margin 5 -- \
  --synthetic qwen3-30b-a3b --weights bf16,fp8,nvfp4 --kv-dtype fp8 --batches 1,8 --contexts 1024,4096 --prefill= --prefill-batch= --runs 3 --steps 16 --no-kernel-table 2>&1 | grep -v "^AB "
# bf16 cache, FP8 weights: the FP8 decode change alone
scripts/gpu-run-branches.sh gpu-out/s59 --tag fw --ab "bits f16b old" --rounds 3 --deadline 80 --margin 5 -- \
  --synthetic qwen3-30b-a3b --weights fp8 --batches 1,8 --contexts 1024,4096 --prefill= --prefill-batch= --runs 3 --steps 16 --no-kernel-table 2>&1 | grep -v "^AB "
for t in cuda_model_kv_fp8_test cuda_model_quant_golden_test quant_nvfp4_cuda_test cuda_llm_engine_hybrid_test; do run bits $t; done
run f16b cuda_model_quant_golden_test
grep -h -E "Failure" -A4 "$OUT"/*.log | head -16
echo "total $(( $(date +%s) - t0 )) s"
