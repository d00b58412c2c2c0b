#!/usr/bin/env bash
# The local preflight demo: two real tandem-agentd processes on this machine (its real /sys and
# /proc, separate state dirs, loopback ports chosen by the OS), a small model folder copied
# once per "node", and `tandemctl preflight` comparing them. Exits with preflight's code
# (0 pass, warnings allowed; 1 a check failed; 2 bad config).
#
# On a machine without an NVIDIA driver or RDMA devices (a CI box) the honest verdicts are
# warnings: "no NVIDIA driver" on both nodes (parity holds) and "no RDMA devices" (NCCL/Gloo
# would use the socket transport). Environment: BUILD_DIR (default build), EXTRA_ARGS (passed
# to tandemctl preflight, e.g. --json).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${BUILD_DIR:-build}"

if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  [ -z "${TANDEM_CUDA:-}" ] && ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ] && export PATH="/usr/local/cuda/bin:$PATH"
  cmake -S . -B "$BUILD_DIR" -G Ninja >&2
fi
cmake --build "$BUILD_DIR" --target tandem-agentd tandemctl >&2  # stdout stays the report (--json)
AGENTD="$BUILD_DIR/agentd/tandem-agentd"
TANDEMCTL="$BUILD_DIR/controller/tandemctl"

WORK="$(mktemp -d /tmp/tandem-demo-XXXXXX)"
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

# A small model folder (not a real model: preflight only looks at files and their digests),
# under the agents' model root.
MODEL_ROOT="$WORK/models"
mkdir -p "$WORK/model"
cat > "$WORK/model/config.json" <<'JSON'
{"model_type": "qwen3_moe", "hidden_size": 64, "num_hidden_layers": 2, "num_experts": 4}
JSON
echo '{"model": {"type": "BPE", "vocab": {}}}' > "$WORK/model/tokenizer.json"
head -c 4000000 /dev/urandom > "$WORK/model/model-00001-of-00002.safetensors"
head -c 3000000 /dev/urandom > "$WORK/model/model-00002-of-00002.safetensors"
mkdir -p "$MODEL_ROOT"
mv "$WORK/model" "$MODEL_ROOT/model"
cp -r "$MODEL_ROOT/model" "$MODEL_ROOT/model-node1"
cp -r "$MODEL_ROOT/model" "$MODEL_ROOT/model-node2"

. scripts/lib-agents.sh  # make_cluster_secrets, start_agent (cwd is the repository root)
make_cluster_secrets node1 node2
start_agent node1 --metrics-listen 127.0.0.1:0 > "$WORK/node1.addr"
start_agent node2 --metrics-listen 127.0.0.1:0 > "$WORK/node2.addr"
ADDR1="$(cat "$WORK/node1.addr")"
ADDR2="$(cat "$WORK/node2.addr")"
echo "demo: agents node1=$ADDR1 node2=$ADDR2 (this machine's /sys and /proc)" >&2

cat > "$WORK/cluster.yaml" <<YAML
# Written by scripts/demo-preflight.sh: two agents on one machine.
cluster: local-demo
model:
  path: $MODEL_ROOT/model
parallel:
  tensor: 2
engine:
  # Preflight loads nothing; a shared development machine rarely has 70% of its memory free.
  memory_fraction: 0.50
$(cluster_secrets_yaml)
nodes:
  - name: node1
    agent: "$ADDR1"
    model_path: $MODEL_ROOT/model-node1
  - name: node2
    agent: "$ADDR2"
    model_path: $MODEL_ROOT/model-node2
YAML

set +e
"$TANDEMCTL" preflight -f "$WORK/cluster.yaml" ${EXTRA_ARGS:-}
rc=$?
set -e
echo "demo: tandemctl preflight exited $rc" >&2
exit "$rc"
