#!/usr/bin/env bash
# Issue 7 on a machine with 2 GPUs, from the folder scripts/gpu-pack.sh --with-cluster makes:
#   a. golden: tandem-infer logits/generate on the qwen3moe-tiny golden prompts at TP=1 and at
#      TP=2 (--ranks processes, one process per GPU); greedy tokens identical, logits within 1e-2
#      (max |diff| / max |logit|, scripts/compare-logits.sh).
#   b. bench: cuda_decode_bench --synthetic qwen3-30b-a3b --batches 1 --contexts 1024 at --tp 1
#      and --tp 2: the batch-1 decode speed-up (target >= 1.4x) and the all-reduce lines it prints.
#   c. cluster: two tandem-agentd on loopback, CUDA_VISIBLE_DEVICES=0 and =1, `tandemctl up` with
#      engine.backend cuda and TP=2 (NCCL; fabric_check: the group's all-reduce latency and busbw
#      before the load) on a random-weight Qwen3-MoE of qwen3moe-tiny's shape
#      carrying the real tokenizer (tandem-infer make-model), one chat completion, then a long
#      streaming request during which one agent gets kill -9: the client must see the stream end
#      with an error within 5 s. Then `tandemctl down`.
# Prints a table last; every command has a timeout; logs, the agents' logs and the commands run go
# to $OUT/gpu-tp2-logs.tar.gz (or /tmp/gpu-tp2). KEEP=1 keeps the work folder (model, state).
#
# Usage: scripts/gpu-tp2.sh [PACKED_DIR] [--backend cuda|cpu] [--steps a,b,c] [--kill worker|head]
#                           [--signal KILL|STOP] [--bin DIR] [--dry-run]
#   PACKED_DIR  default gpu-out (bin/, lib/, testdata/, cluster.tar.gz: unpacked into the work folder)
#   --backend cpu  the same steps without a GPU (TP=2 over Gloo; step b is skipped): tests this
#                  script's logic, kill -9 timing included, on any machine.
#   --bin DIR      take tandem-agentd/tandemctl/tandem-infer/cuda_decode_bench from DIR (searched
#                  recursively, e.g. a build folder) instead of PACKED_DIR/bin.
#   --signal STOP  freeze the agent instead of killing it: its sockets stay open, so only the
#                  head's heartbeat watch (3 s) can notice (on the cpu backend Gloo would not).
#   --dry-run      print the commands, run nothing.
set -uo pipefail

dir=gpu-out
backend=cuda
steps=a,b,c
kill_which=worker
signal=KILL
bin_dir=""
dry=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --backend) backend=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --kill) kill_which=$2; shift 2 ;;
    --signal) signal=$2; shift 2 ;;
    --bin) bin_dir=$2; shift 2 ;;
    --dry-run) dry=1; shift ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    -*) echo "gpu-tp2: unknown flag $1" >&2; exit 2 ;;
    *) dir=$1; shift ;;
  esac
done
[[ $backend == cuda || $backend == cpu ]] || { echo "gpu-tp2: --backend cuda|cpu" >&2; exit 2; }
[[ $kill_which == worker || $kill_which == head ]] || { echo "gpu-tp2: --kill worker|head" >&2; exit 2; }
[[ $signal == KILL || $signal == STOP ]] || { echo "gpu-tp2: --signal KILL|STOP" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)  # compare-logits.sh, lib-agents.sh and lib-gpu.sh live beside this script
# shellcheck source=scripts/lib-gpu.sh
. "$here/lib-gpu.sh"
dir=$(cd "$dir" 2>/dev/null && pwd || echo "$dir")

WORK=$(mktemp -d /tmp/gpu-tp2-XXXXXX)
# gpu-pack.sh --with-cluster leaves the cluster binaries, their libraries, the tokenizer and the
# golden prompts in cluster.tar.gz, and the bench in tests.tar.xz (unpacked they would not fit
# the device's 64 MiB).
PACK="$WORK/pack"
mkdir -p "$PACK"
for t in tests.tar.xz cluster.tar.gz; do  # tests: bin/ and lib/ of the GPU tests and the bench
  if [[ -f "$dir/$t" ]]; then
    tar xaf "$dir/$t" -C "$PACK" || { echo "gpu-tp2: cannot unpack $dir/$t" >&2; exit 1; }
  fi
done
find_bin() {  # NAME -> path: --bin DIR, else the unpacked bundle, else PACKED_DIR/bin
  if [[ -n $bin_dir ]]; then
    find "$bin_dir" -type f -name "$1" -perm -u+x 2>/dev/null | head -1
  elif [[ -x "$PACK/bin/$1" ]]; then
    echo "$PACK/bin/$1"
  else
    echo "$dir/bin/$1"
  fi
}
find_data() {  # NAME under testdata/: the unpacked bundle, else PACKED_DIR/testdata, else the repository's
  if [[ -e "$PACK/testdata/$1" ]]; then echo "$PACK/testdata/$1"
  elif [[ -e "$dir/testdata/$1" ]]; then echo "$dir/testdata/$1"
  else echo "$here/../tests/data/$1"; fi
}
INFER=$(find_bin tandem-infer)
AGENTD=$(find_bin tandem-agentd)
TANDEMCTL=$(find_bin tandemctl)
BENCH=$(find_bin cuda_decode_bench)
TINY=$(find_data qwen3moe-tiny)
TOKDIR=$(find_data qwen3-tokenizer)
PROMPTS=$(find_data golden-prompts.txt)
export LD_LIBRARY_PATH="$PACK/lib:$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
LOG=$(gpu_log_dir gpu-tp2)
trap 'gpu_pack_logs gpu-tp2 "$LOG"' EXIT  # cleanup() below replaces it and packs them too
CMDS="$LOG/commands.txt"
: > "$CMDS"
summary=()
add() { summary+=("$(printf '%-38s %-6s %s' "$1" "$2" "$3")"); }

# run SECONDS LOGNAME CMD...: logs the command, runs it with a timeout, output to $LOG/LOGNAME.
run() {
  local secs=$1 name=$2
  shift 2
  printf '%q ' timeout "$secs" "$@" >> "$CMDS"
  echo >> "$CMDS"
  if [[ $dry == 1 ]]; then
    printf '  %q' "$@"
    echo
    return 0
  fi
  timeout "$secs" "$@" > "$LOG/$name.log" 2>&1
}

echo "gpu-tp2: backend=$backend steps=$steps packed=$dir work=$WORK logs=$LOG"
# cuBLAS (prefill GEMMs of >= 64 tokens, dlopen'ed) is the machine's own (lib-gpu.sh gpu_add_cublas).
if [[ $backend == cuda && $dry == 0 ]]; then gpu_add_cublas; fi
[[ $backend == cuda && $dry == 0 ]] && { nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader || true; }

# ---- a. golden prompts: TP=1 vs TP=2 (one process per rank) ----
if [[ ,$steps, == *,a,* ]]; then
  model="$TINY"
  prompts="$PROMPTS"
  if [[ ! -f $prompts && $dry == 0 ]]; then
    echo "gpu-tp2: $prompts is missing (scripts/gpu-pack.sh --with-cluster writes it)" >&2
    add "a. golden" FAIL "no golden-prompts.txt"
  else
    worst=0 golden_ok=1 a_fail=""
    while read -r n ids golden; do
      for tp in 1 2; do
        ranks=(); [[ $tp == 2 ]] && ranks=(--ranks processes)
        run 300 "a-logits-p$n-tp$tp" "$INFER" logits --model "$model" --backend "$backend" --tp "$tp" "${ranks[@]}" \
          --prompt-ids "$ids" --out "$WORK/p$n-tp$tp.safetensors" --timeout-s 240 || a_fail="$a_fail logits-p$n-tp$tp"
        run 300 "a-generate-p$n-tp$tp" "$INFER" generate --model "$model" --backend "$backend" --tp "$tp" "${ranks[@]}" \
          --prompt-ids "$ids" --max-tokens 16 --temperature 0 --json --timeout-s 240 || a_fail="$a_fail generate-p$n-tp$tp"
      done
      [[ $dry == 1 ]] && continue
      cmp_out=$("$here/compare-logits.sh" "$WORK/p$n-tp1.safetensors" "$WORK/p$n-tp2.safetensors" 1e-2 2>&1) || a_fail="$a_fail logits-p$n"
      rel=$(sed -n 's/.*rel=\([^ ]*\).*/\1/p' <<< "$cmp_out")
      worst=$(awk -v a="$worst" -v b="${rel:-1}" 'BEGIN { print (b + 0 > a + 0) ? b : a }')
      t1=$(grep -o '"token_ids":\[[^]]*\]' "$LOG/a-generate-p$n-tp1.log" | tail -1)
      t2=$(grep -o '"token_ids":\[[^]]*\]' "$LOG/a-generate-p$n-tp2.log" | tail -1)
      [[ -n $t1 && $t1 == "$t2" ]] || a_fail="$a_fail greedy-p$n"
      # Against transformers' greedy (information: bf16 may flip near-ties, see testdata README).
      [[ $t1 == "\"token_ids\":[$golden]" ]] || golden_ok=0
      echo "  prompt $n ($(tr ',' ' ' <<< "$ids" | wc -w) tokens): logits tp2 vs tp1 $cmp_out; greedy tp1 $t1 tp2 $t2"
    done < <([[ -f $prompts ]] && cat "$prompts" || echo "0 1 -")
    if [[ $dry == 0 ]]; then
      if [[ -z $a_fail ]]; then add "a. golden tp2 vs tp1" PASS "max rel logits diff $worst (<= 1e-2), greedy identical"
      else add "a. golden tp2 vs tp1" FAIL "max rel $worst; failed:$a_fail"; fi
      add "   tp1 greedy = transformers" "$([[ $golden_ok == 1 ]] && echo same || echo differs)" "(information)"
    fi
  fi
fi

# ---- b. decode bench: TP=2 / TP=1 speed-up at batch 1, context 1024 ----
if [[ ,$steps, == *,b,* ]]; then
  if [[ $backend != cuda ]]; then
    add "b. decode speed-up" skip "cpu backend"
  else
    declare -A step_ms
    for tp in 1 2; do
      run 600 "b-bench-tp$tp" "$BENCH" --synthetic qwen3-30b-a3b --batches 1 --contexts 1024 --tp "$tp" || true
      [[ $dry == 1 ]] && continue
      # The row "| 1 | 1024 | yes | <median ms> (min-max) | tokens/s | ..." of the decode table.
      step_ms[$tp]=$(awk -F'|' '$2+0 == 1 && $3+0 == 1024 && $4 ~ /yes/ { split($5, a, " "); print a[1]; exit }' "$LOG/b-bench-tp$tp.log")
      echo "  tp=$tp: batch-1 step ${step_ms[$tp]:-?} ms; all-reduce lines:"
      grep -i -E 'all-?reduce|allreduce|4 ?KiB|4096 B' "$LOG/b-bench-tp$tp.log" | sed 's/^/    /' | head -12
    done
    if [[ $dry == 0 ]]; then
      if [[ -n ${step_ms[1]:-} && -n ${step_ms[2]:-} ]]; then
        speedup=$(awk -v a="${step_ms[1]}" -v b="${step_ms[2]}" 'BEGIN { printf "%.2f", a / b }')
        verdict=$(awk -v s="$speedup" 'BEGIN { print (s >= 1.4) ? "PASS" : "FAIL" }')
        add "b. decode speed-up tp2/tp1" "$verdict" "${speedup}x (${step_ms[1]} ms -> ${step_ms[2]} ms per step; target >= 1.4x)"
      else
        add "b. decode speed-up tp2/tp1" FAIL "no batch-1 row parsed (see $LOG/b-bench-tp*.log)"
      fi
      ar=$(grep -i -E 'all-?reduce' "$LOG/b-bench-tp2.log" | grep -i -E '4 ?KiB|4096' | head -1 | tr -s ' ')
      add "b. all-reduce 4 KiB (tp2)" info "${ar:-not printed by the bench}"
    fi
  fi
fi

# ---- c. two agents, tandemctl up over NCCL, a request, kill -9 mid-stream ----
PIDS=()
cleanup() {
  if [[ -f "$WORK/cluster.yaml" && $dry == 0 ]]; then timeout 60 "$TANDEMCTL" down -f "$WORK/cluster.yaml" >/dev/null 2>&1; fi
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null; kill -CONT "$pid" 2>/dev/null; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null; done
  cp "$WORK"/node*.err "$WORK"/node*.out "$WORK/cluster.yaml" "$LOG/" 2>/dev/null
  [[ ${KEEP:-0} == 1 ]] || rm -rf "$WORK"
  gpu_pack_logs gpu-tp2 "$LOG"
}
trap cleanup EXIT INT TERM
if [[ ,$steps, == *,c,* ]]; then
  c_fail=""
  model="$WORK/model"
  run 300 c-make-model "$INFER" make-model --out "$model" --tokenizer-from "$TOKDIR" || c_fail="make-model"
  . "$here/lib-agents.sh"  # make_cluster_secrets, start_agent, the yaml pieces
  export MODEL_ROOT="$WORK"  # lib-agents.sh: the agents may read $WORK/model and nothing outside $WORK
  # The cluster token and mutual-TLS certificates (tandemctl certs), as the demos run them.
  [[ $dry == 1 || -n $c_fail ]] || make_cluster_secrets node1 node2 || c_fail="certs"
  if [[ $dry == 1 ]]; then
    echo "  CUDA_VISIBLE_DEVICES=0 $AGENTD --listen 127.0.0.1:0 --node-name node1 --state-dir $WORK/state-node1 --token-file $WORK/token &"
    echo "  CUDA_VISIBLE_DEVICES=1 $AGENTD --listen 127.0.0.1:0 --node-name node2 --state-dir $WORK/state-node2 --token-file $WORK/token &"
    echo "127.0.0.1:1" > "$WORK/node1.addr"; echo "127.0.0.1:2" > "$WORK/node2.addr"
  elif [[ -z $c_fail ]]; then
    if [[ $backend == cuda ]]; then
      CUDA_VISIBLE_DEVICES=0 start_agent node1 > "$WORK/node1.addr" || c_fail="agent node1"
      CUDA_VISIBLE_DEVICES=1 start_agent node2 > "$WORK/node2.addr" || c_fail="$c_fail agent node2"
    else
      start_agent node1 > "$WORK/node1.addr" || c_fail="agent node1"
      start_agent node2 > "$WORK/node2.addr" || c_fail="$c_fail agent node2"
    fi
  fi
  api_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null ||
             echo $((20000 + RANDOM % 20000)))
  if [[ $backend == cuda ]]; then
    engine_keys="  backend: cuda              # one GPU per agent (CUDA_VISIBLE_DEVICES); memory_fraction 0.90 of it by default"
  else
    engine_keys=$'  backend: cpu\n  memory_fraction: 0.05\n  kv_tokens: 16384'
  fi
  cat > "$WORK/cluster.yaml" <<YAML
cluster: tp2
model:
  path: $model
  served_name: qwen3-moe-tp2
parallel:
  tensor: 2
engine:
$engine_keys
  max_num_seqs: 8
  max_model_len: 4096
api:
  listen: 127.0.0.1:$api_port
fabric_check: true              # the group's own all-reduces (NCCL for cuda) before the load
$(cluster_secrets_yaml)
$(two_local_nodes_yaml)
YAML
  [[ $dry == 1 ]] && sed 's/^/    /' "$WORK/cluster.yaml"
  if [[ -z $c_fail ]]; then
    t0=$EPOCHREALTIME
    if run 600 c-up "$TANDEMCTL" up -f "$WORK/cluster.yaml"; then
      add "c. tandemctl up (tp2, $backend)" PASS "$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f s", b - a }'); $(grep -o -E '^fabric: transport [^ ]+' "$LOG/c-up.log" 2>/dev/null | head -1 | cut -d' ' -f2-)"
      # The fabric check's summary line (4 KiB all-reduce latency, 64 MiB busbw; table in c-up.log).
      add "c. fabric check (tp2, $backend)" PASS "$(grep -o -E 'fabric: ok: .*' "$LOG/c-up.log" 2>/dev/null | head -1)"
    else
      c_fail="up"
      add "c. tandemctl up (tp2, $backend)" FAIL "see $LOG/c-up.log"
      [[ $dry == 0 ]] && tail -30 "$LOG/c-up.log"
    fi
  fi
  if [[ -z $c_fail ]]; then
    url="http://127.0.0.1:$api_port/v1/chat/completions"
    run 90 c-chat curl -sS --max-time 60 "$url" -H 'Content-Type: application/json' \
      -d '{"model": "qwen3-moe-tp2", "max_tokens": 24, "temperature": 0, "messages": [{"role": "user", "content": "Say hello in five words."}], "chat_template_kwargs": {"enable_thinking": false}}'
    if [[ $dry == 1 ]] || grep -q '"choices"' "$LOG/c-chat.log"; then
      add "c. chat completion" PASS "$(grep -o '"completion_tokens":[0-9]*' "$LOG/c-chat.log" 2>/dev/null | head -1)"
    else
      c_fail="chat"
      add "c. chat completion" FAIL "$(head -c 200 "$LOG/c-chat.log" 2>/dev/null)"
    fi
  fi
  if [[ -z $c_fail && $dry == 0 ]]; then
    # A stream long enough to be cut (ignore_eos: random weights may emit eos early); each line
    # gets the wall time it arrived ($EPOCHREALTIME: no fork per line).
    body='{"model": "qwen3-moe-tp2", "max_tokens": 3500, "ignore_eos": true, "temperature": 0, "stream": true, "messages": [{"role": "user", "content": "Count to ten thousand."}], "chat_template_kwargs": {"enable_thinking": false}}'
    printf '%q ' curl -sS -N --max-time 120 "$url" -H 'Content-Type: application/json' -d "$body" >> "$CMDS"; echo >> "$CMDS"
    ( curl -sS -N --max-time 120 "$url" -H 'Content-Type: application/json' -d "$body" 2>&1; echo "curl-exit $?" ) |
      while IFS= read -r line; do printf '%s %s\n' "$EPOCHREALTIME" "$line"; done > "$LOG/c-stream.log" &
    stream_pid=$!
    # Cut it once tokens flow: after the 20th chunk (or 30 s).
    chunks() { local n; n=$(grep -c '^[0-9.]* data: {' "$LOG/c-stream.log" 2>/dev/null); echo "${n:-0}"; }
    for _ in $(seq 1 300); do
      (( $(chunks) >= 20 )) && break
      sleep 0.1
    done
    victim_idx=1; [[ $kill_which == head ]] && victim_idx=0
    victim=${PIDS[$victim_idx]}
    t_kill=$EPOCHREALTIME
    kill -"$signal" "$victim"
    echo "  kill -$signal $victim (the $kill_which's agent) at $t_kill after $(chunks) chunks"
    # The client's stream must end within 5 s; give it 30 before calling it hung.
    for _ in $(seq 1 300); do kill -0 "$stream_pid" 2>/dev/null || break; sleep 0.1; done
    kill "$stream_pid" 2>/dev/null
    wait "$stream_pid" 2>/dev/null
    # When the client saw the end: the error event, else the curl exit line.
    t_end=$(awk '/"error"/ { print $1; exit }' "$LOG/c-stream.log")
    [[ -z $t_end ]] && t_end=$(awk '/curl-exit/ { print $1; exit }' "$LOG/c-stream.log")
    chunks_after=$(awk -v t="$t_kill" '$1 > t && / data: \{/ && !/"error"/ { n++ } END { print n + 0 }' "$LOG/c-stream.log")
    error_line=$(grep -m1 -E '"error"|curl-exit [1-9]|curl: \(' "$LOG/c-stream.log" | cut -d' ' -f2- | head -c 160)
    done_normally=$(grep -c '"finish_reason":"length"' "$LOG/c-stream.log")
    if [[ -n $t_end ]]; then
      secs=$(awk -v a="$t_kill" -v b="$t_end" 'BEGIN { printf "%.2f", b - a }')
      verdict=$(awk -v s="$secs" -v e="$error_line" -v d="$done_normally" 'BEGIN { print (s <= 5 && e != "" && d == 0) ? "PASS" : "FAIL" }')
      add "c. kill -$signal $kill_which -> stream error" "$verdict" "${secs} s (<= 5 s); $chunks_after chunks after the kill; ${error_line:-no error seen}"
    else
      add "c. kill -$signal $kill_which -> stream error" FAIL "the stream did not end within 30 s"
    fi
    run 60 c-status "$TANDEMCTL" status -f "$WORK/cluster.yaml"
    [[ $signal == STOP ]] && kill -KILL "$victim" 2>/dev/null  # a frozen agent would hold `down` up
    add "   status after the kill" info "$(grep -i -E 'failed|lost' "$LOG/c-status.log" | head -1 | tr -s ' ' | head -c 120)"
  fi
  if [[ $dry == 0 && -f "$WORK/cluster.yaml" ]]; then
    if run 120 c-down "$TANDEMCTL" down -f "$WORK/cluster.yaml"; then add "c. tandemctl down" PASS ""
    else add "c. tandemctl down" "rc=$?" "see $LOG/c-down.log (one agent is dead: errors for it are expected)"; fi
  fi
  [[ -n $c_fail ]] && add "c. cluster" FAIL "stopped at:$c_fail (logs: $LOG, agents: $WORK/node*.err)"
fi

echo
echo "commands run: $CMDS"
[[ $dry == 1 ]] && { echo "dry run: nothing was run"; exit 0; }
echo "== gpu-tp2 summary ($backend) =="
printf '%s\n' "${summary[@]}"
if [[ $dry == 0 ]] && printf '%s\n' "${summary[@]}" | grep -q ' FAIL '; then
  for f in "$WORK"/node*.err; do [[ -f $f ]] && { echo "--- tail of $f"; tail -15 "$f"; }; done
  exit 1  # (the EXIT trap copies the agents' logs to $LOG)
fi
exit 0
