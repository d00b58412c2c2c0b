# Sourced by the demo scripts. Needs AGENTD, WORK and a PIDS array in the caller.
# start_agent NAME [EXTRA AGENT FLAGS...]: starts one tandem-agentd on a free loopback port with
# its own state dir; prints its gRPC address once it says it is ready (20 s at most).
start_agent() {
  local name="$1"
  shift
  "$AGENTD" --listen 127.0.0.1:0 --node-name "$name" --state-dir "$WORK/state-$name" "$@" \
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
