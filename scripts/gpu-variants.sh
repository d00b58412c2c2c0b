#!/usr/bin/env bash
# A/B of decode settings on the GPU machine: runs the batch-1 decode bench once per variant (each
# variant a space-separated list of VAR=value settings, e.g. "TANDEM_PDL=0") on the packed
# folder of scripts/gpu-pack.sh, and prints one row per variant: the bench's batch-1 rows.
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
if [[ -f "$dir/tests.tar.gz" && ! -d "$dir/bin" ]]; then
  unpacked=$(mktemp -d /tmp/gpu-variants-XXXXXX)
  tar xzf "$dir/tests.tar.gz" -C "$unpacked"
  dir=$unpacked
fi
export LD_LIBRARY_PATH="$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
log=${OUT:-/tmp}/gpu-variants
mkdir -p "$log"
rows=()
n=0
for v in "$@"; do
  n=$((n + 1))
  # shellcheck disable=SC2086  # the variant and the args are word lists on purpose
  env $v "$dir/bin/cuda_decode_bench" $args > "$log/variant-$n.log" 2>&1
  rc=$?
  while IFS= read -r line; do rows+=("$(printf '%-40s %s' "$v" "$line")"); done \
    < <(grep -E '^\| [0-9]+ \| [0-9]+ \| (yes|no) \|' "$log/variant-$n.log")
  [[ $rc != 0 ]] && rows+=("$(printf '%-40s rc=%s (see %s)' "$v" "$rc" "$log/variant-$n.log")")
done
grep -m1 -i 'copy' "$log/variant-1.log" || true
printf '%s\n' "${rows[@]}"
