#!/usr/bin/env bash
# The router under decode pressure, on this machine's CPU (tiny model): router + one prefill + one
# decode node whose batch holds 4 sequences (scheduler.max_num_seqs), so most Reserves are refused
# for room and wait in the router; tandem-bench-serving drives it. Compares router binaries side
# by side on the same nodes' build (e.g. a worktree's build of an older commit).
# Usage: tools/pressure_check.sh [ROUTER_BIN ...]   (default: build/router/tandem-router)
# Environment: REPEATS=2, SCENARIOS="burst poisson", OUT=/tmp/pressure-check, TANDEM_BUILD_DIR=build.
#   burst:   64 requests at once, 64-token prompts, 512 output tokens
#   poisson: 120 requests at 20 req/s (about 1.4x what the decode batch serves), same lengths
# Prints one line per run: client TTFT mean / p50 / p99, E2E p99 and the run's duration.
set -u
cd "$(dirname "$0")/.."
B=${TANDEM_BUILD_DIR:-build}
OUT=${OUT:-/tmp/pressure-check}
REPEATS=${REPEATS:-2}
SCENARIOS=${SCENARIOS:-burst poisson}
routers=("$@")
[ ${#routers[@]} -gt 0 ] || routers=("$B/router/tandem-router")
MODEL=$B/models/tiny
[ -f "$MODEL/config.json" ] || "$B/tools/make_model/tandem-make-model" --preset tiny -o "$MODEL" >/dev/null
TOKEN=pressure-check-token-$(date +%s%N)
PORT=8100
pids=()
stop() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; pids=(); }
trap stop EXIT

run() {  # run ROUTER DIR BENCH_FLAGS...
  local router=$1 dir=$2
  shift 2
  mkdir -p "$dir"
  "$router" --model-dir "$MODEL" --served-model-name tiny --listen-port $PORT --control-address 127.0.0.1:7100 \
    --cluster-token "$TOKEN" >"$dir/router.log" 2>&1 &
  pids+=($!)
  "$B/decode_node/tandem-decode" --config deploy/decode.yaml --model-dir "$MODEL" --model-name tiny --backend cpu \
    --cluster-token "$TOKEN" --router-address 127.0.0.1:7100 --listen-address 127.0.0.1:7301 \
    --http-address 127.0.0.1:9301 --scheduler-max-num-seqs 4 >"$dir/decode.log" 2>&1 &
  pids+=($!)
  "$B/prefill_node/tandem-prefill" --config deploy/prefill.yaml --model-dir "$MODEL" --model-name tiny --backend cpu \
    --cluster-token "$TOKEN" --router-address 127.0.0.1:7100 --listen-address 127.0.0.1:7201 \
    --http-address 127.0.0.1:9201 >"$dir/prefill.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 100); do curl -sf http://127.0.0.1:$PORT/health/ready >/dev/null 2>&1 && break; sleep 0.2; done
  sleep 1.5  # the prefill node's registration
  "$B/tools/bench_serving/tandem-bench-serving" --port $PORT --model tiny --vocab-size 256 --input-len 64 \
    --output-len 512 --max-output-len 512 "$@" >"$dir/bench.txt" 2>&1
  stop
}

printf '%-8s %-3s %-40s %s\n' scenario rep router "TTFT mean / p50 / p99 (ms) | E2E p99 (ms) | duration (s) | failed"
for s in $SCENARIOS; do
  case $s in
    burst) flags=(--num-prompts 64 --request-rate 0 --concurrency 64) ;;
    poisson) flags=(--num-prompts 120 --request-rate 20) ;;
    *) echo "unknown scenario $s"; exit 2 ;;
  esac
  for i in $(seq 1 "$REPEATS"); do
    for r in "${routers[@]}"; do
      dir=$OUT/$s-$i-$(echo "$r" | tr '/' '_')
      run "$r" "$dir" "${flags[@]}" --seed "$i"
      awk -v s="$s" -v i="$i" -v r="$r" -F'|' '
        /TTFT mean/ { split($3, a, /[;\/]/); ttft = a[1] " /" a[2] " /" a[4] }
        /E2E mean/ { split($3, e, /[;\/]/); e2e = e[4] }
        /duration/ { d = $3 }
        /completed \/ failed/ { split($3, c, "/"); failed = c[2] }
        END { gsub(/ +/, " ", ttft); printf "%-8s %-3s %-40s %s | %s | %s | %s\n", s, i, r, ttft, e2e, d, failed }' "$dir/bench.txt"
    done
  done
done
