#!/usr/bin/env bash
# The README's main job: installs what is needed, builds, writes the built-in tiny model
# (random weights, byte-level tokenizer), starts a local cluster — tandem-router +
# tandem-prefill + tandem-decode as three processes, KV moved over UCX (tcp) — streams a
# chat completion through the router, runs a short serving benchmark, and stops.
#   tools/demo.sh            # CPU backend
#   tools/demo.sh --cuda     # CUDA backend for both nodes (needs a CUDA build and a GPU)
#   tools/demo.sh --serve    # keep the cluster running (Ctrl-C stops it)
set -euo pipefail
cd "$(dirname "$0")/.."
BACKEND=cpu
SERVE=0
for a in "$@"; do
  case "$a" in
    --cuda) BACKEND=cuda ;;
    --serve) SERVE=1 ;;
    *) echo "usage: tools/demo.sh [--cuda] [--serve]"; exit 2 ;;
  esac
done
tools/setup.sh
B=${TANDEM_BUILD_DIR:-build}
MODEL=$B/models/tiny
[ -f "$MODEL/config.json" ] || "$B/tools/make_model/tandem-make-model" --preset tiny -o "$MODEL" >/dev/null
LOGS=$B/demo-logs
mkdir -p "$LOGS"
TOKEN=${TANDEM_CLUSTER_TOKEN:-demo-cluster-token-$(date +%s%N)}
HTTP_PORT=${TANDEM_HTTP_PORT:-8000}

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT INT TERM

"$B/router/tandem-router" --model-dir "$MODEL" --served-model-name tiny --listen-port "$HTTP_PORT" \
  --control-address 127.0.0.1:7000 --cluster-token "$TOKEN" >"$LOGS/router.log" 2>&1 &
pids+=($!)
for role in decode prefill; do
  "$B/${role}_node/tandem-$role" --config "deploy/$role.yaml" --model-dir "$MODEL" --model-name tiny \
    --backend "$BACKEND" --cluster-token "$TOKEN" >"$LOGS/$role.log" 2>&1 &
  pids+=($!)
done

echo "waiting for the router to see a decode and a prefill node ..."
for _ in $(seq 1 100); do
  curl -sf "http://127.0.0.1:$HTTP_PORT/health/ready" >/dev/null 2>&1 && break
  sleep 0.2
done
curl -sf "http://127.0.0.1:$HTTP_PORT/health/ready" >/dev/null || { echo "cluster did not become ready; logs in $LOGS"; tail -5 "$LOGS"/*.log; exit 1; }
sleep 1  # let the prefill node's registration land too

echo "--- streaming a chat completion (random weights: the text is noise, the plumbing is real) ---"
curl -sN "http://127.0.0.1:$HTTP_PORT/v1/chat/completions" -H 'Content-Type: application/json' -d '{
  "model": "tiny", "stream": true, "max_tokens": 48, "temperature": 0,
  "stream_options": {"include_usage": true},
  "messages": [{"role": "user", "content": "Write a haiku about disaggregated serving."}]}' |
  python3 -c '
import json, sys
for line in sys.stdin:
    line = line.strip()
    if not line.startswith("data: ") or line == "data: [DONE]":
        continue
    chunk = json.loads(line[6:])
    for c in chunk.get("choices", []):
        sys.stdout.write(c.get("delta", {}).get("content") or "")
        sys.stdout.flush()
    if chunk.get("usage"):
        print("\nusage:", json.dumps(chunk["usage"]))
'
echo "--- serving benchmark: 40 requests, Poisson 10 req/s ---"
"$B/tools/bench_serving/tandem-bench-serving" --port "$HTTP_PORT" --model tiny --num-prompts 40 \
  --request-rate 10 --input-len 64 --output-len 32 --vocab-size 256 --goodput-ttft-ms 500 --goodput-tpot-ms 100
if [ "$SERVE" = 1 ]; then
  echo "serving on http://127.0.0.1:$HTTP_PORT (logs in $LOGS); Ctrl-C stops"
  wait
fi
