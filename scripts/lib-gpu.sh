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
