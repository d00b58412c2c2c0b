#!/usr/bin/env bash
# Packs what scripts/gpu-check.sh runs on a GPU machine that has no gRPC/Abseil/GoogleTest:
# the *_cuda_test binaries and cuda_decode_bench from a CUDA build folder (stripped), the
# non-system shared libraries they link (ldd), and the qwen3moe-tiny test data.
# Usage: scripts/gpu-pack.sh [BUILD_DIR] [OUT_DIR]   (defaults build-cuda, gpu-out)
set -euo pipefail
build=${1:-build-cuda}
out=${2:-gpu-out}
testdata=${TANDEM_TESTDATA:-$(cd "$(dirname "$0")/../.." && pwd)/shared/testdata}
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib" "$out/testdata"
bins=$(find "$build/tests/kernels" -maxdepth 1 -type f -name '*cuda*_test' -perm -u+x)
bins="$bins $build/engine/cuda/cuda_decode_bench"
for b in $bins; do
  cp "$b" "$out/bin/"
  strip "$out/bin/$(basename "$b")"
  # Libraries the GPU machine lacks; the C/C++ runtime, CUDA driver and NCCL are there. cuBLAS
  # (dlopen'ed by kernels/gemm.cu, so normally not in ldd's list) is never packed: libcublasLt
  # alone is 541 MB; gpu-check.sh finds the GPU machine's own.
  ldd "$b" | awk '/=> \// {print $3}' |
    { grep -v -E '/(libc|libm|libstdc\+\+|libgcc_s|libpthread|librt|libdl|ld-linux[^/]*|libnccl|libcuda|libcublas|libcublasLt)\.so' || true; } |
    while read -r lib; do cp -Lu "$lib" "$out/lib/"; done || true
done
cp -r "$testdata/qwen3moe-tiny" "$out/testdata/"
du -sh "$out"
