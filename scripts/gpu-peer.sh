#!/usr/bin/env bash
# Issue 21's final table: tandem's GPU bench and llama.cpp (the peer, ../shared/peer) on the same
# GPU, the same model shape (random bf16 Qwen3-30B-A3B), in one command: tandem (A), llama.cpp,
# tandem again (B), so the spread of A and B shows the machine's noise beside the ratio.
#
# On the GPU machine, from the checkout, with ../shared/peer copied into an ignored folder of the
# checkout (e.g. gpu-out/peer) and carried along, and cuda_decode_bench unpacked from a pack:
#   scripts/gpu-peer.sh build PEER_DIR TOKENIZER_JSON   llama.cpp (sm_90) and the 61 GB GGUF in
#                                                       /dev/shm, about 4-5 minutes on 16 cores
#   scripts/gpu-peer.sh bench PEER_DIR BENCH_BINARY OUT_DIR
#                                                       A, peer, B (about 8 minutes), their outputs in
#                                                       OUT_DIR, then the table (scripts/peer_table.py)
# `build` and `bench` are two device calls back to back while the machine is warm (one call may run
# at most 10 minutes); the GGUF in /dev/shm does not survive a fresh machine.
# Environment: PEER_BENCH_ARGS replaces tandem's bench arguments (the default runs every case the
# table needs: batches 1/8/32 at 1k and 4k, prefill 512/2048 and 8 x 1024, 5 runs each).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
usage() { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
case ${1:-} in
build)
  [[ $# -eq 3 ]] || usage
  peer=$2 tok=$3
  [[ -x $peer/run.sh && -f $peer/llama.cpp-src.tgz ]] || { echo "gpu-peer: $peer is not a copy of shared/peer" >&2; exit 1; }
  [[ -f $tok ]] || { echo "gpu-peer: no tokenizer file $tok (scripts/testdata.sh fetches the Qwen3 one)" >&2; exit 1; }
  bash "$peer/run.sh" build "$tok"
  ;;
bench)
  [[ $# -eq 4 ]] || usage
  peer=$2 bench=$3 out=$4
  [[ -x $bench ]] || { echo "gpu-peer: $bench is not an executable cuda_decode_bench" >&2; exit 1; }
  mkdir -p "$out"
  args=${PEER_BENCH_ARGS:---synthetic qwen3-30b-a3b --batches 1,8,32 --contexts 1024,4096 --prefill 512,2048 --prefill-batch 8x1024 --no-kernel-table}
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$out/gpu.txt"
  # Each part has a deadline, so one hung part still leaves the others' outputs and a clear error.
  # shellcheck disable=SC2086
  timeout 240 "$bench" $args >"$out/tandem-A.txt" 2>&1 || { echo "gpu-peer: tandem A failed (rc $?), see $out/tandem-A.txt" >&2; exit 1; }
  timeout 300 bash "$peer/run.sh" bench >"$out/peer.txt" 2>&1 || { echo "gpu-peer: llama.cpp bench failed (rc $?), see $out/peer.txt" >&2; exit 1; }
  # shellcheck disable=SC2086
  timeout 240 "$bench" $args >"$out/tandem-B.txt" 2>&1 || { echo "gpu-peer: tandem B failed (rc $?), see $out/tandem-B.txt" >&2; exit 1; }
  python3 "$root/scripts/peer_table.py" "$out/tandem-A.txt" "$out/peer.txt" "$out/tandem-B.txt" | tee "$out/table.md"
  ;;
*) usage ;;
esac
