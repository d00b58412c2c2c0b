#!/usr/bin/env bash
# A/B of decode settings on the GPU machine: runs the batch-1 decode bench once per variant on the
# packed folder of scripts/gpu-pack.sh, and prints one row per variant: the bench's batch-1 rows.
# A variant is a space-separated list of VAR=value settings for the bench's environment and
# --flags added to the bench's arguments, e.g. "--kv-dtype f32" against "--kv-dtype fp8", or
# "CUDA_DEVICE_MAX_CONNECTIONS=1" against "" (nothing). The kernels read no environment variable
# (a variant that won its A/B becomes the code, docs/cuda.md): a new kernel variant under test is
# a switch of the experiment's own build, or a bench flag where users keep the choice.
# Usage: scripts/gpu-variants.sh GPU_OUT_DIR [--bench-args "ARGS"] VARIANT...
#   default bench args: --synthetic qwen3-30b-a3b --batches 1 --contexts 1024 --prefill 64
#   --prefill-batch= --runs 3 (no batched prefill row: this A/B is about decode)
set -u
dir=${1:?usage: gpu-variants.sh GPU_OUT_DIR [--bench-args ARGS] VARIANT...}
shift
args="--synthetic qwen3-30b-a3b --batches 1 --contexts 1024 --prefill 64 --prefill-batch= --runs 3 --no-kernel-table"
if [[ "${1:-}" == "--bench-args" ]]; then
  args=$2
  shift 2
fi
# shellcheck source=scripts/lib-gpu.sh
. "$(dirname "$0")/lib-gpu.sh"
dir=$(gpu_unpack_tests "$dir") || exit 1
export LD_LIBRARY_PATH="$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
log=$(gpu_log_dir gpu-variants)
trap 'gpu_pack_logs gpu-variants "$log"' EXIT
rows=()
n=0
for v in "$@"; do
  n=$((n + 1))
  settings=()
  flags=()
  for word in $v; do
    if [[ $word == -* || $word != *=* ]]; then flags+=("$word"); else settings+=("$word"); fi
  done
  # shellcheck disable=SC2086  # the args are a word list on purpose
  env ${settings[@]+"${settings[@]}"} "$dir/bin/cuda_decode_bench" $args ${flags[@]+"${flags[@]}"} \
    > "$log/variant-$n.log" 2>&1
  rc=$?
  while IFS= read -r line; do rows+=("$(printf '%-40s %s' "$v" "$line")"); done \
    < <(grep -E '^\| [0-9]+ \| [0-9]+ \| (yes|no) \|' "$log/variant-$n.log")
  [[ $rc != 0 ]] && rows+=("$(printf '%-40s rc=%s (see %s)' "$v" "$rc" "$log/variant-$n.log")")
done
grep -m1 -i 'copy' "$log/variant-1.log" || true
printf '%s\n' "${rows[@]}"
