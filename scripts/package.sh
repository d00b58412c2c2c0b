#!/usr/bin/env bash
# Builds the Debian packages tandem-agentd and tandemctl for this machine's architecture and
# release (their dependencies name this system's library packages), in a build folder of their
# own, and prints each package's architecture and dependencies (and lintian's tags when lintian
# is installed). docs/install.md.
# Usage: scripts/package.sh [CMAKE_ARG...]
#   e.g. on a DGX Spark: scripts/package.sh -DCMAKE_CUDA_ARCHITECTURES=121
#        -DTANDEM_PACKAGE_CONTACT="Ops <ops@example.com>" (the Maintainer field)
# Environment: BUILD_DIR (default build-package), OUT (default BUILD_DIR/packages),
#   TANDEM_CUDA (ON/OFF; default: on when nvcc is found, as in scripts/test.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${BUILD_DIR:-build-package}"
OUT="$(realpath -m "${OUT:-$BUILD_DIR/packages}")"
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}" CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-true}"
cmake_args=(-S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTANDEM_TESTS=OFF)
[ -n "${TANDEM_CUDA:-}" ] && cmake_args+=("-DTANDEM_CUDA=${TANDEM_CUDA}")
[ -z "${TANDEM_CUDA:-}" ] && ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ] && export PATH="/usr/local/cuda/bin:$PATH"
cmake "${cmake_args[@]}" "$@"
cmake --build "$BUILD_DIR" --target tandem-agentd tandemctl tandem-infer
rm -f "$OUT"/*.deb
(cd "$BUILD_DIR" && cpack -G DEB -B "$OUT")
for deb in "$OUT"/*.deb; do
  echo "$deb"
  echo "  $(dpkg-deb -f "$deb" Architecture), depends: $(dpkg-deb -f "$deb" Depends)"
done
if command -v lintian >/dev/null; then
  lintian --tag-display-limit 0 "$OUT"/*.deb || true
  echo "(docs/install.md explains each tag lintian gives these packages)"
fi
