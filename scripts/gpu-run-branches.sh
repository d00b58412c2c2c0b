#!/usr/bin/env bash
# Runs a pack of scripts/gpu-pack-branches.sh on the GPU machine in one call: the test binaries of
# the named builds (each under a timeout), then a same-run A/B of their cuda_decode_bench with the
# given arguments, the builds alternating round by round (in the order given: put the reference
# last or first, as the A/B wants). Stops starting work when fewer than MARGIN seconds are left of
# DEADLINE (the call's limit), so the summary and the logs still come back. Prints one line per test
# binary and per bench run: the step ms of every graphed decode row ("b<batch>:<ms> (<min-max>)")
# and the tokens/s of every prefill row, then one table (scripts/ab_summary.py: per row and build
# the median of the rounds' medians with their min-max, against the last build named); logs in
# $OUT/branches[-TAG]-logs.tar.gz. --once BINARY runs
# that binary of each A/B build once (no arguments) before the A/B, its output kept in the logs and
# its last lines printed (e.g. prefill_gemm_bench). An A/B name may carry bench flags of its own
# after '@' (BUILD@FLAG[@FLAG...], e.g. "main main@--quant-prefill-split"): that build's bench with
# those flags added, a variant of one build against itself; and environment variables after '%'
# (BUILD[@FLAG...]%VAR=VALUE[%VAR=VALUE...], e.g. "wip%TANDEM_WIP_X=1 wip%TANDEM_WIP_X=2 main"): that
# build's bench run with them set (a host switch's settings against each other in one A/B).
# Usage: scripts/gpu-run-branches.sh PACK_DIR [--tests "NAME..."] [--ab "NAME..."] [--rounds N]
#          [--once BINARY] [--tag TAG] [--deadline SECONDS] [--margin SECONDS] [-- BENCH_ARGS...]
#   default bench args: --synthetic qwen3-30b-a3b --batches 1,8,32 --contexts 1024 --prefill=
#   --prefill-batch= --runs 3 --steps 16 --no-kernel-table; --rounds 3, --deadline 560, --margin 60
set -u
pack=${1:?usage: gpu-run-branches.sh PACK_DIR [--tests NAMES] [--ab NAMES] [--rounds N] [-- BENCH_ARGS...]}
shift
tests="" ab="" rounds=3 deadline=560 margin=60 once="" tag=""
while (($# > 0)); do
  case $1 in
    --tests) tests=$2; shift 2 ;;
    --ab) ab=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --once) once=$2; shift 2 ;;
    --tag) tag=-$2; shift 2 ;;
    --deadline) deadline=$2; shift 2 ;;
    --margin) margin=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "gpu-run-branches: unknown argument $1" >&2; exit 1 ;;
  esac
done
args=("$@")
# shellcheck disable=SC2054  # the commas are the bench's list syntax
((${#args[@]} > 0)) || args=(--synthetic qwen3-30b-a3b --batches 1,8,32 --contexts 1024 --prefill= --prefill-batch=
                           --runs 3 --steps 16 --no-kernel-table)
# shellcheck source=scripts/lib-gpu.sh
. "$(dirname "$0")/lib-gpu.sh"
root=$(cd "$(dirname "$0")/.." && pwd)
w=$(mktemp -d /tmp/gpu-branches-XXXXXX)
tar xJf "$pack/branches.tar.xz" -C "$w" || { echo "gpu-run-branches: cannot unpack $pack/branches.tar.xz" >&2; exit 1; }
log=$(gpu_log_dir "branches$tag")
trap 'gpu_pack_logs "branches$tag" "$log"' EXIT
export LD_LIBRARY_PATH="$w/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
gpu_add_cublas
export TANDEM_TESTDATA=${TANDEM_TESTDATA:-$root/tests/data}
start=$SECONDS
left() { ((SECONDS - start < deadline - margin)); }
# The builds of a list of names, once each in order (an A/B name's @-flags and %-variables dropped).
builds_of() { printf '%s\n' "$@" | sed 's/[@%].*//' | awk '!seen[$0]++'; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader 2>/dev/null || echo "no nvidia-smi"
# shellcheck disable=SC2086  # word lists
for v in $(builds_of $ab $tests); do
  echo "$v: $(cat "$w/$v/COMMIT" 2>/dev/null || echo 'not in the pack')"
done
for v in $tests; do
  for t in "$w/$v"/*_test; do
    [[ -x $t ]] || continue
    left || { echo "deadline: tests stopped"; break 2; }
    n=$v.$(basename "$t")
    timeout 180 "$t" > "$log/$n.log" 2>&1
    rc=$?
    echo "TEST $n rc=$rc $(grep -E '^\[  (PASSED|FAILED) ' "$log/$n.log" | tr '\n' ' ')($((SECONDS - start)) s)"
  done
done
if [[ -n $once ]]; then
  # shellcheck disable=SC2086  # a word list
  for v in $(builds_of $ab); do
    left || break
    timeout 120 "$w/$v/$once" > "$log/once.$v.log" 2>&1
    echo "ONCE $v $once rc=$?"
    tail -n 4 "$log/once.$v.log" | sed "s/^/  $v: /"
  done
fi
for r in $(seq 1 "$rounds"); do
  for v in $ab; do
    left || { echo "deadline: A/B stopped in round $r"; break 2; }
    f=$log/ab.$v.$r.log
    name=${v%%\%*}  # BUILD[@FLAG...]; the rest: %VAR=VALUE assignments
    vars=()
    [[ $v == *%* ]] && IFS=% read -r -a vars <<< "${v#*%}"
    extra=()  # BUILD@FLAG@FLAG: the variant's own flags
    [[ $name == *@* ]] && IFS=@ read -r -a extra <<< "${name#*@}"
    env "${vars[@]}" timeout 240 "$w/${name%%@*}/cuda_decode_bench" "${args[@]}" "${extra[@]}" > "$f" 2>&1
    rc=$?
    dec=$(grep -E '^\| +[0-9]+ \| +[0-9]+ \| yes \|' "$f" | awk -F'|' '{printf "b%d:%s ", $2, $5}')
    pf=$(grep -E '^\| +[0-9]+ \| +[0-9]+ \| [0-9.]+ \(' "$f" | awk -F'|' '{printf "%dx%d:%s tok/s ", $2, $3, $5}')
    echo "AB $v r$r rc=$rc $dec$pf"
  done
done
# One table: per row and build the median of the rounds' medians (min-max, rounds), against the last build.
if [[ -n $ab ]] && command -v python3 > /dev/null; then
  # shellcheck disable=SC2086  # a word list
  python3 "$(dirname "$0")/ab_summary.py" "$log" $ab
fi
echo "elapsed $((SECONDS - start)) s"
