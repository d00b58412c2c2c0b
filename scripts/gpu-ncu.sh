#!/usr/bin/env bash
# Nsight Compute on the GPU machine for the kernels of one program whose names match a regex: each
# launch replayed alone with a flushed cache (ncu's defaults: locked base clocks, so its times are
# for comparing kernels with each other, not with a step's), the sections and metrics that say
# whether a kernel waits on memory or on its own instructions, and one summary row per launch
# (scripts/ncu_summary.py). Session 35 found NVFP4's experts' limits this way.
#
# Usage (on the GPU machine, from the checkout):
#   scripts/gpu-ncu.sh OUT_DIR KERNEL_REGEX BINARY [ARGS...]
#   e.g. scripts/gpu-ncu.sh $OUT/ncu 'GateUp|MoeDown' /tmp/x/new/quant_nvfp4_cuda_test \
#          --gtest_filter='*DecodeTimes*'
# Environment: NCU (default: ncu on PATH, else /usr/local/cuda/bin/ncu), NCU_SKIP (launches of the
# matching kernels to skip first, default 20: past warm-up), NCU_COUNT (launches to profile,
# default 2), NCU_TIMEOUT (seconds, default 300). The full report is OUT_DIR/ncu.txt.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
[[ $# -ge 3 ]] || { sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
out=$1 regex=$2
shift 2
[[ -x $1 ]] || { echo "gpu-ncu: $1 is not an executable" >&2; exit 1; }
ncu=${NCU:-$(command -v ncu || echo /usr/local/cuda/bin/ncu)}
[[ -x $ncu ]] || { echo "gpu-ncu: no Nsight Compute ($ncu); set NCU" >&2; exit 1; }
mkdir -p "$out"
rc=0
timeout "${NCU_TIMEOUT:-300}" "$ncu" --kernel-name "regex:$regex" --launch-skip "${NCU_SKIP:-20}" \
  --launch-count "${NCU_COUNT:-2}" --section SpeedOfLight --section Occupancy --section LaunchStats \
  --section WarpStateStats \
  --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,smsp__inst_executed.sum,smsp__warps_launched.sum,dram__bytes_read.sum" \
  "$@" > "$out/ncu.txt" 2>&1 || rc=$?
((rc == 0)) || echo "gpu-ncu: ncu exited with $rc (timeout 124); the report so far is $out/ncu.txt" >&2
python3 "$root/scripts/ncu_summary.py" "$out/ncu.txt"
exit "$rc"
