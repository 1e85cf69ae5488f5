#!/usr/bin/env bash
# The planner's profile of one GPU node (issue 24), in one call: takes or builds the binaries (as
# cluster_check.sh does), writes the Llama-3-8B-shaped model, and runs tandem-profile on the CUDA
# backend with the cluster's engine settings. Writes $OUT/profile_<gpu>_<preset>.json and the log
# $OUT/profile_logs.tar.gz; prints the profile's tables last.
#
# Usage (repository root): tools/gpu/profile_check.sh
# Environment (defaults in parentheses):
#   TANDEM_GPU_PREBUILT, MODEL_PRESET (llama3-8b), MODEL_DIR, MAX_BATCHED_TOKENS (8192),
#   PREFILL_CHUNK (4096), BLOCK_SIZE (16): as in cluster_check.sh
#   KV_CACHE_BYTES (40000000000)      the device KV pool profiled
#   PROFILE_ARGS                      more tandem-profile flags (the grid: tandem-profile --help)
#   PROFILE_TIMEOUT (360)             seconds the profiler may run
set -u
cd "$(dirname "$0")/../.."
LOCAL=0
SCRIPT=profile_check
OUT=${OUT:-/tmp/tandem_gpu_out}
mkdir -p "$OUT"
WORK=${CLUSTER_WORK:-/tmp/tandem_cluster}
LOGS=$WORK/profile_logs
rm -rf "$LOGS" && mkdir -p "$LOGS"
T0=$(date +%s)
LOG=$LOGS/steps.log
source tools/gpu/lib.sh
cluster_defaults
: "${KV_CACHE_BYTES:=40000000000}" "${PROFILE_ARGS:=}" "${PROFILE_TIMEOUT:=360}"
declare -A PID
cluster_traps profile_logs.tar.gz
CLUSTER_EXTRA_TARGETS="tandem-profile ${CLUSTER_EXTRA_TARGETS:-}" cluster_binaries
PROFILE=$(find_bin tandem-profile)
[ -n "$PROFILE" ] || die "tandem-profile did not build (build.log)"
cluster_model

GPU_NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader -i 0 | awk '{print tolower($2)}')
RESULT="$OUT/profile_${GPU_NAME:-gpu}_$MODEL_PRESET.json"
step "tandem-profile on GPU 0 ($GPU_NAME), KV pool $KV_CACHE_BYTES bytes"
# shellcheck disable=SC2086  # PROFILE_ARGS is a list of flags
timeout "$PROFILE_TIMEOUT" "$PROFILE" --model-dir "$MODEL_DIR" --model-name "$MODEL_PRESET" --backend cuda --device 0 \
  --kv-cache-bytes "$KV_CACHE_BYTES" --kv-block-size "$BLOCK_SIZE" \
  --scheduler-max-num-batched-tokens "$MAX_BATCHED_TOKENS" --scheduler-max-prefill-chunk-tokens "$PREFILL_CHUNK" \
  --ucx-transports "$KV_UCX_TRANSPORTS" --output "$RESULT" $PROFILE_ARGS > "$LOGS/profile.log" 2>&1
rc=$?
step "tandem-profile rc=$rc"
cp "$LOGS/profile.log" "$OUT/"
cat "$LOGS/profile.log"
exit $rc
