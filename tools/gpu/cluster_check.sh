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
#                        `ucx_transports` with ucx (not named UCX_*: UCX warns of unknown UCX_ variables)
#   PREFILL_GPU=0 DECODE_GPU=1 with two GPUs, else 0 and 0
#   MODEL_PRESET=llama3-8b MODEL_DIR=/tmp/tandem_cluster/model_$MODEL_PRESET (kept once written whole)
#   SHORT_PROMPT=1024 LONG_PROMPT=4096 SINGLE_OUTPUT=32 REPEATS=5   one prompt at a time
#   RATE=6 DURATION=40 POISSON_PROMPT=2048 POISSON_OUTPUT=128        Poisson arrivals
#   GREEDY_PROMPT=4096 GREEDY_TOKENS=32                              the equality check
#   DECODE_KV_BLOCKS=16384 PREFILL_KV_BLOCKS=4096 HOST_KV_BLOCKS=0 TRANSFER_BLOCKS=512 BLOCK_SIZE=16
#   MAX_BATCHED_TOKENS=8192 PREFILL_CHUNK=4096 PREFIX_CACHING=false  (off: no hits across modes)
#   BENCH_VOCAB=500 TTFT_SLO_MS=500 TPOT_SLO_MS=50 READY_TIMEOUT=300
#   DEADLINE=540  seconds from the start: later scenarios are skipped (and say so) rather than cut
#                 off by the device tool's 600 s limit
set -u
cd "$(dirname "$0")/../.."
LOCAL=0
[ "${1:-}" = "--local" ] && LOCAL=1
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
  BACKEND=cpu; NGPU=0; B=${TANDEM_BUILD_DIR:-build}
  : "${TRANSPORT:=ucx}" "${KV_UCX_TRANSPORTS:=tcp}" "${MODEL_PRESET:=tiny}" "${MODEL_ARGS:=--vocab-size 1024}"
  : "${SHORT_PROMPT:=64}" "${LONG_PROMPT:=256}" "${SINGLE_OUTPUT:=8}" "${REPEATS:=2}"
  : "${RATE:=4}" "${DURATION:=4}" "${POISSON_PROMPT:=128}" "${POISSON_OUTPUT:=8}"
  : "${GREEDY_PROMPT:=256}" "${GREEDY_TOKENS:=16}" "${DECODE_KV_BLOCKS:=512}" "${PREFILL_KV_BLOCKS:=256}"
  : "${TRANSFER_BLOCKS:=128}" "${MAX_BATCHED_TOKENS:=2048}" "${PREFILL_CHUNK:=512}" "${READY_TIMEOUT:=120}"
  : "${TTFT_SLO_MS:=2000}" "${TPOT_SLO_MS:=500}"
else
  BACKEND=cuda
  NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  export NCCL_NVLS_ENABLE=0
fi
: "${TRANSPORT:=cuda_ipc}" "${KV_UCX_TRANSPORTS:=shm}" "${MODEL_PRESET:=llama3-8b}" "${MODEL_ARGS:=}"
: "${MODEL_DIR:=$WORK/model_$MODEL_PRESET}"
: "${PREFILL_GPU:=0}" "${DECODE_GPU:=$([ "$NGPU" -ge 2 ] && echo 1 || echo 0)}"
: "${SHORT_PROMPT:=1024}" "${LONG_PROMPT:=4096}" "${SINGLE_OUTPUT:=32}" "${REPEATS:=5}"
: "${RATE:=6}" "${DURATION:=40}" "${POISSON_PROMPT:=2048}" "${POISSON_OUTPUT:=128}"
: "${GREEDY_PROMPT:=4096}" "${GREEDY_TOKENS:=32}"
: "${DECODE_KV_BLOCKS:=16384}" "${PREFILL_KV_BLOCKS:=4096}" "${HOST_KV_BLOCKS:=0}" "${TRANSFER_BLOCKS:=512}"
: "${BLOCK_SIZE:=16}" "${MAX_BATCHED_TOKENS:=8192}" "${PREFILL_CHUNK:=4096}" "${PREFIX_CACHING:=false}"
: "${BENCH_VOCAB:=500}" "${TTFT_SLO_MS:=500}" "${TPOT_SLO_MS:=50}" "${READY_TIMEOUT:=300}" "${DEADLINE:=540}"

pids=()
cleanup() { local p; for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; }
finish() {
  cleanup
  tar -czf "$OUT/cluster_logs.tar.gz" -C "$WORK" logs 2>/dev/null
}
trap finish EXIT
trap 'exit 143' TERM INT
die() { echo "cluster_check: $*" | tee -a "$LOG"; tail -n 25 "$LOGS"/*.log 2>/dev/null | tail -n 80; exit 1; }

# ---- binaries ----
if [ -n "${TANDEM_GPU_PREBUILT:-}" ]; then
  step "prebuilt binaries from $TANDEM_GPU_PREBUILT"
  use_prebuilt "$TANDEM_GPU_PREBUILT" || die "no prebuilt binaries"
elif [ "$LOCAL" = 1 ]; then
  step "binaries from $B"
else
  B=build-gpu
  step "unpack .deps/debs"
  use_debs .deps/debs "$PWD/.deps/root" || die "no Debian packages"
  step configure
  cmake -S . -B $B -G Ninja -DTANDEM_CUDA=ON -DCMAKE_BUILD_TYPE=Release "${DEPS_CMAKE_ARGS[@]}" \
    >> "$LOGS/build.log" 2>&1 || die "configure failed (build.log)"
  step build
  ninja -C $B -j"$(nproc)" tandem-router tandem-prefill tandem-decode tandem-make-model tandem-bench-serving \
    >> "$LOGS/build.log" 2>&1 || { grep -E "error" -A3 "$LOGS/build.log" | head -40; die "build failed"; }
fi
ROUTER=$(find_bin tandem-router); PREFILL=$(find_bin tandem-prefill); DECODE=$(find_bin tandem-decode)
MAKE_MODEL=$(find_bin tandem-make-model); BENCH=$(find_bin tandem-bench-serving)
for b in ROUTER PREFILL DECODE MAKE_MODEL BENCH; do [ -x "${!b}" ] || die "no $b binary under $B"; done
ldd "$DECODE" "$ROUTER" | grep "not found" && die "shared libraries missing (above)"

# ---- model (kept while the machine stays warm; the marker says it was written whole) ----
if [ ! -f "$MODEL_DIR/.cluster_check_model" ]; then
  step "write model $MODEL_PRESET to $MODEL_DIR"
  rm -rf "$MODEL_DIR"
  "$MAKE_MODEL" --preset "$MODEL_PRESET" $MODEL_ARGS -o "$MODEL_DIR" > "$LOGS/make_model.log" 2>&1 \
    || die "tandem-make-model failed (make_model.log)"
  $UTIL name-ids "$MODEL_DIR" >> "$LOGS/make_model.log" 2>&1 || die "naming the token ids failed"
  touch "$MODEL_DIR/.cluster_check_model"
fi
MODEL=cluster-check
TOKEN=cluster-check-token-$RANDOM$RANDOM
CONTROL_PORT=$($UTIL free-port)
HTTP_PORT=$($UTIL free-port)

# ---- processes ----
start_router() {  # MODE
  "$ROUTER" --model-dir "$MODEL_DIR" --served-model-name $MODEL --listen-port "$HTTP_PORT" \
    --control-address "127.0.0.1:$CONTROL_PORT" --cluster-token "$TOKEN" --mode "$1" \
    > "$LOGS/router_$1.log" 2>&1 &
  pids+=($!)
  PID[router]=$!
  LAUNCHED_MS[router]=$(now_ms)
}
start_node() {  # ROLE GPU KV_BLOCKS
  local bin=${1^^}
  "${!bin}" --router-address "127.0.0.1:$CONTROL_PORT" --cluster-token "$TOKEN" \
    --node-name "$1-0" --listen-address 127.0.0.1:0 --http-address 127.0.0.1:0 \
    --transport "$TRANSPORT" --ucx-transports "$KV_UCX_TRANSPORTS" --transfer-blocks "$TRANSFER_BLOCKS" \
    --model-dir "$MODEL_DIR" --model-name $MODEL --backend $BACKEND --device "$2" \
    --kv-block-size "$BLOCK_SIZE" --kv-num-device-blocks "$3" --kv-num-host-blocks "$HOST_KV_BLOCKS" \
    --kv-enable-prefix-caching "$PREFIX_CACHING" --scheduler-max-num-batched-tokens "$MAX_BATCHED_TOKENS" \
    --scheduler-max-prefill-chunk-tokens "$PREFILL_CHUNK" > "$LOGS/$1.log" 2>&1 &
  pids+=($!)
  PID[$1]=$!
}
http_ok() {  # HOST:PORT PATH -> 0 on HTTP 200 (bash /dev/tcp: no curl needed)
  local fd status
  exec {fd}<>"/dev/tcp/${1%:*}/${1#*:}" 2>/dev/null || return 1
  printf 'GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n' "$2" "$1" >&"$fd"
  read -r -t 5 status <&"$fd"
  exec {fd}>&-
  [[ "$status" == "HTTP/1.1 200"* ]]
}
# The HTTP address a node printed once its engine was up (it listens on a free port).
node_http() { grep -m1 -o 'http_address=.*' "$LOGS/$1.log" 2>/dev/null | cut -d= -f2; }
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
# wait_ready NAME...: polls each process's /health/ready (nodes: ready = registered with the
# router) until all answer 200; READY_MS[name] = launch -> first 200, ms.
wait_ready() {
  local name addr pending=("$@") still
  local until=$(( $(date +%s) + READY_TIMEOUT ))
  while ((${#pending[@]})); do
    still=()
    for name in "${pending[@]}"; do
      kill -0 "${PID[$name]}" 2>/dev/null || die "$name exited while starting ($name.log)"
      if [ "$name" = router ]; then addr=127.0.0.1:$HTTP_PORT; else addr=$(node_http "$name"); fi
      if [ -n "$addr" ] && http_ok "$addr" /health/ready; then
        READY_MS[$name]=$(( $(now_ms) - LAUNCHED_MS[$name] ))
      else
        still+=("$name")
      fi
    done
    pending=("${still[@]}")
    ((${#pending[@]})) || break
    (( $(date +%s) > until )) && die "not ready after $READY_TIMEOUT s: ${pending[*]}"
    sleep 0.1
  done
}
declare -A PID READY_MS LAUNCHED_MS

step "start router (disaggregated), prefill (GPU $PREFILL_GPU), decode (GPU $DECODE_GPU); transport $TRANSPORT"
start_router disaggregated
for role in prefill decode; do
  LAUNCHED_MS[$role]=$(now_ms)
  if [ $role = prefill ]; then start_node prefill "$PREFILL_GPU" "$PREFILL_KV_BLOCKS"; else
    start_node decode "$DECODE_GPU" "$DECODE_KV_BLOCKS"; fi
done
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

step "restart the router colocated (the decode node re-registers and prefills locally)"
kill "${PID[router]}"; wait "${PID[router]}" 2>/dev/null
start_router colocated
wait_ready router
run_mode colocated 200
step done

for f in "$LOGS"/bench_*.log; do grep -q '^summary_json=' "$f" || { echo "---- $(basename "$f") ----"; tail -5 "$f"; }; done
{
  echo "cluster check: $BACKEND backend, model $MODEL_PRESET, transport $TRANSPORT" \
       "$([ "$TRANSPORT" = ucx ] && echo "($KV_UCX_TRANSPORTS)"), prefill GPU $PREFILL_GPU, decode GPU $DECODE_GPU," \
       "prefix caching $PREFIX_CACHING, $(( $(date +%s) - T0 )) s"
  $UTIL table "$LOGS"
} > "$OUT/cluster_table.md"
cp "$OUT/cluster_table.md" "$LOGS/"
cat "$OUT/cluster_table.md"
