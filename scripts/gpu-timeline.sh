#!/usr/bin/env bash
# Kernel timelines of decode steps on the GPU machine: runs cuda_decode_bench once plain and once
# under bench/kernel_trace.cc (the CUPTI injection library) for each --weights / --batches /
# --contexts point, and prints what each kernel adds to a captured step (scripts/kernel_timeline.py).
# The plain run's step time beside the traced one shows what tracing costs.
#
# Usage (on the GPU machine, from the checkout):
#   scripts/gpu-timeline.sh BENCH_BINARY TRACE_LIB OUT_DIR WEIGHTS:BATCH:CONTEXT...
#   e.g. scripts/gpu-timeline.sh /tmp/b/bin/cuda_decode_bench gpu-out/libtandem_kernel_trace.so $OUT \
#          bf16:1:1024 fp8:1:1024
# Environment: TIMELINE_BENCH_ARGS (default "--runs 3 --steps 16"), TIMELINE_LAYER_FROM (the kernel
# that starts a layer in the one-layer listing; default: the q/k norm + RoPE kernel).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
[[ $# -ge 4 ]] || { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
bench=$1 lib=$(cd "$(dirname "$2")" && pwd)/$(basename "$2") out=$3
shift 3
[[ -x $bench && -f $lib ]] || { echo "gpu-timeline: need an executable bench and the trace library" >&2; exit 1; }
mkdir -p "$out"
extra=${TIMELINE_BENCH_ARGS:---runs 3 --steps 16}
for point in "$@"; do
  IFS=: read -r w b c <<< "$point"
  name=$w-b$b-c$c
  # shellcheck disable=SC2086
  args="--synthetic qwen3-30b-a3b --weights $w --batches $b --contexts $c --prefill= --prefill-batch= --no-kernel-table $extra"
  # shellcheck disable=SC2086
  timeout 300 "$bench" $args > "$out/$name-plain.txt" 2>&1 || { echo "gpu-timeline: $name plain run failed" >&2; tail "$out/$name-plain.txt" >&2; exit 1; }
  # shellcheck disable=SC2086
  CUDA_INJECTION64_PATH=$lib TANDEM_KERNEL_TRACE=$out/$name.csv timeout 300 "$bench" $args > "$out/$name-traced.txt" 2>&1 ||
    { echo "gpu-timeline: $name traced run failed" >&2; tail "$out/$name-traced.txt" >&2; exit 1; }
  {
    echo "## $name"
    echo "plain:  $(grep -E "^\| +$b \| +$c \|" "$out/$name-plain.txt" | head -1)"
    echo "traced: $(grep -E "^\| +$b \| +$c \|" "$out/$name-traced.txt" | head -1)"
    python3 "$root/scripts/kernel_timeline.py" "$out/$name.csv" --layers-from "${TIMELINE_LAYER_FROM:-QkNormRope}"
    echo
  } | tee "$out/$name-timeline.md"
  gzip -f "$out/$name.csv"
done
