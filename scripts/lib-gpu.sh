# shellcheck shell=bash
# Sourced by the GPU scripts (gpu-check.sh, gpu-variants.sh, gpu-ab.sh, gpu-tp2.sh, gpu-peer.sh,
# gpu-issue-rows.sh) and the packers (gpu-pack.sh, gpu-pack-branches.sh): what each needs of the
# device machine's limits, and the bench cases of the issues' tables.

# The bench arguments of issue 21's table: batches 1/8/32 at 1k and 4k, prefill 512 / 2048 and 8 x 1024.
# shellcheck disable=SC2034  # used by the scripts that source this file
GPU_TABLE_ARGS="--synthetic qwen3-30b-a3b --batches 1,8,32 --contexts 1024,4096 --prefill 512,2048 --prefill-batch 8x1024 --no-kernel-table"

# gpu_quant_args BATCHES: the bench arguments of issue 15's rows, bf16, FP8 and NVFP4 in one process (the
# ratios to bf16 are same-run) at 1k and 4k.
gpu_quant_args() {
  echo "--synthetic qwen3-30b-a3b --weights bf16,fp8,nvfp4 --batches $1 --contexts 1024,4096 --prefill= --prefill-batch= --no-kernel-table"
}

# gpu_quant_table FILE: the bench's format comparison table in FILE, its header to the blank line after it.
gpu_quant_table() {
  sed -n '/^| weights | context/,/^$/p' "$1"
}

# gpu_copy_libs DEST BINARY...: copies into DEST the shared libraries the binaries link, less the C/C++
# runtime and what the GPU machine has (the CUDA driver, cuBLAS, NCCL).
gpu_copy_libs() {
  local dest=$1 b lib
  shift
  for b in "$@"; do ldd "$b" || true; done | awk '/=> \// {print $3}' | sort -u |
    { grep -v -E '/(libc|libm|libstdc\+\+|libgcc_s|libpthread|librt|libdl|ld-linux[^/]*|libnccl|libcuda|libcublas[^/]*|libcublasLt)\.so' || true; } |
    while read -r lib; do cp -Lu "$lib" "$dest/"; done
}

# gpu_check_fits NAME DIR: prints what DIR and the repository's tracked files (which travel with it)
# come to; fails (NAME in the message) when they reach the 64 MiB a device call takes.
gpu_check_fits() {
  local name=$1 dir=$2 tracked packed
  tracked=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
  packed=$(du -cb "$dir" | tail -1 | cut -f1)
  echo "$name: $dir is $((packed >> 20)) MiB, with the tracked files $(((tracked + packed) >> 20)) MiB of 64"
  ((tracked + packed < 64 << 20)) || { echo "$name: over the 64 MiB a device call takes" >&2; return 1; }
}

# gpu_unpack_tests DIR: prints the folder holding bin/ and lib/: DIR itself, or a temporary folder
# with DIR/tests.tar.xz (what scripts/gpu-pack.sh writes: unpacked it would not fit the 64 MiB a
# call takes) unpacked into it.
gpu_unpack_tests() {
  local d=$1 u
  if [[ -f "$d/tests.tar.xz" && ! -d "$d/bin" ]]; then
    u=$(mktemp -d /tmp/gpu-tests-XXXXXX)
    tar xJf "$d/tests.tar.xz" -C "$u" || return 1
    d=$u
  fi
  echo "$d"
}

# gpu_log_dir NAME: prints (and creates) the folder a script's logs go to: /tmp/NAME here; on the
# device machine (OUT set) a temporary folder, which gpu_pack_logs packs into one file, since at most
# 8 files come back from $OUT.
gpu_log_dir() {
  local d=/tmp/$1
  [[ -n "${OUT:-}" ]] && d=$(mktemp -d "/tmp/$1-logs-XXXXXX")
  mkdir -p "$d" && echo "$d"
}

# gpu_pack_logs NAME DIR: with OUT set, DIR's files into $OUT/NAME-logs.tar.gz (call it on exit).
gpu_pack_logs() {
  if [[ -n "${OUT:-}" ]]; then tar czf "$OUT/$1-logs.tar.gz" -C "$2" .; fi
}

# gpu_add_cublas: puts the machine's cuBLAS (libcublas.so.13, else .12: the prefill GEMMs dlopen it,
# kernels/gemm.h) on LD_LIBRARY_PATH unless the loader already finds it: from the loader's cache,
# LD_LIBRARY_PATH, or a CUDA / PyTorch install found by name. Prints what it uses.
gpu_add_cublas() {
  local name d found=""
  if ldconfig -p 2>/dev/null | grep -q libcublas.so.13; then echo "cuBLAS: libcublas.so.13 on the library path"; return 0; fi
  for d in ${LD_LIBRARY_PATH//:/ }; do
    [[ -e "$d/libcublas.so.13" ]] && { echo "cuBLAS: $d/libcublas.so.13"; return 0; }
  done
  for name in libcublas.so.13 libcublas.so.12; do
    found=$(find /usr/local /usr/lib /usr/lib64 /opt /root /home -name "$name" -not -path '*/proc/*' 2>/dev/null | head -1)
    [[ -z "$found" ]] && found=$(find / -xdev -name "$name" -not -path '/proc/*' 2>/dev/null | head -1)
    [[ -n "$found" ]] && break
  done
  if [[ -n "$found" ]]; then
    LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$(dirname "$found")"
    export LD_LIBRARY_PATH
    echo "cuBLAS: using $found"
  else
    echo "cuBLAS: NOT FOUND (no libcublas.so.13/.12): prefill falls back to the decode kernels"
  fi
}
