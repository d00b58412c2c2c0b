#!/usr/bin/env bash
# What CI sees: clones this repository's REF (default HEAD; committed work only) into a fresh
# folder, runs the README's test command there (scripts/test.sh, with this shell's TANDEM_CUDA,
# SANITIZE and the rest), and removes the clone afterwards however the run ends: a clone with its
# two builds takes about 2.5 GB, and clones left behind once filled this machine's disk, which
# failed a CI link with "No space left on device". ccache hits carry over (test.sh hashes paths
# relative to the tree).
# Usage: scripts/test-clean-clone.sh [REF] [LOG]   (LOG default: /tmp/test-clean-clone-<sha>.log)
# Exit status: scripts/test.sh's. The log keeps the whole output; the CTest summaries are printed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
ref=${1:-HEAD}
sha=$(git -C "$root" rev-parse -q --verify --short "$ref^{commit}" 2>/dev/null) || { echo "test-clean-clone: no commit '$ref'" >&2; exit 2; }
log=${2:-/tmp/test-clean-clone-$sha.log}
dir=$(mktemp -d /tmp/test-clean-clone-XXXXXX)
trap 'rm -rf "$dir"' EXIT
git clone -q --no-checkout "$root" "$dir/tandem"
git -C "$dir/tandem" checkout -q "$sha"
echo "test-clean-clone: $sha in $dir/tandem, log $log"
rc=0
(cd "$dir/tandem" && scripts/test.sh) > "$log" 2>&1 || rc=$?
grep "tests passed" "$log" || true  # CTest's summaries: "N% tests passed, M tests failed out of K"
echo "test-clean-clone: $sha rc=$rc"
exit "$rc"
