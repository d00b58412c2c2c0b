# Sourced by the network-namespace integration tests. Two namespaces of this test's own joined by
# a veth pair; nothing leaves them. Skips (exit 77) without root or iproute2. The cluster secrets
# and the wait for an agent's ready line are the demos' (scripts/lib-agents.sh: make_cluster_secrets,
# cluster_secrets_yaml, wait_agent_ready).
. "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib-agents.sh"

# netns_pair NAME PREFIX: creates namespaces $A and $B with PREFIX.1 and PREFIX.2 (/24) on the
# veth ends $VA and $VB, a work folder $WORK, the PIDS array, and a cleanup trap that kills
# PIDS, deletes the namespaces and the folder, and on failure prints the tail of every
# $WORK/*.err.
netns_pair() {
  local name="$1" prefix="$2"
  if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null; then
    echo "$name SKIPPED: needs root and iproute2"; exit 77
  fi
  tag="tn$$"
  A="${tag}a" B="${tag}b" VA="v${tag}a" VB="v${tag}b"
  if ! ip netns add "$A" 2>/dev/null; then
    echo "$name SKIPPED: cannot create network namespaces here"; exit 77
  fi
  WORK="$(mktemp -d /tmp/tandem-netns-XXXXXX)"
  PIDS=()
  trap netns_cleanup EXIT
  ip netns add "$B"
  for ns in "$A" "$B"; do ip -n "$ns" link set lo up; done
  netns_veth "$VA" "$prefix.1" "$VB" "$prefix.2"
}

# netns_veth DEV_A IP_A DEV_B IP_B: a veth pair from $A to $B, IP_A/24 on DEV_A in $A and IP_B/24
# on DEV_B in $B, both up.
netns_veth() {
  ip link add "$1" type veth peer name "$3"
  ip link set "$1" netns "$A"
  ip link set "$3" netns "$B"
  ip -n "$A" addr add "$2/24" dev "$1"
  ip -n "$B" addr add "$4/24" dev "$3"
  ip -n "$A" link set "$1" up
  ip -n "$B" link set "$3" up
}

netns_cleanup() {
  local rc=$?
  if [ "$rc" != 0 ] && [ "$rc" != 77 ]; then
    for f in "$WORK"/*.err; do [ -f "$f" ] && { echo "--- $f (tail)"; tail -20 "$f"; }; done
  fi
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  ip netns del "$A" 2>/dev/null || true
  ip netns del "$B" 2>/dev/null || true
  rm -rf "$WORK"
}

# netns_start_agent NS IP NAME: tandem-agentd in namespace NS on IP:7101 as a real cluster runs
# it (the token and mutual TLS from make_cluster_secrets, the model root $MODEL_ROOT), its output
# in $WORK/NAME.out and .err; waits for its ready line.
netns_start_agent() {
  ip netns exec "$1" "$AGENTD" --listen "$2:7101" --node-name "$3" --state-dir "$WORK/state-$3" \
    --token-file "$WORK/token" --model-root "$MODEL_ROOT" --tls-cert "$WORK/tls/$3.pem" --tls-key "$WORK/tls/$3.key" \
    --tls-ca "$WORK/tls/ca.pem" >"$WORK/$3.out" 2>"$WORK/$3.err" &
  PIDS+=("$!")
  wait_agent_ready "$3" 100 >/dev/null
}
