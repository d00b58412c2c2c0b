# shellcheck shell=bash
# Sourced by the GPU scripts (gpu-check.sh, gpu-variants.sh, gpu-ab.sh, gpu-tp2.sh): what each needs
# of the device machine's limits.

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
