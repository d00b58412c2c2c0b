#!/bin/sh
# Runs `systemd-analyze verify` on deploy/systemd/tandem-agentd.service with ExecStart pointed
# at the built binary (verify fails when the binary is missing). Any diagnostic that names the
# unit fails the test.
set -eu
unit_src="$1"; binary="$2"
if ! command -v systemd-analyze >/dev/null 2>&1; then echo "systemd-analyze not installed: skipped"; exit 77; fi
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
sed "s#/usr/bin/tandem-agentd#${binary}#" "$unit_src" > "$dir/tandem-agentd.service"
out=$(systemd-analyze verify "$dir/tandem-agentd.service" 2>&1) || { echo "$out"; exit 1; }
echo "$out"
if echo "$out" | grep -q "tandem-agentd.service"; then echo "diagnostics above name the unit"; exit 1; fi
echo "systemd-analyze verify: clean"
