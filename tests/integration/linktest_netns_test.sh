#!/usr/bin/env bash
# tandemctl linktest over two network namespaces joined by three veth pairs: one carries the
# agents' control traffic (10.79.0.0/24, token + mutual TLS as a real cluster), the other two are
# the "halves" of the link under test (10.79.1.0/24 and 10.79.2.0/24). Half 1 is shaped to
# 50 Mbit/s (tbf, a queue deep enough that nothing is dropped), half 2 loses 5% of its packets
# (netem), on both ends: linktest must call half 1 host-not-sending and half 2 dropped-on-path,
# in both directions, and exit 1. With the qdiscs gone both halves must be healthy (exit 0).
# Traffic stays inside namespaces this test creates. Needs root, iproute2 and tc; otherwise it
# skips (exit 77) saying why. Args: AGENTD TANDEMCTL MODEL_DIR
set -euo pipefail
AGENTD="$1" TANDEMCTL="$2" MODEL="$3"
. "$(dirname "$0")/lib-netns.sh"
command -v tc >/dev/null || { echo "linktest netns test SKIPPED: needs tc (iproute2)"; exit 77; }
netns_pair "linktest netns test" 10.79.0
# The two halves: h1 and h2, each a veth pair from A to B.
for h in 1 2; do netns_veth "h$h${tag}a" "10.79.$h.1" "h$h${tag}b" "10.79.$h.2"; done
H1A="h1${tag}a" H1B="h1${tag}b" H2A="h2${tag}a" H2B="h2${tag}b"
make_cluster_secrets head=10.79.0.1:7101 worker=10.79.0.2:7101
MODEL_ROOT="$(dirname "$(readlink -f "$MODEL")")"

netns_start_agent "$A" 10.79.0.1 head
netns_start_agent "$B" 10.79.0.2 worker

cat > "$WORK/cluster.yaml" <<YAML
cluster: linktest
model:
  path: $MODEL
$(cluster_secrets_yaml)
nodes:
  - name: head
    agent: 10.79.0.1:7101
    linktest: {interfaces: [$H1A, $H2A]}
  - name: worker
    agent: 10.79.0.2:7101
    linktest: {interfaces: [$H1B, $H2B]}
YAML

# linktest --json into $WORK/$1.json (further arguments passed on); its exit code into $WORK/$1.rc.
linktest() {
  local rc=0 name="$1"
  shift
  ip netns exec "$A" timeout 60 "$TANDEMCTL" linktest -f "$WORK/cluster.yaml" --json --duration 3s --streams 2 "$@" \
    >"$WORK/$name.json" 2>"$WORK/$name.progress.err" || rc=$?
  echo "$rc" > "$WORK/$name.rc"
}

# check NAME RC KIND1 KIND2: linktest exited RC and, in both directions, half 1 got KIND1 and
# half 2 KIND2 (the evidence and rates are printed either way).
check() {
  python3 - "$WORK/$1.json" "$(cat "$WORK/$1.rc")" "$2" "$3" "$4" "$H1A" "$H1B" <<'PY'
import json, sys
path, rc, want_rc, kind1, kind2, h1a, h1b = sys.argv[1:]
report = json.load(open(path))
ok = rc == want_rc
if not ok:
    print(f"exit code {rc}, expected {want_rc}")
pairs = report["pairs"]
if len(pairs) != 2:
    print(f"expected 2 pairs, got {len(pairs)}"); ok = False
for p in pairs:
    if p["error"]:
        print(f"{p['from']} -> {p['to']}: {p['error']}"); ok = False
    for h in p["halves"]:
        want = kind1 if h["interface"] in (h1a, h1b) else kind2
        print(f"{p['from']} -> {p['to']} {h['interface']}: {h['gbps']:.3f} Gb/s {h['verdict']} "
              f"(retransmits {h['tcp_retransmits']} of {h['tcp_segments_out']})")
        for e in h["evidence"]:
            print("    " + e)
        if h["verdict"] != want:
            print(f"    expected {want}"); ok = False
    if len(p["halves"]) != 2:
        print(f"{p['from']} -> {p['to']}: expected 2 halves"); ok = False
coll = report.get("collectives")
if path.endswith("clean.json") and not coll:
    print("no collectives in the clean pass"); ok = False
if coll:  # the group's own all-reduces (docs/linktest.md "Collectives")
    print(f"collectives over {coll['transport']}: ok={coll['ok']} latency median {coll['latency_median_us']:.1f} us, "
          f"busbw {coll['busbw_gbps']:.3f} GB/s {coll['problems']}")
    if not coll["ok"] or coll["busbw_gbps"] <= 0:
        ok = False
sys.exit(0 if ok else 1)
PY
}

# Half 1: 50 Mbit/s with a 4 MB queue (TCP's small-queue limit keeps two streams well inside it,
# so the shaper delays and never drops). Half 2: 5% loss through netem; where the kernel has no
# netem (sch_netem not loaded, as in some containers) a 1 Gbit/s shaper with a 100 KB queue, which
# two streams overflow, drops instead. Both directions.
ip netns exec "$A" tc qdisc add dev "$H1A" root tbf rate 50mbit burst 64kb limit 4mb
ip netns exec "$B" tc qdisc add dev "$H1B" root tbf rate 50mbit burst 64kb limit 4mb
if ip netns exec "$A" tc qdisc add dev "$H2A" root netem loss 5% 2>/dev/null; then
  ip netns exec "$B" tc qdisc add dev "$H2B" root netem loss 5%
  echo "half 2 loses 5% (netem)"
else
  ip netns exec "$A" tc qdisc add dev "$H2A" root tbf rate 1gbit burst 64kb limit 100kb
  ip netns exec "$B" tc qdisc add dev "$H2B" root tbf rate 1gbit burst 64kb limit 100kb
  echo "half 2 drops from a 100 KB queue (no netem in this kernel)"
fi
# The shaped half would make the group's 64 MiB all-reduces crawl: they run in the clean pass.
linktest shaped --no-collectives
echo "--- shaped and lossy halves"
check shaped 1 host-not-sending dropped-on-path

for dev in "$H1A" "$H2A"; do ip netns exec "$A" tc qdisc del dev "$dev" root; done
for dev in "$H1B" "$H2B"; do ip netns exec "$B" tc qdisc del dev "$dev" root; done

# Half 2 alone, with the worker's end down: no stream connects in either direction. Both halves
# are no-data with the sender's reason, and the controller stops the receiver at once instead of
# letting it wait out its 15 s grace (two pairs in well under 2 x 18 s).
ip -n "$B" link set "$H2B" down
linktest down --no-collectives --interfaces "head=$H2A,worker=$H2B"
echo "--- worker's end of half 2 down"
python3 - "$WORK/down.json" "$(cat "$WORK/down.rc")" <<'PY'
import json, sys
report, rc = json.load(open(sys.argv[1])), sys.argv[2]
ok = rc == "1" and report["wall_s"] < 15 and len(report["pairs"]) == 2
for p in report["pairs"]:
    for h in p["halves"]:
        print(f"{p['from']} -> {p['to']} {h['interface']}: {h['verdict']}: {h['evidence']}")
        ok = ok and h["verdict"] == "no-data" and len(p["halves"]) == 1
print(f"exit {rc}, {report['wall_s']:.1f} s")
sys.exit(0 if ok else 1)
PY
ip -n "$B" link set "$H2B" up

linktest clean
echo "--- qdiscs cleared"
check clean 0 healthy healthy
# Progress on stderr: each pair's line before and its result after.
grep -q "^linktest: worker -> head: .* Gb/s (.*healthy.*healthy)" "$WORK/clean.progress.err" ||
  { echo "no result line for worker -> head on stderr:"; cat "$WORK/clean.progress.err"; exit 1; }

# Nothing listens once the tests are over: the agents' gRPC ports are the only listeners.
extra=$(ip netns exec "$B" ss -Htln | grep -v ':7101 ' || true)
[ -z "$extra" ] || { echo "still listening after the test: $extra"; exit 1; }
echo "linktest netns test PASSED: shaped half host-not-sending, lossy half dropped-on-path, both healthy once cleared"
