#!/usr/bin/env bash
# Packs several builds for one device call: for each NAME=REF:TARGET[,TARGET...] it checks out REF
# (a branch or commit) in this worktree, builds the targets in BUILD_DIR (ninja: what changed
# between the refs is rebuilt, ccache keeps the rest), and copies them (stripped) to NAME/ of the
# pack; one lib/ holds the non-system shared libraries they all link. The result is OUT_DIR/
# branches.tar.xz (xz -9e: variants share most of their bytes), which scripts/gpu-run-branches.sh
# runs on the GPU machine. The worktree must be clean; it is returned to the branch it was on.
# Fails when OUT_DIR plus the repository's tracked files reach the 64 MiB a call takes.
# Usage: scripts/gpu-pack-branches.sh [--build BUILD_DIR] OUT_DIR NAME=REF:TARGET[,TARGET...]...
#   e.g. scripts/gpu-pack-branches.sh gpu-ab main=main:bench/cuda_decode_bench \
#          new=wip/x:bench/cuda_decode_bench,tests/kernels/gemm_cuda_test
set -euo pipefail
build="build-cuda"
if [[ "${1:-}" == "--build" ]]; then
  build=$2
  shift 2
fi
out=${1:?usage: gpu-pack-branches.sh [--build BUILD_DIR] OUT_DIR NAME=REF:TARGET[,TARGET...]...}
shift
(($# > 0)) || { echo "gpu-pack-branches: no NAME=REF:TARGETS given" >&2; exit 1; }
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/lib-gpu.sh
. "$root/scripts/lib-gpu.sh"
cd "$root"
[[ -z "$(git status --porcelain --untracked-files=no)" ]] ||
  { echo "gpu-pack-branches: the worktree has changes; commit or stash them first" >&2; exit 1; }
start_ref=$(git symbolic-ref -q --short HEAD || git rev-parse HEAD)
trap 'git checkout -q "$start_ref"' EXIT
export PATH=/usr/local/cuda/bin:$PATH CCACHE_BASEDIR=$root CCACHE_NOHASHDIR=true
pkg=$(mktemp -d /tmp/gpu-pack-branches-XXXXXX)
mkdir -p "$pkg/lib"
for spec in "$@"; do
  name=${spec%%=*} rest=${spec#*=}
  ref=${rest%%:*} targets=${rest#*:}
  [[ $name != "$spec" && $ref != "$rest" && -n $targets ]] ||
    { echo "gpu-pack-branches: '$spec' is not NAME=REF:TARGET[,TARGET...]" >&2; exit 1; }
  git checkout -q "$ref"
  echo "== $name: $ref ($(git rev-parse --short HEAD))"
  IFS=, read -r -a list <<< "$targets"
  flock /tmp/tandem-build.lock ninja -C "$build" "${list[@]}" | tail -1
  mkdir -p "$pkg/$name"
  for t in "${list[@]}"; do
    cp "$build/$t" "$pkg/$name/"
    strip "$pkg/$name/$(basename "$t")"
  done
  git log -1 --format='%h %s' > "$pkg/$name/COMMIT"
done
bins=()
for b in "$pkg"/*/*; do if [[ -f $b && -x $b ]]; then bins+=("$b"); fi; done
gpu_copy_libs "$pkg/lib" "${bins[@]}"
mkdir -p "$out"
tar cf - -C "$pkg" . | xz -9e -T2 > "$out/branches.tar.xz"
rm -rf "$pkg"
echo "gpu-pack-branches: $out/branches.tar.xz $(du -h "$out/branches.tar.xz" | cut -f1)"
gpu_check_fits gpu-pack-branches "$out"
