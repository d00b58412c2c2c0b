#!/bin/bash
# `tandem-infer bench` and cuda_decode_bench are one program (both call RunDecodeBenchCommand,
# bench/decode_bench.h): the same usage, the same refusals of bad flags (--prefill-batch's
# included) and the same run with the GPUs hidden, byte for byte and with the same exit code.
# Hiding the GPUs (CUDA_VISIBLE_DEVICES=) keeps the run case cheap on a GPU machine too: both
# stop at "no usable CUDA device" once the flags are parsed.
set -u
infer="$1"; bench="$2"
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
fail=0
check() {  # check NAME ARGS...: both binaries, same stdout, stderr and exit code
  local name="$1"; shift
  CUDA_VISIBLE_DEVICES= timeout 60 "$infer" bench "$@" > "$dir/a.out" 2> "$dir/a.err"; local a=$?
  CUDA_VISIBLE_DEVICES= timeout 60 "$bench" "$@" > "$dir/b.out" 2> "$dir/b.err"; local b=$?
  if [[ $a != "$b" ]] || ! cmp -s "$dir/a.out" "$dir/b.out" || ! cmp -s "$dir/a.err" "$dir/b.err"; then
    echo "FAIL $name: tandem-infer bench exit $a, cuda_decode_bench exit $b"
    diff "$dir/a.out" "$dir/b.out"; diff "$dir/a.err" "$dir/b.err"
    fail=1
    return
  fi
  echo "ok $name (exit $a)"
}
expect() {  # expect FILE TEXT: the last check's output holds TEXT
  if ! grep -qF -- "$2" "$dir/$1"; then echo "FAIL: $1 lacks '$2':"; cat "$dir/$1"; fail=1; fi
}

check help --help
expect a.out "--prefill-batch NxL"
check bad-prefill-batch --backend cuda --prefill-batch 8x1024,8y1024
expect a.err "bench: bad --prefill-batch row '8y1024'"
check twice-prefill-batch --prefill-batch=2x64,2x64
expect a.err "lists 2x64 twice"
check no-gpu --backend cuda --synthetic qwen3-30b-a3b --prefill-batch 8x1024,4x2048 --runs 5
expect a.err "bench: no usable CUDA device"
exit $fail
