#!/usr/bin/env bash
# Issue 21 in one GPU call: builds the cluster binaries, the KV transfer benchmark and the cuda_ipc
# transport test, runs the test, the burst benchmark (kv_transfer_gpu_bench), then the cluster check
# (tools/gpu/cluster_check.sh) on the scenarios named, time-slicing the GPU and, with MPS=both, again
# with the two nodes sharing it through MPS. Logs under $OUT/{bench,plain,mps}; tables last.
# Environment: SCENARIOS="long poisson" DURATION=20 MPS=both (plain | both) REPS=5, and anything
# cluster_check.sh reads.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/tandem_gpu_out}
T0=$(date +%s)
mkdir -p "$OUT/bench"
export SCENARIOS=${SCENARIOS:-long poisson} DURATION=${DURATION:-20}
B=build-gpu
OUT=$OUT/plain CLUSTER_EXTRA_TARGETS="kv_transfer_gpu_bench kv_transfer_cuda_ipc_test" DEADLINE=${DEADLINE:-330} \
  tools/gpu/cluster_check.sh > "$OUT/plain.txt" 2>&1
echo "== cluster check (time-slicing) done ($(( $(date +%s) - T0 )) s)"
if [ -x $B/tests/kv_transfer/kv_transfer_cuda_ipc_test ]; then
  timeout 120 $B/tests/kv_transfer/kv_transfer_cuda_ipc_test > "$OUT/bench/cuda_ipc_test.log" 2>&1
  echo "== kv_transfer_cuda_ipc_test rc=$? ($(( $(date +%s) - T0 )) s): $(grep -E '^\[  (PASSED|FAILED)' "$OUT/bench/cuda_ipc_test.log" | tr '\n' ' ')"
fi
if [ -x $B/bench/kv_transfer/kv_transfer_gpu_bench ]; then
  timeout 150 $B/bench/kv_transfer/kv_transfer_gpu_bench --reps "${REPS:-5}" > "$OUT/bench/kv_bench.log" 2>&1
  echo "== kv_transfer_gpu_bench rc=$? ($(( $(date +%s) - T0 )) s)"
fi
if [ "${MPS:-both}" = both ]; then
  OUT=$OUT/mps MPS=1 DEADLINE=$(( 560 - ($(date +%s) - T0) )) tools/gpu/cluster_check.sh > "$OUT/mps.txt" 2>&1
  echo "== cluster check (MPS) done ($(( $(date +%s) - T0 )) s)"
fi
echo; tail -n 40 "$OUT/bench/kv_bench.log" 2>/dev/null
for m in plain mps; do [ -f "$OUT/$m/cluster_table.md" ] && { echo; cat "$OUT/$m/cluster_table.md"; }; done
for m in plain mps; do [ -f "$OUT/$m.txt" ] && ! [ -f "$OUT/$m/cluster_table.md" ] && { echo "---- $m"; tail -n 30 "$OUT/$m.txt"; }; done
true
