#!/usr/bin/env bash
# Two agents in two network namespaces joined by a veth pair (10.77.0.1 <-> 10.77.0.2), the
# controller in the first: up -> status -> chat completion through the head's API -> down. Run as
# a real cluster is: the cluster token, mutual TLS on every gRPC connection (controller -> agents
# and the worker's store client -> the head, certificates from `tandemctl certs`), model roots,
# and an API key (the API listens on the veth address).
# Traffic stays inside namespaces this test creates. Needs root and iproute2; otherwise it
# skips (exit 77) saying why. Args: AGENTD TANDEMCTL MODEL_DIR
set -euo pipefail
AGENTD="$1" TANDEMCTL="$2" MODEL="$3"
if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null; then
  echo "netns test SKIPPED: needs root and iproute2"; exit 77
fi
tag="tdm$$"
A="${tag}a" B="${tag}b"
if ! ip netns add "$A" 2>/dev/null; then
  echo "netns test SKIPPED: cannot create network namespaces here"; exit 77
fi
WORK="$(mktemp -d /tmp/tandem-netns-XXXXXX)"
PIDS=()
cleanup() {
  local rc=$?
  if [ "$rc" != 0 ] && [ "$rc" != 77 ]; then
    for n in head worker; do echo "--- agent $n log (tail)"; tail -20 "$WORK/$n.err" 2>/dev/null; done
  fi
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  ip netns del "$A" 2>/dev/null || true
  ip netns del "$B" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
ip netns add "$B"
ip link add "v${tag}a" type veth peer name "v${tag}b"
ip link set "v${tag}a" netns "$A"
ip link set "v${tag}b" netns "$B"
ip -n "$A" addr add 10.77.0.1/24 dev "v${tag}a"
ip -n "$B" addr add 10.77.0.2/24 dev "v${tag}b"
for ns in "$A" "$B"; do ip -n "$ns" link set lo up; done
ip -n "$A" link set "v${tag}a" up
ip -n "$B" link set "v${tag}b" up
echo "secret-$tag-0123456789abcdef" > "$WORK/token"
chmod 600 "$WORK/token"
echo "api-key-$tag-0123456789abcdef" > "$WORK/api.key"
chmod 600 "$WORK/api.key"
MODEL_ROOT="$(dirname "$(readlink -f "$MODEL")")"
cat > "$WORK/certs.yaml" <<YAML
model: {path: $MODEL}
nodes:
  - {name: head, agent: '10.77.0.1:7101'}
  - {name: worker, agent: '10.77.0.2:7101'}
YAML
"$TANDEMCTL" certs -f "$WORK/certs.yaml" --out "$WORK/tls" >/dev/null

start_agent() {  # ns ip name
  ip netns exec "$1" "$AGENTD" --listen "$2:7101" --node-name "$3" --state-dir "$WORK/state-$3" \
    --token-file "$WORK/token" --model-root "$MODEL_ROOT" --tls-cert "$WORK/tls/$3.pem" --tls-key "$WORK/tls/$3.key" \
    --tls-ca "$WORK/tls/ca.pem" >"$WORK/$3.out" 2>"$WORK/$3.err" &
  PIDS+=("$!")
  for _ in $(seq 1 100); do
    grep -q '^tandem-agentd ready' "$WORK/$3.out" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "agent $3 did not start:"; cat "$WORK/$3.err"; return 1
}
start_agent "$A" 10.77.0.1 head
start_agent "$B" 10.77.0.2 worker

cat > "$WORK/cluster.yaml" <<YAML
cluster: netns
model:
  path: $MODEL
  served_name: tiny
parallel:
  tensor: 2
engine:
  backend: cpu
  memory_fraction: 0.05
  kv_tokens: 2048
api:
  listen: 10.77.0.1:8011
  key_file: $WORK/api.key
auth:
  token_file: $WORK/token
tls:
  ca: $WORK/tls/ca.pem
  cert: $WORK/tls/controller.pem
  key: $WORK/tls/controller.key
probe:
  prompt_ids: [1, 2, 3]
  max_tokens: 4
nodes:
  - name: head
    agent: 10.77.0.1:7101
    nccl: {socket_ifname: v${tag}a}
  - name: worker
    agent: 10.77.0.2:7101
    nccl: {socket_ifname: v${tag}b}
YAML
ctl() { ip netns exec "$A" timeout 120 "$TANDEMCTL" "$@"; }
ctl up -f "$WORK/cluster.yaml" --state-dir "$WORK/ctl"
ctl status -f "$WORK/cluster.yaml" --state-dir "$WORK/ctl" --json > "$WORK/status.json"
grep -q '"state": *"serving"' "$WORK/status.json" || { echo "status is not serving:"; cat "$WORK/status.json"; exit 1; }
# A completion through the head's API, from the controller's namespace.
code=$(ip netns exec "$A" curl -sS -o "$WORK/resp.json" -w '%{http_code}' --max-time 30 \
  http://10.77.0.1:8011/v1/completions -H 'Content-Type: application/json' \
  -H "Authorization: Bearer $(cat "$WORK/api.key")" \
  -d '{"model": "tiny", "prompt": [1, 2, 3], "max_tokens": 4, "temperature": 0}')
echo "completion over the veth pair: HTTP $code $(cat "$WORK/resp.json")"
[ "$code" = 200 ] || exit 1
# Without the key: 401.
code=$(ip netns exec "$A" curl -sS -o /dev/null -w '%{http_code}' --max-time 10 http://10.77.0.1:8011/v1/models)
echo "without the API key: HTTP $code"
[ "$code" = 401 ] || exit 1
# The rendezvous store and the agents' gRPC ports speak TLS: a plaintext client gets no answer.
if ip netns exec "$A" curl -s --http2-prior-knowledge --max-time 5 -o /dev/null http://10.77.0.2:7101/ 2>/dev/null; then
  echo "the worker agent answered plaintext HTTP/2"; exit 1
fi
# Gloo between the ranks went over the veth pair: both ends counted bytes.
rx=$(ip netns exec "$B" cat "/sys/class/net/v${tag}b/statistics/rx_bytes")
echo "worker veth rx_bytes: $rx"
ctl down -f "$WORK/cluster.yaml"
ctl status -f "$WORK/cluster.yaml" --state-dir "$WORK/ctl" --json > "$WORK/status.json" || true
grep -q '"state": *"down"' "$WORK/status.json" || { echo "status after down:"; cat "$WORK/status.json"; exit 1; }
echo "netns test PASSED: up over mutual TLS, status serving, completion 200 (401 without the key), down"
