#!/usr/bin/env bash
# The whole cluster on the GPU machine, in one call: takes or builds the binaries, writes the
# Llama-3-8B-shaped model, starts tandem-router + tandem-prefill + tandem-decode on the CUDA backend,
# runs tandem-bench-serving disaggregated and then colocated (the router restarted with
# `--mode colocated`; the same decode node prefills locally), checks that greedy output is the same
# in both modes, and prints one table last (server-side TTFT / ITL / KV transfer from /metrics,
# client-side goodput, the disaggregated / colocated TTFT ratio, node start-up seconds).
# Logs: $OUT/cluster_logs.tar.gz; the table also in $OUT/cluster_table.md.
#
# Usage (repository root): tools/gpu/cluster_check.sh [--local]
#   --local  here, without a GPU: CPU backend, tiny model, short scenarios, UCX over tcp, binaries
#            from build/ or TANDEM_GPU_PREBUILT (tests this script end to end)
# Environment (GPU defaults; --local ones in the script below):
#   TANDEM_GPU_PREBUILT  folder or .tar.xz of binaries (tools/gpu/pack_prebuilt.sh); unset: build
#                        into build-gpu with the Debian packages of .deps/debs (tools/gpu/fetch_deps.sh)
#   TRANSPORT=cuda_ipc   the nodes' `transport` (cuda_ipc | ucx | ...); KV_UCX_TRANSPORTS=shm: their
#                        `ucx_transports` with ucx (not named UCX_*: UCX warns of unknown UCX_ variables);
#                        KV_STAGING=auto: their `kv_staging` (host: always through the host arenas)
#   PREFILL_GPU=0 DECODE_GPU=1 with two GPUs, else 0 and 0
#   MODEL_PRESET=llama3-8b MODEL_DIR=/tmp/tandem_cluster/model_$MODEL_PRESET (kept once written whole)
#   SHORT_PROMPT=1024 LONG_PROMPT=4096 SINGLE_OUTPUT=32 REPEATS=5   one prompt at a time
#   RATE=6 DURATION=40 POISSON_PROMPT=2048 POISSON_OUTPUT=128        Poisson arrivals
#   GREEDY_PROMPT=4096 GREEDY_TOKENS=32                              the equality check
#   DECODE_KV_BLOCKS=16384 PREFILL_KV_BLOCKS=4096 HOST_KV_BLOCKS=0 TRANSFER_BLOCKS=512 BLOCK_SIZE=16
#   MAX_BATCHED_TOKENS=8192 PREFILL_CHUNK=4096 PREFIX_CACHING=false  (off: no hits across modes)
#   BENCH_VOCAB=500 TTFT_SLO_MS=500 TPOT_SLO_MS=50 READY_TIMEOUT=300
#   SCENARIOS="short long poisson"  the benchmark scenarios to run (warm-up and greedy always run)
#   MPS=0         1: the nodes share the GPU through an MPS server (lib.sh mps_start), not time-slicing
#   DEADLINE=540  seconds from the start: later scenarios are skipped (and say so) rather than cut
#                 off by the device tool's 600 s limit
#   RESERVE_FIRST=0  1: also runs disaggregated with each PrefillRequest sent after the reservation
#                 (router --prefill-with-reserve false; mode reserve_first in the table), between the
#                 default disaggregated run and the colocated one
set -u
cd "$(dirname "$0")/../.."
LOCAL=0
[ "${1:-}" = "--local" ] && LOCAL=1
SCRIPT=cluster_check
OUT=${OUT:-/tmp/tandem_gpu_out}
mkdir -p "$OUT"
WORK=${CLUSTER_WORK:-/tmp/tandem_cluster}
LOGS=$WORK/logs
rm -rf "$LOGS" && mkdir -p "$LOGS"
T0=$(date +%s)
LOG=$LOGS/steps.log
source tools/gpu/lib.sh
UTIL="python3 tools/gpu/cluster_util.py"

if [ "$LOCAL" = 1 ]; then
  : "${SHORT_PROMPT:=64}" "${LONG_PROMPT:=256}" "${SINGLE_OUTPUT:=8}" "${REPEATS:=2}"
  : "${RATE:=4}" "${DURATION:=4}" "${POISSON_PROMPT:=128}" "${POISSON_OUTPUT:=8}"
  : "${GREEDY_PROMPT:=256}" "${GREEDY_TOKENS:=16}" "${DECODE_KV_BLOCKS:=512}" "${PREFILL_KV_BLOCKS:=256}"
  : "${TTFT_SLO_MS:=2000}" "${TPOT_SLO_MS:=500}"
fi
cluster_defaults
: "${SHORT_PROMPT:=1024}" "${LONG_PROMPT:=4096}" "${SINGLE_OUTPUT:=32}" "${REPEATS:=5}"
: "${RATE:=6}" "${DURATION:=40}" "${POISSON_PROMPT:=2048}" "${POISSON_OUTPUT:=128}"
: "${GREEDY_PROMPT:=4096}" "${GREEDY_TOKENS:=32}" "${DECODE_KV_BLOCKS:=16384}" "${PREFILL_KV_BLOCKS:=4096}"
: "${TTFT_SLO_MS:=500}" "${TPOT_SLO_MS:=50}" "${DEADLINE:=540}"
: "${SCENARIOS:=short long poisson}"

declare -A PID READY_MS LAUNCHED_MS
cluster_traps cluster_logs.tar.gz
cluster_binaries
cluster_model
mps_start

step "start router (disaggregated), prefill (GPU $PREFILL_GPU), decode (GPU $DECODE_GPU); transport $TRANSPORT"
start_router disaggregated
start_node prefill prefill "$PREFILL_GPU" "$PREFILL_KV_BLOCKS"
start_node decode decode "$DECODE_GPU" "$DECODE_KV_BLOCKS"
wait_ready decode prefill router
: > "$LOGS/startup.txt"
for role in decode prefill; do
  echo "$role $(python3 -c "print('%.1f' % (${READY_MS[$role]} / 1000))")" >> "$LOGS/startup.txt"
done
step "ready: $(tr '\n' ' ' < "$LOGS/startup.txt")(s, launch -> /health/ready)"
DECODE_METRICS="http://$(node_http decode)/metrics"
PREFILL_METRICS="http://$(node_http prefill)/metrics"

# ---- scenarios ----
cat > "$LOGS/scenarios.txt" <<EOF
short one $SHORT_PROMPT-token prompt at a time, $SINGLE_OUTPUT out, x$REPEATS
long one $LONG_PROMPT-token prompt at a time, $SINGLE_OUTPUT out, x$REPEATS
poisson Poisson $RATE req/s for ${DURATION}s, $POISSON_PROMPT-token prompts, $POISSON_OUTPUT out
EOF
left() { echo $(( DEADLINE - ($(date +%s) - T0) )); }
bench() {  # MODE NAME SEED ARGS...
  local mode=$1 name=$2 seed=$3; shift 3
  if [ "$name" != warmup ] && [[ " $SCENARIOS " != *" $name "* ]]; then
    echo "skipped: not in SCENARIOS ($SCENARIOS)" > "$LOGS/bench_${mode}_$name.log"
    return
  fi
  if (( $(left) < 20 )); then
    echo "skipped: DEADLINE ($DEADLINE s) reached" > "$LOGS/bench_${mode}_$name.log"
    step "$mode $name skipped (DEADLINE)"
    return
  fi
  timeout "$(left)" "$BENCH" --port "$HTTP_PORT" --model $MODEL --vocab-size "$BENCH_VOCAB" --seed "$seed" \
    --goodput-ttft-ms "$TTFT_SLO_MS" --goodput-tpot-ms "$TPOT_SLO_MS" --metrics-url "decode=$DECODE_METRICS" \
    --metrics-url "prefill=$PREFILL_METRICS" --json-line "$@" > "$LOGS/bench_${mode}_$name.log" 2>&1
  echo "bench $mode $name rc=$?" >> "$LOG"
}
run_mode() {  # MODE SEED_BASE: every scenario, then the greedy check
  local mode=$1 s=$2
  step "$mode: warm-up"
  bench "$mode" warmup $((s + 9)) --num-prompts 2 --concurrency 1 --input-len 256 --output-len 8
  step "$mode: short"
  bench "$mode" short $((s + 1)) --num-prompts "$REPEATS" --concurrency 1 --input-len "$SHORT_PROMPT" \
    --output-len "$SINGLE_OUTPUT"
  step "$mode: long"
  bench "$mode" long $((s + 2)) --num-prompts "$REPEATS" --concurrency 1 --input-len "$LONG_PROMPT" \
    --output-len "$SINGLE_OUTPUT"
  step "$mode: poisson"
  bench "$mode" poisson $((s + 3)) --num-prompts $((RATE * DURATION)) --request-rate "$RATE" \
    --input-len "$POISSON_PROMPT" --output-len "$POISSON_OUTPUT"
  step "$mode: greedy"
  (( $(left) < 10 )) && return
  timeout "$(left)" $UTIL greedy "http://127.0.0.1:$HTTP_PORT" $MODEL "$GREEDY_PROMPT" "$GREEDY_TOKENS" "$BENCH_VOCAB" \
    "$LOGS/greedy_$mode.json" >> "$LOG" 2>&1
}
run_mode disaggregated 100
if [ "${RESERVE_FIRST:-0}" = 1 ]; then
  step "restart the router with each PrefillRequest after the reservation"
  kill_process router TERM
  start_router disaggregated --prefill-with-reserve false
  wait_ready router
  run_mode reserve_first 100
fi

step "restart the router colocated (the decode node re-registers and prefills locally)"
kill_process router TERM
start_router colocated
wait_ready router
run_mode colocated 200
step done

for f in "$LOGS"/bench_*.log; do grep -q '^summary_json=' "$f" || { echo "---- $(basename "$f") ----"; tail -5 "$f"; }; done
{
  echo "cluster check: $BACKEND backend, model $MODEL_PRESET, transport $TRANSPORT" \
       "$([ "$TRANSPORT" = ucx ] && echo "($KV_UCX_TRANSPORTS)"), prefill GPU $PREFILL_GPU, decode GPU $DECODE_GPU," \
       "prefix caching $PREFIX_CACHING$([ "${MPS:-0}" = 1 ] && echo ", MPS"), $(( $(date +%s) - T0 )) s"
  $UTIL table "$LOGS"
} > "$OUT/cluster_table.md"
cp "$OUT/cluster_table.md" "$LOGS/"
cat "$OUT/cluster_table.md"
