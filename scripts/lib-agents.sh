# Sourced by the demo scripts and the network-namespace tests (tests/integration/lib-netns.sh).
# Needs AGENTD, TANDEMCTL, WORK, MODEL_ROOT and a PIDS array in the caller. The local agents run
# the way a real cluster should: the cluster token, mutual TLS with certificates from
# `tandemctl certs`, and a model root.

# make_cluster_secrets NAME[=HOST:PORT]...: writes $WORK/token (0600) and, through `tandemctl
# certs`, a CA and one certificate per node (for HOST; 127.0.0.1 when only a name is given) plus
# the controller's into $WORK/tls.
make_cluster_secrets() {
  head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$WORK/token"
  chmod 600 "$WORK/token"
  {
    echo "model: {path: ${MODEL_ROOT:-/m}}"
    echo "nodes:"
    local i=1 node
    for node in "$@"; do
      [[ $node == *=* ]] || node="$node=127.0.0.1:$i"
      echo "  - {name: ${node%%=*}, agent: '${node#*=}'}"
      i=$((i + 1))
    done
  } > "$WORK/certs.yaml"
  "$TANDEMCTL" certs -f "$WORK/certs.yaml" --out "$WORK/tls" >/dev/null
}

# The cluster.yaml lines that match make_cluster_secrets.
cluster_secrets_yaml() {
  cat <<YAML
auth:
  token_file: $WORK/token
tls:
  ca: $WORK/tls/ca.pem
  cert: $WORK/tls/controller.pem
  key: $WORK/tls/controller.key
YAML
}

# The cluster.yaml tail of a local two-agent cluster: the probe, NCCL over loopback, and the
# agents whose addresses start_agent's callers wrote to $WORK/node1.addr and $WORK/node2.addr.
two_local_nodes_yaml() {
  cat <<YAML
probe:
  prompt: "The capital of France is"
  max_tokens: 8
nccl:
  socket_ifname: lo
nodes:
  - name: node1
    agent: $(cat "$WORK/node1.addr" 2>/dev/null)
  - name: node2
    agent: $(cat "$WORK/node2.addr" 2>/dev/null)
YAML
}

# wait_agent_ready NAME TENTHS: waits (TENTHS x 0.1 s at most) for the ready line of the agent
# whose stdout is $WORK/NAME.out and prints its gRPC address; else prints $WORK/NAME.err and fails.
wait_agent_ready() {
  for _ in $(seq 1 "$2"); do
    if grep -q '^tandem-agentd ready' "$WORK/$1.out" 2>/dev/null; then
      sed -n 's/^tandem-agentd ready .*grpc=\([^ ]*\).*/\1/p' "$WORK/$1.out" | head -1
      return 0
    fi
    sleep 0.1
  done
  echo "agent $1 did not become ready; its log:" >&2
  cat "$WORK/$1.err" >&2
  return 1
}

# start_agent NAME [EXTRA AGENT FLAGS...]: starts one tandem-agentd on a free loopback port with
# its own state dir, the token, its TLS certificate and the model root; prints its gRPC address
# once it says it is ready (20 s at most).
start_agent() {
  local name="$1"
  shift
  "$AGENTD" --listen 127.0.0.1:0 --node-name "$name" --state-dir "$WORK/state-$name" \
    --token-file "$WORK/token" --model-root "$MODEL_ROOT" \
    --tls-cert "$WORK/tls/$name.pem" --tls-key "$WORK/tls/$name.key" --tls-ca "$WORK/tls/ca.pem" "$@" \
    >"$WORK/$name.out" 2>"$WORK/$name.err" &
  PIDS+=("$!")
  wait_agent_ready "$name" 200
}
