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
. "$(dirname "$0")/lib-netns.sh"
netns_pair "netns test" 10.77.0
make_cluster_secrets head=10.77.0.1:7101 worker=10.77.0.2:7101
echo "api-key-$tag-0123456789abcdef" > "$WORK/api.key"
chmod 600 "$WORK/api.key"
MODEL_ROOT="$(dirname "$(readlink -f "$MODEL")")"

netns_start_agent "$A" 10.77.0.1 head
netns_start_agent "$B" 10.77.0.2 worker

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
$(cluster_secrets_yaml)
probe:
  prompt_ids: [1, 2, 3]
  max_tokens: 4
nodes:
  - name: head
    agent: 10.77.0.1:7101
    nccl: {socket_ifname: $VA}
  - name: worker
    agent: 10.77.0.2:7101
    nccl: {socket_ifname: $VB}
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
rx=$(ip netns exec "$B" cat "/sys/class/net/$VB/statistics/rx_bytes")
echo "worker veth rx_bytes: $rx"
ctl down -f "$WORK/cluster.yaml"
ctl status -f "$WORK/cluster.yaml" --state-dir "$WORK/ctl" --json > "$WORK/status.json" || true
grep -q '"state": *"down"' "$WORK/status.json" || { echo "status after down:"; cat "$WORK/status.json"; exit 1; }
echo "netns test PASSED: up over mutual TLS, status serving, completion 200 (401 without the key), down"
