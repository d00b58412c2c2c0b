#!/usr/bin/env bash
# Runs the GPU suite on a machine with a GPU, building nothing: the test binaries and the bench
# were built elsewhere (build-cuda) and copied with their shared libraries into one folder:
#   gpu-out/bin/*_cuda_test, gpu-out/bin/cuda_decode_bench, gpu-out/lib/*.so*, gpu-out/testdata/
# (scripts/gpu-pack.sh makes that folder). Prints one summary table last.
# Usage: scripts/gpu-check.sh [GPU_OUT_DIR] [--no-bench | --quant-bench]
#   --quant-bench: the bench runs bf16, FP8 and NVFP4 weights in one process (issue 15's comparison,
#   docs/bench/quant-decode-h200.md) instead of bf16 alone
set -u
dir=${1:-gpu-out}
# shellcheck source=scripts/lib-gpu.sh
. "$(dirname "$0")/lib-gpu.sh"
# gpu-pack.sh leaves bin/ and lib/ in tests.tar.xz: unpacked, the pack's testdata goes beside them.
packed=$dir
dir=$(gpu_unpack_tests "$packed") || { echo "gpu-check: cannot unpack $packed/tests.tar.xz" >&2; exit 1; }
[[ $dir != "$packed" && -d "$packed/testdata" ]] && ln -s "$(cd "$packed" && pwd)/testdata" "$dir/testdata"
bench=1
bench_args=()
[[ "${2:-}" == "--no-bench" ]] && bench=0
[[ "${2:-}" == "--quant-bench" ]] && bench_args=(--weights "bf16,fp8,nvfp4")
export LD_LIBRARY_PATH="$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# The fixtures: the pack's own copy when it has one, else the repository's tests/data, which the
# device machine gets with the working tree (gpu-pack.sh copies none of those: 64 MiB limit).
root=$(cd "$(dirname "$0")/.." && pwd)
if [[ -n "$(ls -A "$dir/testdata" 2>/dev/null)" ]]; then
  export TANDEM_TESTDATA="$dir/testdata"
else
  export TANDEM_TESTDATA="$root/tests/data"
fi
echo "fixtures: $TANDEM_TESTDATA"
# cuBLAS (the prefill GEMMs dlopen libcublas.so.13, else .12; kernels/gemm.h) is not packed: the
# machine's own (lib-gpu.sh gpu_add_cublas).
gpu_add_cublas
log=$(gpu_log_dir gpu-check)
trap 'gpu_pack_logs gpu-check "$log"' EXIT
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv,noheader || true

summary=()
# run_test NAME BINARY [ARGS...]: runs one gtest binary, prints its comparisons, adds a summary row.
run_test() {
  local name=$1 t=$2
  shift 2
  local start rc secs passed failed skipped
  start=$(date +%s.%N)
  "$t" --gtest_color=no "$@" > "$log/$name.log" 2>&1
  rc=$?
  secs=$(awk "BEGIN{print $(date +%s.%N) - $start}")
  passed=$(grep -c '^\[       OK \]' "$log/$name.log")
  failed=$(grep -c '^\[  FAILED  \] .*ms)$' "$log/$name.log")
  skipped=$(grep -c '^\[  SKIPPED \] .*ms)$' "$log/$name.log")
  # The comparisons each test printed (rel err lines), then failures in full.
  grep -E 'rel err|argmax|greedy|logits|nccl|seed|TFLOP|tandem kernels' "$log/$name.log" | head -80
  grep -B2 -A12 'Failure' "$log/$name.log" | head -60
  summary+=("$(printf '%-28s rc=%-3s passed=%-3s failed=%-3s skipped=%-3s %6.1fs' "$name" "$rc" "$passed" "$failed" "$skipped" "$secs")")
}

# Each binary whole: the golden tests' gemm-path and float32-path cases (every multi-token step on
# the prefill paths, or none) are cases of their own, chosen by the model option they pass
# (ModelLoadOptions::cuda_gemm_min_tokens), not by an environment variable.
for t in "$dir"/bin/*cuda*_test; do
  [[ -x "$t" ]] || continue
  run_test "$(basename "$t")" "$t"
done

if [[ $bench == 1 && -x "$dir/bin/cuda_decode_bench" ]]; then
  "$dir/bin/cuda_decode_bench" --synthetic qwen3-30b-a3b ${bench_args[@]+"${bench_args[@]}"} 2>&1 | tee "$log/bench.log"
  summary+=("$(printf '%-28s rc=%s' cuda_decode_bench "${PIPESTATUS[0]}")")
fi

echo
echo "== gpu-check summary =="
printf '%s\n' "${summary[@]}"
