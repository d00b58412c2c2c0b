#!/usr/bin/env bash
# The .deb packages of a build, installed into a fresh root: the files the docs promise, library
# dependencies declared (dpkg-shlibdeps) and none copied in, conffiles, the tandem user from the
# sysusers file, the agent unit agreeing with the packaged cluster.yaml (port, token, TLS),
# `systemd-analyze verify` clean and `systemd-analyze security --offline` <= 5.0 for both units,
# and (when lintian is installed) no lintian tag that docs/install.md does not explain.
# Usage: install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
BUILD="$1"
SRC="$2"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
for tool in cpack dpkg-deb systemd-analyze systemd-sysusers; do
  command -v "$tool" >/dev/null || { echo "SKIPPED: $tool is not installed"; exit 77; }
done

# gzip instead of xz: the same content, and the test stays well under a minute on 2 cores.
cpack --config "$BUILD/CPackConfig.cmake" -B "$WORK/debs" -D CPACK_DEBIAN_COMPRESSION_TYPE=gzip \
  > "$WORK/cpack.log" 2>&1 || { cat "$WORK/cpack.log"; fail "cpack"; }
arch="$(dpkg --print-architecture)"
ROOT="$WORK/root"
for pkg in tandem-agentd tandemctl; do
  debs=("$WORK"/debs/${pkg}_*_"$arch".deb)
  [ -f "${debs[0]}" ] || fail "no $pkg package for $arch in: $(ls "$WORK/debs")"
  deb="${debs[0]}"
  [ "$(dpkg-deb -f "$deb" Package)" = "$pkg" ] || fail "$deb: wrong Package field"
  depends="$(dpkg-deb -f "$deb" Depends)"
  # shlibdeps ran: the gRPC and libc libraries are dependencies, with versions.
  for lib in 'libgrpc++1.51 (>=' 'libc6 (>=' 'systemd'; do
    [[ "$depends" == *"$lib"* ]] || fail "$pkg Depends lacks '$lib': $depends"
  done
  if dpkg-deb -c "$deb" | grep -E '\.so(\.[0-9]+)*$'; then fail "$pkg ships shared libraries"; fi
  # Every file under /etc is a conffile (dpkg keeps the operator's edits on upgrade).
  dpkg-deb -e "$deb" "$WORK/ctrl-$pkg"
  etc_files="$(dpkg-deb -c "$deb" | awk '$1 !~ /^d/ {print $6}' | sed -n 's|^\./etc/|/etc/|p' | sort)"
  [ -n "$etc_files" ] || fail "$pkg has no file under /etc"
  [ "$etc_files" = "$(sort "$WORK/ctrl-$pkg/conffiles")" ] ||
    fail "$pkg conffiles '$(cat "$WORK/ctrl-$pkg/conffiles")' != files in /etc '$etc_files'"
  for script in postinst prerm postrm; do
    sh -n "$WORK/ctrl-$pkg/$script" || fail "$pkg $script is not valid sh"
  done
  dpkg-deb -x "$deb" "$ROOT"
done

for f in usr/bin/tandem-agentd usr/bin/tandem-infer usr/bin/tandemctl; do
  [ -x "$ROOT/$f" ] || fail "/$f missing"
  ! readelf -S "$ROOT/$f" | grep -Eq "[.](symtab|debug_info)" || fail "/$f is not stripped"
done
for f in lib/systemd/system/tandem-agentd.service lib/systemd/system/tandemctl-serve.service \
    usr/lib/sysusers.d/tandem-agentd.conf usr/lib/sysusers.d/tandemctl.conf \
    etc/tandem/agentd.env etc/tandem/cluster.yaml \
    usr/share/doc/tandem-agentd/copyright usr/share/doc/tandemctl/copyright \
    usr/share/doc/tandem-agentd/install.md usr/share/doc/tandemctl/upgrade.md; do
  [ -f "$ROOT/$f" ] || fail "/$f missing"
done
# The packaged programs run here (native build) and tell their build.
"$ROOT/usr/bin/tandemctl" --version | grep -q . || fail "tandemctl --version printed nothing"

# The agent unit and the cluster file the tandemctl package installs agree: the port every node's
# agent is dialed on, the cluster token's file, and authentication on (token and TLS).
unit="$ROOT/lib/systemd/system/tandem-agentd.service"
cluster="$ROOT/etc/tandem/cluster.yaml"
port="$(sed -n 's/.*--listen [^ ]*:\([0-9][0-9]*\).*/\1/p' "$unit")"
[ -n "$port" ] || fail "tandem-agentd.service has no --listen HOST:PORT"
dialed="$(sed -n 's/^ *agent: *[^ ]*:\([0-9][0-9]*\).*/\1/p' "$cluster" | sort -u)"
[ "$dialed" = "$port" ] || fail "cluster.yaml dials agents on '$dialed', the unit listens on $port"
token="$(sed -n 's/.*--token-file \([^ ]*\).*/\1/p' "$unit")"
grep -Eq "^ *token_file: *$token( |$)" "$cluster" || fail "cluster.yaml's auth.token_file is not the unit's $token"
grep -q -- '--tls-cert ' "$unit" && grep -q '^tls:' "$cluster" || fail "TLS is not on in both the unit and cluster.yaml"

# The user both units run as, made as postinst makes it (systemd-sysusers), in the fresh root.
mkdir -p "$ROOT/etc"
systemd-sysusers --root="$ROOT" > "$WORK/sysusers.log" 2>&1 || { cat "$WORK/sysusers.log"; fail "sysusers"; }
grep -q '^tandem:x:[0-9]*:[0-9]*:.*:/var/lib/tandem:/usr/sbin/nologin$' "$ROOT/etc/passwd" ||
  fail "no tandem system user: $(cat "$ROOT/etc/passwd")"
if grep -qi 'conflict' "$WORK/sysusers.log"; then cat "$WORK/sysusers.log"; fail "sysusers files disagree"; fi

# The units as installed: what they name must exist in the root (programs, unit paths), and the
# sandbox must keep its score. systemd's own units (the targets ours order against, and the
# default dependencies) come from this machine's systemd package, as they would on a node.
mkdir -p "$ROOT/usr/lib/systemd"
cp -a /usr/lib/systemd/system "$ROOT/usr/lib/systemd/"
for unit in tandem-agentd.service tandemctl-serve.service; do
  out="$(systemd-analyze verify --root="$ROOT" --man=no "$unit" 2>&1)" || { echo "$out"; fail "verify $unit"; }
  # verify reports some problems without failing: any output is one.
  [ -z "$out" ] || { echo "$out"; fail "systemd-analyze verify $unit is not clean"; }
  # --threshold counts in tenths of the printed exposure: 50 is 5.0.
  out="$(systemd-analyze security --offline=true --root="$ROOT" --threshold=50 "$unit" 2>&1)" ||
    { echo "$out"; fail "$unit: systemd-analyze security above 5.0"; }
  echo "$out" | grep 'Overall exposure'
done

# lintian: every tag it gives must be one docs/install.md explains (its "lintian" table).
if command -v lintian >/dev/null; then
  explained="$(sed -n '/^## lintian/,$ s/^| `\([a-z0-9-]*\)` |.*/\1/p' "$SRC/docs/install.md" | sort -u)"
  # Without the spelling check of the programs' strings: it only gives informational tags, and
  # on a CUDA build's 30 MB agent it took twice as long as all the other checks together.
  lintian --tag-display-limit 0 -X binaries/spelling "$WORK"/debs/*.deb > "$WORK/lintian.log" 2>&1 || true
  unexplained="$(awk '/^[EWIPX]: / {print $3}' "$WORK/lintian.log" | sort -u | comm -23 - <(echo "$explained"))"
  [ -z "$unexplained" ] || { cat "$WORK/lintian.log"; fail "lintian tags not explained in docs/install.md: $unexplained"; }
  echo "lintian: $(grep -c '^[EWIPX]: ' "$WORK/lintian.log" || true) tags, all explained"
else
  echo "lintian not installed: tags not checked"
fi
echo "PASS"
