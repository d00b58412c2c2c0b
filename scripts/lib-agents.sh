# Sourced by the demo scripts. Needs AGENTD, TANDEMCTL, WORK, MODEL_ROOT and a PIDS array in the
# caller. The local agents run the way a real cluster should: the cluster token, mutual TLS with
# certificates from `tandemctl certs`, and a model root.

# make_cluster_secrets NAME...: writes $WORK/token (0600) and, through `tandemctl certs`, a CA and
# one certificate per node name plus the controller's into $WORK/tls.
make_cluster_secrets() {
  head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$WORK/token"
  chmod 600 "$WORK/token"
  {
    echo "model: {path: $MODEL_ROOT}"
    echo "nodes:"
    local i=1
    for name in "$@"; do echo "  - {name: $name, agent: '127.0.0.1:$i'}"; i=$((i + 1)); done
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
  for _ in $(seq 1 200); do
    if grep -q '^tandem-agentd ready' "$WORK/$name.out" 2>/dev/null; then
      sed -n 's/^tandem-agentd ready .*grpc=\([^ ]*\).*/\1/p' "$WORK/$name.out" | head -1
      return 0
    fi
    sleep 0.1
  done
  echo "demo: agent $name did not become ready; its log:" >&2
  cat "$WORK/$name.err" >&2
  return 1
}
