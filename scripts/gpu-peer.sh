#!/usr/bin/env bash
# Issue 21's final table: tandem's GPU bench and llama.cpp (the peer, ../shared/peer) on the same
# GPU, the same model shape (random bf16 Qwen3-30B-A3B), in one command: tandem (A), llama.cpp,
# tandem again (B), so the spread of A and B shows the machine's noise beside the ratio.
#
# Here (no GPU):
#   scripts/gpu-peer.sh pack OUT_DIR                    copies ../shared/peer to OUT_DIR/peer and the
#                                                       Qwen3 tokenizer, xz-compressed (11 MB -> 2 MB:
#                                                       the device takes 64 MiB in all), to
#                                                       OUT_DIR/tokenizer.json.xz
# On the GPU machine, from the checkout, with OUT_DIR carried along and cuda_decode_bench unpacked
# from a pack:
#   scripts/gpu-peer.sh all PEER_DIR TOKENIZER BENCH_BINARY OUT_DIR
#                                                       build, then bench, in one call (about 6-7
#                                                       minutes): no idle gap between two calls in
#                                                       which the machine may be taken back
#   scripts/gpu-peer.sh build PEER_DIR TOKENIZER        llama.cpp (sm_90) and the 61 GB GGUF in
#                                                       /dev/shm, about 3-4 minutes on 16 cores
#   scripts/gpu-peer.sh bench PEER_DIR BENCH_BINARY OUT_DIR
#                                                       A, peer, B (about 1.5-8 minutes), their outputs in
#                                                       OUT_DIR, then the table (scripts/peer_table.py),
#                                                       then the quantized rows (below)
# TOKENIZER is tokenizer.json or tokenizer.json.xz. `build` and `bench` as two calls must follow each
# other while the machine is warm; the GGUF in /dev/shm does not survive a fresh machine.
# Environment: PEER_BENCH_ARGS replaces tandem's bench arguments (the default runs every case the
# table needs: batches 1/8/32 at 1k and 4k, prefill 512/2048 and 8 x 1024, 5 runs each).
# After B, `bench` runs issue 15's decode rows (bf16, FP8, NVFP4 in one process: the ratios to bf16
# are same-run; about a minute) into OUT_DIR/tandem-quant.txt and prints the bench's comparison
# table; PEER_QUANT_ARGS replaces their arguments, PEER_QUANT_ARGS=none skips them.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/lib-gpu.sh
. "$root/scripts/lib-gpu.sh"
usage() { sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }

peer_build() {
  local peer=$1 tok=$2
  [[ -x $peer/run.sh && -f $peer/llama.cpp-src.tgz ]] || { echo "gpu-peer: $peer is not a copy of shared/peer" >&2; exit 1; }
  [[ -f $tok ]] || { echo "gpu-peer: no tokenizer file $tok (scripts/testdata.sh fetches the Qwen3 one)" >&2; exit 1; }
  if [[ $tok == *.xz ]]; then
    xz -dc "$tok" > /tmp/gpu-peer-tokenizer.json || { echo "gpu-peer: cannot decompress $tok" >&2; exit 1; }
    tok=/tmp/gpu-peer-tokenizer.json
  fi
  timeout 480 bash "$peer/run.sh" build "$tok" || { echo "gpu-peer: llama.cpp build failed (rc $?)" >&2; exit 1; }
}

peer_bench() {
  local peer=$1 bench=$2 out=$3
  [[ -x $bench ]] || { echo "gpu-peer: $bench is not an executable cuda_decode_bench" >&2; exit 1; }
  mkdir -p "$out"
  # A bench from a pack (scripts/gpu-pack-branches.sh: NAME/cuda_decode_bench beside lib/) finds its
  # libraries there; cuBLAS comes from the machine.
  local libdir
  libdir="$(cd "$(dirname "$bench")/.." && pwd)/lib"
  [[ -d $libdir ]] && LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  gpu_add_cublas
  export LD_LIBRARY_PATH
  local args=${PEER_BENCH_ARGS:-$GPU_TABLE_ARGS}
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$out/gpu.txt"
  # Each part has a deadline, so one hung part still leaves the others' outputs and a clear error.
  # shellcheck disable=SC2086
  timeout 240 "$bench" $args >"$out/tandem-A.txt" 2>&1 || { echo "gpu-peer: tandem A failed (rc $?), see $out/tandem-A.txt" >&2; exit 1; }
  timeout 300 bash "$peer/run.sh" bench >"$out/peer.txt" 2>&1 || { echo "gpu-peer: llama.cpp bench failed (rc $?), see $out/peer.txt" >&2; exit 1; }
  # shellcheck disable=SC2086
  timeout 240 "$bench" $args >"$out/tandem-B.txt" 2>&1 || { echo "gpu-peer: tandem B failed (rc $?), see $out/tandem-B.txt" >&2; exit 1; }
  python3 "$root/scripts/peer_table.py" "$out/tandem-A.txt" "$out/peer.txt" "$out/tandem-B.txt" | tee "$out/table.md"
  # Then issue 15's rows on the same GPU: bf16, FP8 and NVFP4 in one process, so that the bench's
  # comparison table (tokens/s over bf16's, against the 1.7x / 2.5x targets) is a same-run ratio.
  local quant=${PEER_QUANT_ARGS-$(gpu_quant_args 1,8,32)}
  [[ $quant == none ]] && return 0
  # shellcheck disable=SC2086
  timeout 180 "$bench" $quant >"$out/tandem-quant.txt" 2>&1 || { echo "gpu-peer: the quantized rows failed (rc $?), see $out/tandem-quant.txt" >&2; exit 1; }
  echo
  # The comparison table (its rows follow the formats and contexts asked for).
  local table
  table=$(gpu_quant_table "$out/tandem-quant.txt")
  if [[ -n $table ]]; then echo "$table"; else echo "gpu-peer: no comparison table in $out/tandem-quant.txt" >&2; fi
}

case ${1:-} in
pack)
  [[ $# -eq 2 ]] || usage
  out=$2 tok="$root/tests/data/qwen3-tokenizer/tokenizer.json"
  [[ -f $root/../shared/peer/run.sh ]] || { echo "gpu-peer: no ../shared/peer beside the checkout" >&2; exit 1; }
  [[ -f $tok ]] || { echo "gpu-peer: no $tok (run scripts/testdata.sh)" >&2; exit 1; }
  mkdir -p "$out"
  rm -rf "$out/peer"
  cp -r "$root/../shared/peer" "$out/peer"
  chmod -R u+w "$out/peer"  # shared/ is read-only; the next pack replaces this copy
  xz -9 -T2 -c "$tok" > "$out/tokenizer.json.xz"
  echo "gpu-peer: $out/peer and $out/tokenizer.json.xz ($(du -sh "$out" | cut -f1) in $out)"
  ;;
all)
  [[ $# -eq 5 ]] || usage
  peer_build "$2" "$3"
  peer_bench "$2" "$4" "$5"
  ;;
build)
  [[ $# -eq 3 ]] || usage
  peer_build "$2" "$3"
  ;;
bench)
  [[ $# -eq 4 ]] || usage
  peer_bench "$2" "$3" "$4"
  ;;
*) usage ;;
esac
