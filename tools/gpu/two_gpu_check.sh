#!/usr/bin/env bash
# Issue 22 on two GPUs (kind nvidia-h200-x2), in one call:
#  (a) the cuda_ipc and nccl transports' conformance and fault tests across the two GPUs (the test
#      process on GPU 0, its helper process on GPU 1: TANDEM_TEST_PEER_GPU=1);
#  (b) kv_transfer_gpu_bench: GPU 0 -> GPU 1 at 1..512 MiB, contiguous and scattered, against
#      cudaMemcpyPeer and ncclSend/ncclRecv of the same run, its ratios against the issue's targets;
#  (c) the Llama-3-8B-shaped cluster as 1P1D (prefill GPU 0, decode GPU 1) and as two colocated
#      replicas behind one router (one per GPU), each swept over Poisson request rates with a
#      ShareGPT-shaped and a fixed 2K-in/256-out workload: per rate goodput under the SLO and TTFT /
#      TPOT p50/p90/p99 (tandem-bench-serving, client side), each layout's best goodput, the 1P1D TTFT
#      of one 4K prompt at a time over the prefill node's prefill time (/metrics), and an SVG of
#      goodput against rate.
# Tables last (also $OUT/two_gpu_table.md), the plot in $OUT/two_gpu_goodput.svg, every log in
# $OUT/two_gpu_logs.tar.gz. Exits 1 when a transport test failed (measurements below a target do not).
#
# The colocated replicas are tandem-decode --role colocated nodes behind a router in its default mode,
# not the router's --mode colocated over two decode nodes: the router then starts the same way for both
# layouts, so the two differ only in their nodes, as in a deployment that mixes them (issue 22 item 2).
# The layouts run one after the other, each alone on the GPUs (node start-up is a few seconds).
#
# Usage (repository root): tools/gpu/two_gpu_check.sh [--local]
#   --local  here, without a GPU: CPU backend, tiny model, both layouts on the one machine (device ids
#            ignored), UCX over tcp, 2 rates of a few seconds; (a) and (b) skipped (they need two GPUs)
# Environment (GPU defaults; --local ones in the script below):
#   PARTS="tests bench cluster"   which of (a), (b), (c) to run (to spread them over calls)
#   TANDEM_GPU_PREBUILT  folder or .tar.xz of binaries (tools/gpu/pack_prebuilt.sh --two-gpu); unset:
#                        build into build-gpu with the Debian packages of .deps/debs
#   TRANSPORT=cuda_ipc   the 1P1D nodes' transport (nccl: through NCCL); KV_STAGING, KV_UCX_TRANSPORTS
#   PREFILL_GPU=0 DECODE_GPU=1 COLOCATED_GPUS="0 1"
#   BENCH_REPS=3                                       kv_transfer_gpu_bench --reps
#   SHAREGPT_RATES="8 16 32 64" FIXED_RATES="4 8 16 24" DURATION=12  req/s; seconds of arrivals per rate
#   SHAREGPT_MAX_INPUT=1024 SHAREGPT_MAX_OUTPUT=512 FIXED_INPUT=2048 FIXED_OUTPUT=256
#   SATURATION=0.5  after a rate where fewer than this share of the requests met the SLO, the higher
#                   rates of that workload are skipped (they say so)
#   SINGLE_PROMPT=4096 SINGLE_OUTPUT=32 REPEATS=5      the overhead: one prompt at a time
#   TTFT_SLO_MS=500 TPOT_SLO_MS=50 REQUEST_TIMEOUT=30  the SLO; per-request limit (s)
#   DECODE_KV_BLOCKS=16384 (each decode and colocated node) PREFILL_KV_BLOCKS=4096, and the other model
#   and pool settings of cluster_check.sh
#   DEADLINE=540  seconds from the start: what would not fit is skipped and says so; the cluster part
#                 gives each layout half of the time left when it begins
set -u
cd "$(dirname "$0")/../.."
LOCAL=0
[ "${1:-}" = "--local" ] && LOCAL=1
SCRIPT=two_gpu_check
OUT=${OUT:-/tmp/tandem_gpu_out}
mkdir -p "$OUT"
WORK=${CLUSTER_WORK:-/tmp/tandem_cluster}
LOGS=$WORK/two_gpu_logs
rm -rf "$LOGS" && mkdir -p "$LOGS"
T0=$(date +%s)
LOG=$LOGS/steps.log
source tools/gpu/lib.sh
REPORT="python3 tools/gpu/two_gpu_report.py"
TESTS=(kv_transfer_cuda_ipc_test kv_transfer_nccl_test)

if [ "$LOCAL" = 1 ]; then
  : "${PARTS:=cluster}" "${SHAREGPT_RATES:=2 4}" "${FIXED_RATES:=2 4}" "${DURATION:=4}"
  : "${SHAREGPT_MAX_INPUT:=256}" "${SHAREGPT_MAX_OUTPUT:=16}" "${FIXED_INPUT:=256}" "${FIXED_OUTPUT:=16}"
  : "${SINGLE_PROMPT:=256}" "${SINGLE_OUTPUT:=8}" "${REPEATS:=2}" "${COLOCATED_GPUS:=0 0}"
  : "${DECODE_KV_BLOCKS:=512}" "${PREFILL_KV_BLOCKS:=256}" "${TTFT_SLO_MS:=2000}" "${TPOT_SLO_MS:=500}"
fi
cluster_defaults
: "${PARTS:=tests bench cluster}" "${PREFILL_GPU:=0}" "${DECODE_GPU:=1}" "${COLOCATED_GPUS:=0 1}"
: "${BENCH_REPS:=3}" "${SHAREGPT_RATES:=8 16 32 64}" "${FIXED_RATES:=4 8 16 24}" "${DURATION:=12}"
: "${SHAREGPT_MAX_INPUT:=1024}" "${SHAREGPT_MAX_OUTPUT:=512}" "${FIXED_INPUT:=2048}" "${FIXED_OUTPUT:=256}"
: "${SATURATION:=0.5}" "${SINGLE_PROMPT:=4096}" "${SINGLE_OUTPUT:=32}" "${REPEATS:=5}"
: "${TTFT_SLO_MS:=500}" "${TPOT_SLO_MS:=50}" "${REQUEST_TIMEOUT:=30}"
: "${DECODE_KV_BLOCKS:=16384}" "${PREFILL_KV_BLOCKS:=4096}" "${DEADLINE:=540}"
has() { [[ " $PARTS " == *" $1 "* ]]; }
UNTIL=$(( T0 + DEADLINE ))  # the cluster part moves it to each layout's share
left() { echo $(( UNTIL - $(date +%s) )); }
at_most() { echo $(( $1 < $2 ? $1 : $2 )); }

declare -A PID READY_MS LAUNCHED_MS
# The tables, once: at the end, or from the exit trap when the script stops early.
report() {
  [ -z "${REPORTED:-}" ] || return 0
  REPORTED=1
  {
    echo "two-GPU check: $BACKEND backend, model $MODEL_PRESET, parts: $PARTS, $(( $(date +%s) - T0 )) s"
    if [ "$LOCAL" = 1 ]; then
      echo; echo "(a) transport tests and (b) KV transfer benchmark: skipped (--local: they need two GPUs)"
    fi
    if has tests; then
      echo; echo "(a) cuda_ipc and nccl transports, this process on GPU 0, the helper on GPU 1"
      $REPORT tests "$LOGS" "${TESTS[@]}"
    fi
    if has bench; then
      echo; echo "(b) kv_transfer_gpu_bench --reps $BENCH_REPS, GPU 0 -> GPU 1 (best of the reps)"
      $REPORT kv "$LOGS/kv_bench.log"
    fi
    if has cluster; then
      local transport=$TRANSPORT
      [ "$TRANSPORT" = ucx ] && transport="ucx ($KV_UCX_TRANSPORTS)"
      echo
      echo "(c) $MODEL_PRESET. 1P1D: prefill GPU $PREFILL_GPU, decode GPU $DECODE_GPU, transport $transport;" \
           "colocated: tandem-decode --role colocated on GPUs $COLOCATED_GPUS."
      echo "Poisson arrivals for $DURATION s per rate. sharegpt: ShareGPT-shaped lengths (prompt <=" \
           "$SHAREGPT_MAX_INPUT, completion <= $SHAREGPT_MAX_OUTPUT tokens); fixed: $FIXED_INPUT in, $FIXED_OUTPUT out."
      echo "goodput: requests within TTFT <= $TTFT_SLO_MS ms and TPOT <= $TPOT_SLO_MS ms per second of the run;" \
           "TTFT and TPOT client side. Single prompt: $SINGLE_PROMPT tokens, $SINGLE_OUTPUT out, x$REPEATS in turn."
      $REPORT sweep "$LOGS"
      $REPORT plot "$LOGS" "$OUT/two_gpu_goodput.svg"
    fi
  } > "$OUT/two_gpu_table.md" 2>&1
  cp "$OUT/two_gpu_table.md" "$LOGS/"
  cat "$OUT/two_gpu_table.md"
}
if [ "$LOCAL" = 0 ] && (( NGPU < 2 )); then
  die "needs two GPUs (device kind nvidia-h200-x2); this machine has $NGPU"
fi
cluster_traps two_gpu_logs.tar.gz report
[ "$LOCAL" = 1 ] && PARTS=${PARTS//tests/} PARTS=${PARTS//bench/}
has tests && CLUSTER_EXTRA_TARGETS="${TESTS[*]} kv_transfer_gpu_peer"
has bench && CLUSTER_EXTRA_TARGETS="${CLUSTER_EXTRA_TARGETS:-} kv_transfer_gpu_bench"
cluster_binaries

# ---- (a) the transport tests ----
if has tests; then
  for t in "${TESTS[@]}"; do
    if (( $(left) < 30 )); then
      echo "skipped: DEADLINE ($DEADLINE s) reached" > "$LOGS/$t.log"
      continue
    fi
    step "$t across GPU 0 and GPU 1"
    bin=$(find_bin "$t")
    [ -x "$bin" ] || { echo "skipped: no $t binary under $B" > "$LOGS/$t.log"; continue; }
    TANDEM_TEST_PEER_GPU=1 timeout "$(at_most "$(left)" 240)" "$bin" > "$LOGS/$t.log" 2>&1
    echo $? > "$LOGS/$t.rc"
  done
fi

# ---- (b) the KV transfer benchmark ----
if has bench; then
  bin=$(find_bin kv_transfer_gpu_bench)
  if [ ! -x "$bin" ]; then
    echo "no kv_transfer_gpu_bench binary under $B" > "$LOGS/kv_bench.log"
  elif (( $(left) < 60 )); then
    echo "skipped: DEADLINE ($DEADLINE s) reached" > "$LOGS/kv_bench.log"
  else
    step "kv_transfer_gpu_bench --reps $BENCH_REPS"
    timeout "$(at_most "$(left)" 240)" "$bin" --reps "$BENCH_REPS" > "$LOGS/kv_bench.log" 2>&1
    echo "kv_transfer_gpu_bench rc=$?" >> "$LOG"
  fi
fi

# ---- (c) the cluster, two layouts ----
# bench NAME LIMIT_S ARGS...: tandem-bench-serving against the router, the layout's nodes' /metrics
# diffed over the run; output in NAME.log.
bench() {
  local name=$1 limit=$2; shift 2
  if (( limit < 5 )); then
    echo "skipped: DEADLINE ($DEADLINE s) reached" > "$LOGS/$name.log"
    return
  fi
  timeout "$limit" "$BENCH" --port "$HTTP_PORT" --model $MODEL --vocab-size "$BENCH_VOCAB" \
    --goodput-ttft-ms "$TTFT_SLO_MS" --goodput-tpot-ms "$TPOT_SLO_MS" --timeout-s "$REQUEST_TIMEOUT" \
    "${METRICS[@]}" --json-line "$@" > "$LOGS/$name.log" 2>&1
  echo "bench $name rc=$?" >> "$LOG"
}

# sweep LAYOUT WORKLOAD SEED RATES [WHY]: one Poisson run per rate, lowest first; the same seeds, hence
# the same requests, for both layouts. With WHY, every rate is skipped, saying WHY.
sweep() {
  local layout=$1 workload=$2 seed=$3 rate name prompts stop="" args
  case $workload in
    sharegpt) args=(--dataset sharegpt-shaped --max-input-len "$SHAREGPT_MAX_INPUT"
                    --max-output-len "$SHAREGPT_MAX_OUTPUT") ;;
    fixed) args=(--input-len "$FIXED_INPUT" --output-len "$FIXED_OUTPUT") ;;
  esac
  [ -n "${5:-}" ] && stop=$5
  for rate in $4; do
    name=sweep_${layout}_${workload}_$rate
    seed=$(( seed + 1 ))
    if [ -n "$stop" ]; then
      echo "skipped: $stop" > "$LOGS/$name.log"
    elif (( $(left) < DURATION + 10 )); then
      echo "skipped: DEADLINE ($DEADLINE s) reached" > "$LOGS/$name.log"
      step "$layout $workload $rate req/s skipped (DEADLINE)"
    else
      step "$layout $workload: $rate req/s for $DURATION s"
      prompts=$(awk -v r="$rate" -v d="$DURATION" 'BEGIN { n = int(r * d + 0.5); print (n < 1 ? 1 : n) }')
      bench "$name" "$(at_most "$(left)" $(( DURATION + REQUEST_TIMEOUT + 10 )))" --seed "$seed" \
        --request-rate "$rate" --num-prompts "$prompts" "${args[@]}"
      $REPORT saturated "$LOGS/$name.log" "$SATURATION" \
        && stop="fewer than $SATURATION of the requests at $rate req/s met the SLO (or it has no summary)"
    fi
  done
}

# layout NAME: starts the router and the layout's nodes, warms up, runs the single prompts and both
# sweeps, stops them.
layout() {
  local nodes n ready="" gpus=($COLOCATED_GPUS) why="DEADLINE ($DEADLINE s) reached"
  if (( $(left) < 30 )); then
    step "layout $1 skipped (DEADLINE)"
    echo "skipped: $why" > "$LOGS/single_$1.log"
    sweep "$1" sharegpt 100 "$SHAREGPT_RATES" "$why"
    sweep "$1" fixed 200 "$FIXED_RATES" "$why"
    return
  fi
  step "layout $1: start"
  start_router disaggregated
  if [ "$1" = 1p1d ]; then
    nodes=(prefill decode)
    start_node prefill prefill "$PREFILL_GPU" "$PREFILL_KV_BLOCKS"
    start_node decode decode "$DECODE_GPU" "$DECODE_KV_BLOCKS"
  else
    nodes=(colocated0 colocated1)
    start_node colocated0 colocated "${gpus[0]}" "$DECODE_KV_BLOCKS"
    start_node colocated1 colocated "${gpus[1]}" "$DECODE_KV_BLOCKS"
  fi
  wait_ready "${nodes[@]}" router
  METRICS=()
  for n in "${nodes[@]}"; do METRICS+=(--metrics-url "$n=http://$(node_http "$n")/metrics"); done
  for n in "${nodes[@]}"; do ready+="${ready:+, }$n ${READY_MS[$n]} ms"; done
  step "layout $1: ready ($ready from launch to /health/ready)"
  bench "warmup_$1" "$(at_most "$(left)" 60)" --seed 9 --num-prompts 4 --concurrency 2 --input-len 256 --output-len 8
  step "layout $1: one $SINGLE_PROMPT-token prompt at a time, x$REPEATS"
  bench "single_$1" "$(at_most "$(left)" 60)" --seed 10 --num-prompts "$REPEATS" --concurrency 1 \
    --input-len "$SINGLE_PROMPT" --output-len "$SINGLE_OUTPUT"
  sweep "$1" sharegpt 100 "$SHAREGPT_RATES"
  sweep "$1" fixed 200 "$FIXED_RATES"
  step "layout $1: stop"
  for n in "${nodes[@]}" router; do kill_process "$n" TERM; done
}

if has cluster; then
  cluster_model
  END=$UNTIL
  UNTIL=$(( $(date +%s) + (END - $(date +%s)) / 2 ))
  layout 1p1d
  UNTIL=$END
  layout colocated
fi
step done
report
! grep -q '| FAIL |$' "$OUT/two_gpu_table.md"  # exit 1 when a transport test failed
