#!/usr/bin/env bash
# Fault scenarios through the real processes on the GPU machine (issue 21 item 4; RELIABILITY F1, F3, C1):
# tandem-router + tandem-prefill + DECODES tandem-decode (CUDA backend, Llama-3-8B shape, KV over TRANSPORT),
# REQUESTS streamed completions with PROMPT_MIN..PROMPT_MAX-token prompts at once, and as soon as a KV
# transfer is in flight (the prefill node's tandem_kv_transfer_sessions >= 1, and the victim's own):
#   kill_prefill  SIGKILL the prefill node. Every request ends with exactly one terminal outcome (prefilled
#                 again on decode, or an error) within TERMINAL_S of the kill; the decode nodes and the
#                 router are KV clean within CLEAN_S once idle; the prefill node, restarted, serves a request.
#   kill_decode   SIGKILL the decode node receiving (with DECODES=2 the other one takes its requests). The
#                 same, with the prefill node, the other decode node and the router KV clean; the decode
#                 node is restarted and a request goes through prefill.
#   cancel        every stream still waiting for its first token disconnects. Both nodes and the router are
#                 KV clean within CLEAN_S; a request after it succeeds through prefill.
# Each scenario REPEATS times, in rounds (each scenario once, then again), as far as DEADLINE allows. One
# PASS/FAIL table last (also $OUT/cluster_faults_table.md); logs in $OUT/cluster_faults_logs.tar.gz; exit
# status 1 unless every scenario passed.
#
# Usage (repository root): tools/gpu/cluster_faults.sh [--local]
#   --local  here, without a GPU: CPU backend, tiny model, UCX over tcp, binaries from build/ or
#            TANDEM_GPU_PREBUILT (tests this script end to end)
# Environment (GPU defaults; --local ones below). The shared ones as in cluster_check.sh: TANDEM_GPU_PREBUILT,
# TRANSPORT=cuda_ipc, KV_UCX_TRANSPORTS=shm, KV_STAGING=auto, PREFILL_GPU=0, DECODE_GPU (1 with two GPUs, else 0), MODEL_PRESET,
# MODEL_DIR, HOST_KV_BLOCKS, TRANSFER_BLOCKS, BLOCK_SIZE, PREFIX_CACHING, BENCH_VOCAB=500, READY_TIMEOUT.
#   SCENARIOS="kill_prefill kill_decode cancel"  REPEATS=3
#   DECODES=2 DECODE2_GPU=$DECODE_GPU     a second decode node (one H200 holds three 16 GB processes)
#   REQUESTS=6 PROMPT_MIN=4096 PROMPT_MAX=8192 OUTPUT=16     the load of one repeat (prompts spread over
#                                                            MIN..MAX; few output tokens so fallbacks end fast)
#   DECODE_KV_BLOCKS=8192 PREFILL_KV_BLOCKS=4096 MAX_BATCHED_TOKENS=8192 PREFILL_CHUNK=8192
#                 (a prompt is one chunk: the KV moves layer by layer during its whole forward)
#   TERMINAL_S=5 CLEAN_S=5      the limits judged
#   REQUEST_TIMEOUT=30          s without a byte on a stream = hang; also the wait for the streams after the fault
#   DELAY_MS=150   the fault comes a random 0..DELAY_MS after a transfer is first seen in flight (if one
#                  still is), so it meets the layer-by-layer transfer at different points
#   UNSURE_AFTER=3 kill_decode waits this long for a decode node surely receiving (the prefill node has more
#                  send sessions open than the others have receive sessions); else it kills the one with the most
#   SETTLE_S=1     KV clean = every gauge 0 for this long (a node publishes them at the end of each engine step)
#   TRIGGER_TIMEOUT=30 CLEAN_TIMEOUT=20 POLL_MS=5
#   DEADLINE=540  seconds from the start: a repeat that would not fit is skipped (and counted as such)
set -u
cd "$(dirname "$0")/../.."
LOCAL=0
[ "${1:-}" = "--local" ] && LOCAL=1
SCRIPT=cluster_faults
OUT=${OUT:-/tmp/tandem_gpu_out}
mkdir -p "$OUT"
WORK=${CLUSTER_WORK:-/tmp/tandem_cluster}
LOGS=$WORK/fault_logs
rm -rf "$LOGS" && mkdir -p "$LOGS"
T0=$(date +%s)
LOG=$LOGS/steps.log
source tools/gpu/lib.sh
FAULTS="python3 tools/gpu/cluster_faults.py"

if [ "$LOCAL" = 1 ]; then
  : "${REQUESTS:=4}" "${PROMPT_MIN:=512}" "${PROMPT_MAX:=1536}" "${OUTPUT:=8}" "${REPEATS:=2}" "${DELAY_MS:=300}"
  : "${DECODE_KV_BLOCKS:=1024}" "${PREFILL_KV_BLOCKS:=1024}" "${MAX_BATCHED_TOKENS:=4096}" "${PREFILL_CHUNK:=4096}"
  : "${TRANSFER_BLOCKS:=512}"
fi
cluster_defaults
: "${SCENARIOS:=kill_prefill kill_decode cancel}" "${REPEATS:=3}" "${DECODES:=2}" "${DECODE2_GPU:=$DECODE_GPU}"
: "${REQUESTS:=6}" "${PROMPT_MIN:=4096}" "${PROMPT_MAX:=8192}" "${OUTPUT:=16}"
: "${DECODE_KV_BLOCKS:=8192}" "${PREFILL_KV_BLOCKS:=4096}" "${MAX_BATCHED_TOKENS:=8192}" "${PREFILL_CHUNK:=8192}"
: "${TERMINAL_S:=5}" "${CLEAN_S:=5}" "${REQUEST_TIMEOUT:=30}" "${TRIGGER_TIMEOUT:=30}" "${CLEAN_TIMEOUT:=20}"
: "${POLL_MS:=5}" "${DELAY_MS:=150}" "${SETTLE_S:=1}" "${UNSURE_AFTER:=3}" "${DEADLINE:=540}"

declare -A PID READY_MS LAUNCHED_MS ROLE GPU BLOCKS
# The table, once: at the end, or from the exit trap when the script stops early.
report() {
  [ -f "$LOGS/scenarios.txt" ] && [ -z "${REPORTED:-}" ] || return 0
  REPORTED=1
  {
    echo "cluster faults: $BACKEND backend, model $MODEL_PRESET, transport $TRANSPORT" \
         "$([ "$TRANSPORT" = ucx ] && echo "($KV_UCX_TRANSPORTS)"), $DECODES decode node(s)," \
         "prefill GPU $PREFILL_GPU, decode GPU $DECODE_GPU$([ "$DECODES" = 2 ] && echo "/$DECODE2_GPU")," \
         "$(( $(date +%s) - T0 )) s"
    $FAULTS table "$LOGS" --terminal-s "$TERMINAL_S" --clean-s "$CLEAN_S"
  } > "$OUT/cluster_faults_table.md"
  local rc=$?
  cp "$OUT/cluster_faults_table.md" "$LOGS/"
  cat "$OUT/cluster_faults_table.md"
  return $rc
}
cluster_traps cluster_faults_logs.tar.gz report
cluster_binaries
cluster_model

# ---- processes ----
NODES=(prefill decode-a)
[ "$DECODES" = 2 ] && NODES+=(decode-b)
ROLE=([prefill]=prefill [decode-a]=decode [decode-b]=decode)
GPU=([prefill]=$PREFILL_GPU [decode-a]=$DECODE_GPU [decode-b]=$DECODE2_GPU)
BLOCKS=([prefill]=$PREFILL_KV_BLOCKS [decode-a]=$DECODE_KV_BLOCKS [decode-b]=$DECODE_KV_BLOCKS)
launch() { start_node "$1" "${ROLE[$1]}" "${GPU[$1]}" "${BLOCKS[$1]}"; }
metrics_url() { echo "http://$(node_http "$1")/metrics"; }
ROUTER_URL=http://127.0.0.1:$HTTP_PORT
# Memory used per GPU (MiB) and per process: a dead node's memory that stays mapped grows across repeats.
gpu_memory() {
  [ "$LOCAL" = 1 ] && return
  nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits | sed 's/^/process /'
}

step "start router, ${NODES[*]}; transport $TRANSPORT"
start_router disaggregated
for n in "${NODES[@]}"; do launch "$n"; done
wait_ready "${NODES[@]}" router
step "ready: $(for n in "${NODES[@]}"; do printf '%s %.1f s ' "$n" "$(( READY_MS[$n] ))e-3"; done)"
gpu_memory > "$LOGS/gpu_start.txt"
step "warm-up request through prefill"
$FAULTS probe --router "$ROUTER_URL" --model $MODEL --len "$PROMPT_MAX" --tokens "$OUTPUT" --vocab "$BENCH_VOCAB" \
  --seed 1 --sent-by "$(metrics_url prefill)" --timeout 120 --out "$LOGS/probe_warmup.json" | tee -a "$LOG" \
  | grep -q "probe: ok" || die "the warm-up request failed (probe_warmup.json)"

# ---- scenarios ----
: > "$LOGS/scenarios.txt"
declare -A DESC=(
  [kill_prefill]="SIGKILL prefill mid-transfer, restart it"
  [kill_decode]="SIGKILL the receiving decode node mid-transfer ($DECODES decode), restart it"
  [cancel]="clients waiting for their first token disconnect mid-transfer")
for s in $SCENARIOS; do
  [ -n "${DESC[$s]:-}" ] || die "unknown scenario $s (kill_prefill, kill_decode, cancel)"
  echo "$s $REPEATS $REQUESTS x ${PROMPT_MIN}-$PROMPT_MAX tokens, $OUTPUT out: ${DESC[$s]}" >> "$LOGS/scenarios.txt"
done
left() { echo $(( DEADLINE - ($(date +%s) - T0) )); }

# run_repeat SCENARIO R: the load, the fault, the clean check (cluster_faults.py run); then every node
# that died is restarted (an unexpected death is written to exits_SCENARIO_R.txt) and one request must
# succeed through prefill, every process KV clean after it (probe_SCENARIO_R.json).
run_repeat() {  # SCENARIO R SEED
  local s=$1 r=$2 seed=$3 n args=()
  case $s in
    kill_prefill) args=(--victim "prefill=${PID[prefill]}=$(metrics_url prefill)") ;;
    kill_decode) for n in "${NODES[@]}"; do
                   [ "${ROLE[$n]}" = decode ] && args+=(--victim "$n=${PID[$n]}=$(metrics_url "$n")")
                 done ;;
    cancel) args=(--cancel) ;;
  esac
  for n in "${NODES[@]}"; do args+=(--clean "$n=$(metrics_url "$n")"); done
  $FAULTS run --scenario "$s" --repeat "$r" --router "$ROUTER_URL" --model $MODEL --requests "$REQUESTS" \
    --prompt "$PROMPT_MIN:$PROMPT_MAX" --max-tokens "$OUTPUT" --vocab "$BENCH_VOCAB" --seed "$seed" \
    --sender "$(metrics_url prefill)" --clean "router=$ROUTER_URL/metrics" --timeout "$REQUEST_TIMEOUT" \
    --trigger-timeout "$TRIGGER_TIMEOUT" --clean-timeout "$CLEAN_TIMEOUT" --settle "$SETTLE_S" \
    --unsure-after "$UNSURE_AFTER" --poll-ms "$POLL_MS" --delay-ms "$DELAY_MS" --budget "$(( $(left) - 10 ))" \
    --out "$LOGS/fault_${s}_$r.json" "${args[@]}" 2>&1 | tee -a "$LOG"
  local dead=() rc
  for n in "${NODES[@]}"; do
    kill -0 "${PID[$n]}" 2>/dev/null && continue
    wait "${PID[$n]}"; rc=$?
    echo "$n $rc" >> "$LOGS/exits_${s}_$r.txt"
    dead+=("$n")
  done
  kill -0 "${PID[router]}" 2>/dev/null || die "the router exited (router_disaggregated.log)"
  if ((${#dead[@]})); then
    step "$s #$r: restart ${dead[*]}"
    for n in "${dead[@]}"; do launch "$n"; done
    (( READY_TIMEOUT > $(left) )) && READY_TIMEOUT=$(left)
    wait_ready "${dead[@]}"
  fi
  local clean=(--clean "router=$ROUTER_URL/metrics")
  for n in "${NODES[@]}"; do clean+=(--clean "$n=$(metrics_url "$n")"); done
  $FAULTS probe --router "$ROUTER_URL" --model $MODEL --len "$PROMPT_MIN" --tokens "$OUTPUT" --vocab "$BENCH_VOCAB" \
    --seed "$(( seed + 50000 ))" --sent-by "$(metrics_url prefill)" "${clean[@]}" --settle "$SETTLE_S" \
    --timeout "$(( REQUEST_TIMEOUT < $(left) ? REQUEST_TIMEOUT : $(left) ))" --out "$LOGS/probe_${s}_$r.json" \
    2>&1 | tee -a "$LOG"
  gpu_memory > "$LOGS/gpu_${s}_$r.txt"
}

# Rounds: every scenario once, then again, so a DEADLINE cuts repeats, not whole scenarios. A repeat is
# run when the time it took last (first: the slowest start-up + 30 s when it restarts a node) is left.
declare -A TOOK
STARTUP_S=0
for n in "${NODES[@]}"; do (( READY_MS[$n] / 1000 > STARTUP_S )) && STARTUP_S=$(( READY_MS[$n] / 1000 )); done
seed=0
for ((r = 1; r <= REPEATS; r++)); do
  for s in $SCENARIOS; do
    need=${TOOK[$s]:-$([ "$s" = cancel ] && echo 30 || echo $(( STARTUP_S + 30 )))}
    if (( $(left) < need )); then
      step "$s #$r skipped (DEADLINE: $(left) s left, it needs about $need s)"
      continue
    fi
    step "$s #$r"
    t=$(date +%s)
    run_repeat "$s" "$r" $(( ++seed ))
    TOOK[$s]=$(( $(date +%s) - t ))
  done
done
step done
report
