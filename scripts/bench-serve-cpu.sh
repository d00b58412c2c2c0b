#!/usr/bin/env bash
# The serving benchmark of docs/bench/serve-cpu.md: starts `tandem-infer serve` on the cpu backend
# with qwen3moe-tiny (TP as given), runs `tandem-infer bench-serve` RUNS times at concurrency
# 1, 8, 32, and prints one JSON line per level and run (then stops the server with SIGTERM).
# Usage: scripts/bench-serve-cpu.sh [TP] [RUNS]   Environment: BUILD_DIR (default build),
# TANDEM_TESTDATA, REQUESTS (32), MAX_TOKENS (32), PROMPT_LEN (32).
set -euo pipefail
cd "$(dirname "$0")/.."
TP="${1:-1}"
RUNS="${2:-3}"
BIN="${BUILD_DIR:-build}/infer/tandem-infer"
DATA="${TANDEM_TESTDATA:-$PWD/tests/data}"
OUT="$(mktemp)"
"$BIN" serve --model "$DATA/qwen3moe-tiny" --tp "$TP" --port 0 --kv-tokens 65536 --max-num-seqs 64 >"$OUT" 2>"$OUT.err" &
PID=$!
trap 'kill -TERM $PID 2>/dev/null; wait $PID 2>/dev/null; rm -f "$OUT" "$OUT.err"' EXIT
for _ in $(seq 1 300); do grep -q "serving model=" "$OUT" && break; sleep 0.2; done
URL="$(grep -o 'http://[^ ]*' "$OUT")"
echo "# server: $(head -1 "$OUT") (tp $TP)" >&2
for run in $(seq 1 "$RUNS"); do
  "$BIN" bench-serve --url "$URL" --concurrency 1,8,32 --requests "${REQUESTS:-32}" \
    --max-tokens "${MAX_TOKENS:-32}" --prompt-len "${PROMPT_LEN:-32}" --json | sed "s/^{/{\"run\":$run,\"tp\":$TP,/"
done
