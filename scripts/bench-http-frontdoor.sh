#!/usr/bin/env bash
# The benchmark of docs/bench/http-frontdoor.md: the OpenAI server on cpp-httplib (a tandem-infer
# built at the commit before the switch to tandem_http) against the current one, on the same
# machine, model and requests. Both servers run at once on their own ports, and every run
# measures both back to back (old first in odd runs, new first in even ones), so slow drifts of a
# shared VM hit both alike:
#   /health        wrk, 1 connection (1 thread) and 64 connections (2 threads), WRK_SECONDS each
#   completions    tandem-infer bench-serve (this build's client for both servers): streaming
#                  /v1/completions, token-id prompts, ignore_eos, at concurrency 1 and 64
# Prints one JSON line per measurement, then a table of medians with min..max over the runs.
# Usage: scripts/bench-http-frontdoor.sh OLD_TANDEM_INFER [RUNS]
# Env: BUILD_DIR (build), TANDEM_TESTDATA, WRK_SECONDS (5), REQUESTS_C1 (64), REQUESTS_C64 (256),
#      MAX_TOKENS (32), PROMPT_LEN (32).
set -euo pipefail
cd "$(dirname "$0")/.."
OLD_BIN="${1:?usage: $0 OLD_TANDEM_INFER [RUNS]}"
RUNS="${2:-5}"
NEW_BIN="${BUILD_DIR:-build}/infer/tandem-infer"
DATA="${TANDEM_TESTDATA:-$PWD/tests/data}"
WRK_SECONDS="${WRK_SECONDS:-5}"
command -v wrk >/dev/null || { echo "wrk is not installed (apt-get install wrk)" >&2; exit 1; }
TMP="$(mktemp -d)"
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$TMP"
}
trap cleanup EXIT

# start NAME BIN: serves qwen3moe-tiny on a free port; sets URL_<NAME>.
start() {
  "$2" serve --model "$DATA/qwen3moe-tiny" --port 0 --kv-tokens 65536 --max-num-seqs 64 >"$TMP/$1.out" 2>"$TMP/$1.err" &
  PIDS+=($!)
  for _ in $(seq 1 300); do grep -q "serving model=" "$TMP/$1.out" && break; sleep 0.2; done
  local url
  url="$(grep -o 'http://[^ ]*' "$TMP/$1.out")" || { cat "$TMP/$1.err" >&2; exit 1; }
  printf -v "URL_$1" '%s' "$url"
}
start old "$OLD_BIN"
start new "$NEW_BIN"
echo "# old: $OLD_BIN at $URL_old; new: $NEW_BIN at $URL_new; $(nproc) CPUs; runs: $RUNS" >&2

# health NAME URL RUN CONNECTIONS THREADS
health() {
  local out rps lat non2xx errors
  out="$(wrk -t"$5" -c"$4" -d"${WRK_SECONDS}s" --latency "$2/health")"
  rps="$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")"
  lat="$(awk '$1 == "50%" {print $2}' <<<"$out")"
  non2xx="$(awk '/Non-2xx/ {print $NF}' <<<"$out")"
  errors="$(grep -o 'Socket errors:.*' <<<"$out" || true)"
  printf '{"server":"%s","run":%d,"kind":"health","concurrency":%d,"requests_per_second":%s,"latency_p50":"%s","non_2xx":%s,"socket_errors":"%s"}\n' \
    "$1" "$3" "$4" "$rps" "$lat" "${non2xx:-0}" "$errors"
}

# completions NAME URL RUN CONCURRENCY REQUESTS
completions() {
  "$NEW_BIN" bench-serve --url "$2" --concurrency "$4" --requests "$5" --max-tokens "${MAX_TOKENS:-32}" \
    --prompt-len "${PROMPT_LEN:-32}" --json | sed "s/^{/{\"server\":\"$1\",\"run\":$3,\"kind\":\"completions\",/"
}

for run in $(seq 1 "$RUNS"); do
  order="old new"
  (( run % 2 == 0 )) && order="new old"  # who goes first alternates, so a drift mid-run hits both
  for name in $order; do
    url_var="URL_$name"
    health "$name" "${!url_var}" "$run" 1 1
    health "$name" "${!url_var}" "$run" 64 2
    completions "$name" "${!url_var}" "$run" 1 "${REQUESTS_C1:-64}"
    completions "$name" "${!url_var}" "$run" 64 "${REQUESTS_C64:-256}"
  done
done | tee "$TMP/results.jsonl"

python3 - "$TMP/results.jsonl" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{')]
def stat(kind, c, server, key, sub=None):
    v = [(r[key][sub] if sub else r[key]) for r in rows
         if r['kind'] == kind and r['concurrency'] == c and r['server'] == server]
    return statistics.median(v), min(v), max(v), len(v)
def cell(m):
    return f"{m[0]:.1f} ({m[1]:.1f}..{m[2]:.1f})"
print("\n| measurement | concurrency | old (cpp-httplib) | new (tandem_http) | new / old |")
print("| --- | --- | --- | --- | --- |")
for kind, key, sub, label in [("health", "requests_per_second", None, "/health requests/s"),
                              ("completions", "requests_per_second", None, "completions requests/s"),
                              ("completions", "output_tokens_per_second", None, "completions output tokens/s"),
                              ("completions", "ttft_ms", "p50", "completions TTFT p50 ms"),
                              ("completions", "itl_ms", "p50", "completions ITL p50 ms")]:
    for c in (1, 64):
        o, n = stat(kind, c, "old", key, sub), stat(kind, c, "new", key, sub)
        print(f"| {label} | {c} | {cell(o)} | {cell(n)} | {n[0] / o[0]:.2f} |")
print(f"\nmedian (min..max) over {stat('health', 1, 'old', 'requests_per_second')[3]} runs")
EOF
