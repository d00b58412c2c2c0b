#!/usr/bin/env bash
# Same-run A/B of the decode benchmark on a GPU machine: two packed builds (scripts/gpu-pack.sh
# output folders, e.g. the commit before a change and after it), their cuda_decode_bench run
# alternately RUNS times each (B first, so neither side always runs on a warmer GPU), then one
# table: per case the median over runs of each build's per-run median step time, the spread
# (min-max over runs) and B's change against A.
# Usage: scripts/gpu-ab.sh A_DIR B_DIR [RUNS (default 3)] [extra cuda_decode_bench args...]
set -euo pipefail
a_dir=$1 b_dir=$2 runs=${3:-3}
shift $(( $# < 3 ? $# : 3 ))
# shellcheck source=scripts/lib-gpu.sh
. "$(dirname "$0")/lib-gpu.sh"
log=$(gpu_log_dir gpu-ab)
trap 'gpu_pack_logs gpu-ab "$log"' EXIT

a=$(gpu_unpack_tests "$a_dir")
b=$(gpu_unpack_tests "$b_dir")
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader || true

for i in $(seq 1 "$runs"); do
  for side in B A; do
    d=$a
    [[ $side == B ]] && d=$b
    echo "== run $i, build $side"
    LD_LIBRARY_PATH="$d/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
      "$d/bin/cuda_decode_bench" --synthetic qwen3-30b-a3b "$@" > "$log/$side.$i.log" 2>&1
    grep -E '^device-to-device copy' "$log/$side.$i.log" || true
  done
done

# The bench's decode rows: | batch | context | graphs | step ms (median, min-max) | ...
# and prefill rows: | sequences | tokens per sequence | ms (median, min-max) | tokens/s | (builds
# before session 17: | tokens | ms | tokens/s |, one sequence: keyed alike so that the two compare)
python3 - "$log" "$runs" <<'PY'
import glob, os, re, statistics, sys
log, runs = sys.argv[1], int(sys.argv[2])
def cases(path):
    out = {}
    fmt = ''  # "<format> " after the bench's "## weights: <format>" line (several with --weights a,b)
    for line in open(path):
        m = re.match(r'^## weights: (\S+)', line)
        if m:
            fmt = m.group(1) + ' '
            continue
        c = [x.strip() for x in line.strip().strip('|').split('|')]
        if len(c) >= 4 and c[0].isdigit() and c[1].isdigit() and c[2] in ('yes', 'no'):
            out['%sdecode b%s ctx%s graphs=%s' % (fmt, c[0], c[1], c[2])] = float(c[3].split()[0])
        elif len(c) == 3 and c[0].isdigit() and re.match(r'^[\d.]+ \(', c[1]):
            out['%sprefill 1 x %s tokens' % (fmt, c[0])] = float(c[1].split()[0])
        elif len(c) == 4 and c[0].isdigit() and c[1].isdigit() and re.match(r'^[\d.]+ \(', c[2]):
            out['%sprefill %s x %s tokens' % (fmt, c[0], c[1])] = float(c[2].split()[0])
    return out
res = {s: [cases(os.path.join(log, '%s.%d.log' % (s, i))) for i in range(1, runs + 1)] for s in 'AB'}
print('\n| case (ms per step) | A median (min-max over %d runs) | B median (min-max) | B vs A |' % runs)
print('| --- | ---: | ---: | ---: |')
for k in res['A'][0]:
    va = [r[k] for r in res['A'] if k in r]
    vb = [r[k] for r in res['B'] if k in r]
    if not va or not vb:
        continue
    ma, mb = statistics.median(va), statistics.median(vb)
    print('| %s | %.3f (%.3f-%.3f) | %.3f (%.3f-%.3f) | %+.1f%% |' % (k, ma, min(va), max(va), mb, min(vb), max(vb),
                                                                 100 * (mb - ma) / ma))
PY
