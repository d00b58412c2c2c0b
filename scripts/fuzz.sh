#!/usr/bin/env bash
# Builds every libFuzzer target with clang (ASan + UBSan + libFuzzer, build dir build-fuzz),
# runs each for a share of a fixed budget, and appends a dated table (executions, exec/s,
# coverage, corpus, crashes, the exact command) to docs/fuzz.md. Exits 1 if any target crashed;
# the crashing inputs are kept and named.
#
# Usage: scripts/fuzz.sh [--seconds TOTAL] [--runs N] [--targets a,b,...] [--no-record]
#   --seconds TOTAL  wall-clock budget shared equally by the targets        [600]
#   --runs N         also stop each target after N executions               [no limit]
#   --targets LIST   only these targets (names as in tests/fuzz/<name>_fuzz.cc) [all]
#   --no-record      print the table, leave docs/fuzz.md alone
# Environment: FUZZ_BUILD_DIR [build-fuzz], FUZZ_WORK (corpora, crashes, logs)
# [$FUZZ_BUILD_DIR/fuzz-work], FUZZ_NICE (niceness of the fuzzers) [10].
# Targets are found by the build (tests/fuzz/*.cmake -> <build>/tests/fuzz/fuzz_targets.tsv), so
# a new target is picked up without touching this script. Each run starts from its seed corpus
# tests/fuzz/corpus/<name>/ plus what earlier runs in FUZZ_WORK found.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"

seconds=600
runs=""
only=""
record=1
args_text="$*"
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --targets) only="$2"; shift 2 ;;
    --no-record) record=0; shift ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "fuzz.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
case "$seconds" in ''|*[!0-9]*) echo "fuzz.sh: --seconds wants a whole number" >&2; exit 2 ;; esac
case "$runs" in *[!0-9]*) echo "fuzz.sh: --runs wants a whole number" >&2; exit 2 ;; esac

BUILD_DIR="${FUZZ_BUILD_DIR:-build-fuzz}"
WORK="${FUZZ_WORK:-$BUILD_DIR/fuzz-work}"
mkdir -p "$WORK"
WORK="$(cd "$WORK" && pwd)"
NICE="${FUZZ_NICE:-10}"
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-true}"
export TANDEM_TESTDATA="${TANDEM_TESTDATA:-$PWD/tests/data}"

# What is built, read before the build (the tree may change while the fuzzers run).
built_from="commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . 2>/dev/null || echo ' (with uncommitted changes)')"
echo "fuzz.sh: building the fuzz targets in $BUILD_DIR (clang, ASan + UBSan + libFuzzer)" >&2
CC=clang CXX=clang++ cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DTANDEM_CUDA=OFF -DTANDEM_FUZZ=ON >/dev/null

# The manifest is written when the build is configured: only the chosen targets are built.
manifest="$BUILD_DIR/tests/fuzz/fuzz_targets.tsv"
names=()
while IFS=$'\t' read -r name _ _; do
  if [ -z "$only" ] || [[ ",$only," == *",$name,"* ]]; then names+=("$name"); fi
done < "$manifest"
[ ${#names[@]} -gt 0 ] || { echo "fuzz.sh: no targets (manifest $manifest, --targets '$only')" >&2; exit 2; }
cmake --build "$BUILD_DIR" --target "${names[@]/%/_fuzz}"
per_target=$(( seconds / ${#names[@]} ))
[ "$per_target" -ge 1 ] || per_target=1

# A report ends the run at once; leaks are checked after inputs that allocated more than they freed.
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:strict_string_checks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"

rows=()
total_execs=0
total_crashes=0
started="$(date -u +%Y-%m-%dT%H:%MZ)"
for name in "${names[@]}"; do
  IFS=$'\t' read -r _ max_len corpus < <(grep -P "^${name}\t" "$manifest")
  bin="$BUILD_DIR/tests/fuzz/${name}_fuzz"
  dir="$WORK/$name"
  mkdir -p "$dir/corpus" "$dir/crashes" "$dir/tmp"
  cp -n "$corpus"/* "$dir/corpus/" 2>/dev/null || true
  start_units=$(find "$dir/corpus" -type f | wc -l)
  rm -f "$dir/crashes"/*
  cmd=("$bin" "-max_total_time=$per_target" "-max_len=$max_len" "-timeout=30" "-rss_limit_mb=4096"
       "-print_final_stats=1" "-artifact_prefix=$dir/crashes/" "$dir/corpus")
  [ -n "$runs" ] && cmd+=("-runs=$runs")
  echo "fuzz.sh: $name for ${per_target} s: ${cmd[*]}" >&2
  set +e
  # Temp files of the target (the agent's sandbox) stay inside the work dir, even after a crash.
  TMPDIR="$dir/tmp" nice -n "$NICE" "${cmd[@]}" > "$dir/fuzz.log" 2>&1
  rc=$?
  set -e
  final_stat() { grep -m1 "^stat::$1:" "$dir/fuzz.log" | awk '{print $2}' || true; }
  execs=$(final_stat number_of_executed_units)
  if [ -z "$execs" ]; then  # no final stats (killed): the last status line has the count
    execs=$(grep -oP '^#\K[0-9]+' "$dir/fuzz.log" | tail -1 || true)
  fi
  execs=${execs:-0}
  rate=$(final_stat average_exec_per_sec)
  new_units=$(final_stat new_units_added)
  cov=$(grep -oP 'cov: \K[0-9]+' "$dir/fuzz.log" | tail -1 || true)
  ft=$(grep -oP 'ft: \K[0-9]+' "$dir/fuzz.log" | tail -1 || true)
  end_units=$(find "$dir/corpus" -type f | wc -l)
  # slow-unit-* files are only slow, not failures.
  crashes=$(find "$dir/crashes" -type f \( -name "crash-*" -o -name "leak-*" -o -name "timeout-*" -o -name "oom-*" \) | sort)
  ncrash=$(printf '%s' "$crashes" | grep -c . || true)
  if [ "$rc" -ne 0 ] && [ "$ncrash" -eq 0 ]; then ncrash=1; crashes="(exit $rc, no input saved: see $dir/fuzz.log)"; fi
  total_execs=$((total_execs + execs))
  total_crashes=$((total_crashes + ncrash))
  if [ "$ncrash" -gt 0 ]; then
    echo "fuzz.sh: $name CRASHED (exit $rc); inputs: $crashes; log: $dir/fuzz.log" >&2
    grep -m5 -E "ERROR: |runtime error:|agent_rpc_fuzz: |==[0-9]+==" "$dir/fuzz.log" >&2 || true
  fi
  shown_cmd="${cmd[*]}"
  shown_cmd="${shown_cmd//$ROOT\//}"
  crash_cell="$ncrash"
  if [ "$ncrash" -gt 0 ]; then crash_cell="$ncrash: $(echo $crashes | sed "s|$ROOT/||g")"; fi
  rows+=("| $name | $execs | ${rate:-?} | ${cov:-?} / ${ft:-?} | $start_units -> $end_units (+${new_units:-0}) | $crash_cell | \`nice -n $NICE $shown_cmd\` |")
done

table="| target | executions | exec/s | coverage (edges / features) | corpus files (new) | crashes | command |
| --- | ---: | ---: | ---: | ---: | --- | --- |
$(printf '%s\n' "${rows[@]}")
| **total** | **$total_execs** | | | | **$total_crashes** | |"

echo
echo "$table"
if [ "$record" = 1 ]; then
  {
    echo
    echo "### Run of $started"
    echo
    echo "\`scripts/fuzz.sh${args_text:+ $args_text}\` at $built_from,"
    echo "$(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')), $(clang --version | head -1),"
    echo "${per_target} s per target${runs:+, at most $runs runs each}, fuzzers at nice $NICE."
    echo
    echo "$table"
  } >> docs/fuzz.md
  echo "fuzz.sh: appended the run to docs/fuzz.md" >&2
fi
[ "$total_crashes" -eq 0 ] || { echo "fuzz.sh: $total_crashes crash(es): fix the parser and add the input to tests/fuzz/corpus/<name>/" >&2; exit 1; }
