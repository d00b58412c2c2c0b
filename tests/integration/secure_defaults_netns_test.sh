#!/usr/bin/env bash
# Issue 12, rows 1 and 2, with real binaries in two network namespaces this test creates
# (10.78.0.1 <-> 10.78.0.2 over a veth pair); no traffic leaves them.
#   1. `tandem-agentd --node-name x` (default flags) used to listen on 0.0.0.0:50051 without auth
#      and hash /etc for anyone: now it listens on 127.0.0.1 only (the other namespace is
#      refused), and even locally a model path outside the model roots is PERMISSION_DENIED.
#   2. preflight used to pass agents without auth silently: now agent-security fails for an
#      agent without auth and for one started with --insecure on the network, and passes for
#      agents with the token and mutual TLS (reached over the veth pair).
# Needs root and iproute2 (skips with 77 otherwise). Args: AGENTD TANDEMCTL MODEL_DIR
set -euo pipefail
AGENTD="$1" TANDEMCTL="$2" MODEL="$3"
. "$(dirname "$0")/lib-netns.sh"
netns_pair "secure-defaults netns test" 10.78.0

fail() { echo "FAIL: $*"; exit 1; }
# check_row JSON CHECK NODE STATUS [TEXT]: the preflight row has STATUS (and its detail TEXT).
check_row() {
  python3 - "$@" <<'PY'
import json, sys
path, check, node, status = sys.argv[1:5]
text = sys.argv[5] if len(sys.argv) > 5 else ""
rows = [r for r in json.load(open(path))["checks"] if r["check"] == check and r["node"] == node]
if not rows:
    sys.exit(f"no {check} row for {node}")
r = rows[0]
print(f"  {check:16} {node:10} {r['status']:5} {r['detail'][:150]}")
if r["status"] != status or text not in r["detail"]:
    sys.exit(f"expected {status} with '{text}'")
PY
}
cluster() {  # cluster FILE MODEL_PATH NODE=AGENT... (extra YAML from $EXTRA)
  local file="$1" model="$2"; shift 2
  { printf 'cluster: secure\nmodel:\n  path: %s\nengine:\n  backend: cpu\n  memory_fraction: 0.01\n%s' "$model" "${EXTRA:-}"
    echo "nodes:"
    for n in "$@"; do printf '  - name: %s\n    agent: "%s"\n' "${n%%=*}" "${n#*=}"; done; } > "$file"
}

echo "== 1. default flags: loopback only"
ip netns exec "$A" "$AGENTD" --node-name plain --state-dir "$WORK/state-plain" >"$WORK/plain.out" 2>"$WORK/plain.err" &
PIDS+=("$!")
addr=$(wait_agent_ready plain 100)
echo "  default-flags agent listens on $addr"
[ "$addr" = "127.0.0.1:50051" ] || fail "expected 127.0.0.1:50051, got $addr"
if ip netns exec "$B" timeout 3 bash -c 'exec 3<>/dev/tcp/10.78.0.1/50051' 2>/dev/null; then
  fail "the default-flags agent is reachable from the other namespace"
fi
echo "  from 10.78.0.2: connection to 10.78.0.1:50051 refused"
# gRPC binds an IPv4 address as a v4-mapped IPv6 socket: [::ffff:127.0.0.1]:50051.
listening=$(ip netns exec "$A" ss -ltnH | awk '{print $4}' | grep ':50051$' || true)
echo "  ss: listening on $listening"
echo "$listening" | grep -q '127.0.0.1\]*:50051' || fail "ss does not show 127.0.0.1:50051"
echo "$listening" | grep -Eq '^(0\.0\.0\.0|\*|\[::\]):50051' && fail "something listens on all addresses"

EXTRA="" cluster "$WORK/etc.yaml" /etc plain=127.0.0.1:50051
set +e
ip netns exec "$A" timeout 60 "$TANDEMCTL" preflight -f "$WORK/etc.yaml" --json >"$WORK/etc.json" 2>"$WORK/etc.stderr"
rc=$?
set -e
[ "$rc" = 1 ] || { cat "$WORK/etc.json" "$WORK/etc.stderr"; fail "preflight exit $rc, expected 1"; }
check_row "$WORK/etc.json" agent-security plain fail "no authentication"
check_row "$WORK/etc.json" model-present plain fail "PERMISSION_DENIED"
grep -q 'shadow' "$WORK/etc.json" && fail "the manifest of /etc leaked file names"
grep -q 'refused to hash\|PERMISSION_DENIED\|outside the model roots\|no model root' "$WORK/plain.err" || true

echo "== 2. a network address without auth: refused, unless --insecure (then preflight fails it)"
set +e
ip netns exec "$A" "$AGENTD" --listen 10.78.0.1:50052 --node-name open >"$WORK/open.out" 2>"$WORK/open.err"
rc=$?
set -e
[ "$rc" = 2 ] || fail "agent without auth on 10.78.0.1 exited $rc, expected 2"
grep -q 'refusing to listen on 10.78.0.1:50052 without authentication' "$WORK/open.err" || fail "no refusal message"
echo "  refused: $(grep -o 'refusing to listen[^:]*' "$WORK/open.err")"
ip netns exec "$A" "$AGENTD" --listen 10.78.0.1:50053 --node-name insecure --insecure \
  >"$WORK/insecure.out" 2>"$WORK/insecure.err" &
PIDS+=("$!")
wait_agent_ready insecure 100 >/dev/null
grep -q 'INSECURE' "$WORK/insecure.err" || fail "--insecure is not logged loudly"
EXTRA="" cluster "$WORK/insecure.yaml" "$MODEL" insecure=10.78.0.1:50053
set +e
ip netns exec "$B" timeout 60 "$TANDEMCTL" preflight -f "$WORK/insecure.yaml" --json --skip-weights >"$WORK/insecure.json" 2>/dev/null
rc=$?
set -e
[ "$rc" = 1 ] || fail "preflight of an --insecure agent exited $rc, expected 1"
check_row "$WORK/insecure.json" agent-security insecure fail "--insecure"

echo "== 3. token + mutual TLS + model roots: preflight over the veth pair passes the security rows"
make_cluster_secrets head=10.78.0.1:50054 worker=10.78.0.2:50054
SECRETS_YAML="$(cluster_secrets_yaml)"$'\n'
ROOT="$(dirname "$(readlink -f "$MODEL")")"
for n in head:"$A":10.78.0.1 worker:"$B":10.78.0.2; do
  IFS=: read -r name ns ip <<<"$n"
  ip netns exec "$ns" "$AGENTD" --listen "$ip:50054" --node-name "$name" --state-dir "$WORK/state-$name" \
    --token-file "$WORK/token" --model-root "$ROOT" --tls-cert "$WORK/tls/$name.pem" --tls-key "$WORK/tls/$name.key" \
    --tls-ca "$WORK/tls/ca.pem" >"$WORK/$name.out" 2>"$WORK/$name.err" &
  PIDS+=("$!")
  wait_agent_ready "$name" 100 >/dev/null
done
EXTRA="$SECRETS_YAML" cluster "$WORK/secure.yaml" "$MODEL" head=10.78.0.1:50054 worker=10.78.0.2:50054
ip netns exec "$A" timeout 60 "$TANDEMCTL" preflight -f "$WORK/secure.yaml" --json --skip-weights >"$WORK/secure.json" 2>/dev/null || true
check_row "$WORK/secure.json" agent-security head pass "mutual TLS"
check_row "$WORK/secure.json" agent-security worker pass "mutual TLS"
check_row "$WORK/secure.json" model-present worker pass ""
# The same agents, asked for /etc over the authenticated channel: still PERMISSION_DENIED.
EXTRA="$SECRETS_YAML" cluster "$WORK/secure-etc.yaml" /etc head=10.78.0.1:50054
ip netns exec "$B" timeout 60 "$TANDEMCTL" preflight -f "$WORK/secure-etc.yaml" --json >"$WORK/secure-etc.json" 2>/dev/null || true
check_row "$WORK/secure-etc.json" model-present head fail "PERMISSION_DENIED"
# A controller without the client certificate cannot even connect.
EXTRA="auth:
  token_file: $WORK/token
" cluster "$WORK/nocert.yaml" "$MODEL" head=10.78.0.1:50054
ip netns exec "$B" timeout 60 "$TANDEMCTL" preflight -f "$WORK/nocert.yaml" --json --skip-weights >"$WORK/nocert.json" 2>/dev/null || true
check_row "$WORK/nocert.json" agent-reachable head fail ""
echo "secure-defaults netns test PASSED"
