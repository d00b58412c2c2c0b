#!/usr/bin/env bash
# Runs the GPU suite on a machine with a GPU, building nothing: the test binaries and the bench
# were built elsewhere (build-cuda) and copied with their shared libraries into one folder:
#   gpu-out/bin/*_cuda_test, gpu-out/bin/cuda_decode_bench, gpu-out/lib/*.so*, gpu-out/testdata/
# (scripts/gpu-pack.sh makes that folder). Prints one summary table last.
# Usage: scripts/gpu-check.sh [GPU_OUT_DIR] [--no-bench]
set -u
dir=${1:-gpu-out}
bench=1
[[ "${2:-}" == "--no-bench" ]] && bench=0
export LD_LIBRARY_PATH="$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export TANDEM_TESTDATA="$dir/testdata"
log=${OUT:-/tmp}/gpu-check
mkdir -p "$log"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv,noheader || true

summary=()
for t in "$dir"/bin/*cuda*_test; do
  [[ -x "$t" ]] || continue
  name=$(basename "$t")
  start=$(date +%s.%N)
  "$t" --gtest_color=no > "$log/$name.log" 2>&1
  rc=$?
  secs=$(awk "BEGIN{print $(date +%s.%N) - $start}")
  passed=$(grep -c '^\[       OK \]' "$log/$name.log")
  failed=$(grep -c '^\[  FAILED  \] .*ms)$' "$log/$name.log")
  skipped=$(grep -c '^\[  SKIPPED \] .*ms)$' "$log/$name.log")
  # The comparisons each test printed (rel err lines), then failures in full.
  grep -E 'rel err|argmax|greedy|logits|nccl|seed' "$log/$name.log" | head -80
  grep -B2 -A12 'Failure' "$log/$name.log" | head -60
  summary+=("$(printf '%-28s rc=%-3s passed=%-3s failed=%-3s skipped=%-3s %6.1fs' "$name" "$rc" "$passed" "$failed" "$skipped" "$secs")")
done

if [[ $bench == 1 && -x "$dir/bin/cuda_decode_bench" ]]; then
  "$dir/bin/cuda_decode_bench" --synthetic qwen3-30b-a3b 2>&1 | tee "$log/bench.log"
  summary+=("$(printf '%-28s rc=%s' cuda_decode_bench "${PIPESTATUS[0]}")")
fi

echo
echo "== gpu-check summary =="
printf '%s\n' "${summary[@]}"
