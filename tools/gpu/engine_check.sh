#!/usr/bin/env bash
# On the GPU machine: build the engine on the CUDA backend and run the GPU tests
# (skinny GEMM kernel, runtime incl. the host copy queue, engine, the disaggregated
# nodes on CUDA with layer-streamed KV over the local transport), compute-sanitizer
# memcheck on the new pieces; with --bench also the skinny-GEMM and whole-model
# benchmarks. Logs under $OUT; a short table last.
# Usage (repository root): tools/gpu/engine_check.sh [--bench] [--kernels]
#   --kernels: also the full kernels_test.
set -u
OUT=${OUT:-/tmp/tandem_gpu_out}
mkdir -p "$OUT"
BENCH=0
KERNELS=0
for a in "$@"; do
  case "$a" in
    --bench) BENCH=1 ;;
    --kernels) KERNELS=1 ;;
  esac
done
B=build-gpu
T0=$(date +%s)
LOG="$OUT/engine_build.log"
step() { echo "== $1 ($(( $(date +%s) - T0 )) s)" | tee -a "$LOG"; }
step configure
cmake -S . -B $B -G Ninja -DTANDEM_CUDA=ON -DCMAKE_BUILD_TYPE=Release >> "$LOG" 2>&1 \
  || { echo "configure failed"; tail -30 "$LOG"; exit 1; }
step build
ninja -C $B -j16 engine_cuda_test runtime_cuda_test skinny_gemm_test kernels_test skinny_gemm_bench model_bench \
  >> "$LOG" 2>&1 || { echo "build failed"; grep -E "error" -A3 "$LOG" | head -60; exit 1; }
ninja -C $B -j16 decode_node_disagg_test >> "$LOG" 2>&1 || echo "decode_node_disagg_test did not build" | tee -a "$LOG"
export TANDEM_SOURCE_DIR=$PWD
: > "$OUT/summary.txt"
find_bin() { find $B -name "$1" -type f | head -1; }
run() {  # name, timeout, command...
  local name=$1 t=$2; shift 2
  step "$name"
  timeout "$t" "$@" > "$OUT/$name.log" 2>&1
  echo "$name rc=$? $(grep -E '^\[  PASSED|^\[  FAILED  \] [0-9]+ test|SKIPPED \]|ERROR SUMMARY' "$OUT/$name.log" | tr '\n' ' ')" >> "$OUT/summary.txt"
}
run skinny_gemm_test 90 "$(find_bin skinny_gemm_test)"
run runtime_cuda_test 150 "$(find_bin runtime_cuda_test)"
run engine_cuda_test 120 "$(find_bin engine_cuda_test)"
DT=$(find_bin decode_node_disagg_test)
[ -n "$DT" ] && run disagg_cuda 120 "$DT" --gtest_filter='DisaggCudaTest.*:DisaggStreamTest.*'
[ "$KERNELS" = 1 ] && run kernels_test 150 "$(find_bin kernels_test)"
run memcheck_skinny 150 compute-sanitizer --tool memcheck --error-exitcode 9 "$(find_bin skinny_gemm_test)"
run memcheck_copyq 120 compute-sanitizer --tool memcheck --error-exitcode 9 "$(find_bin runtime_cuda_test)" \
  --gtest_filter='CudaHostCopyQueueTest.*:*Sampling*'
if [ "$BENCH" = 1 ]; then
  step skinny-bench
  timeout 150 "$(find_bin skinny_gemm_bench)" > "$OUT/skinny_bench.log" 2>&1; echo "skinny_bench rc=$?" >> "$OUT/summary.txt"
  step model-bench
  timeout 200 "$(find_bin model_bench)" > "$OUT/model_bench.log" 2>&1; echo "model_bench rc=$?" >> "$OUT/summary.txt"
fi
step done
echo "---- failures ----"
grep -hE "^\[  FAILED|Failure|Expected|Which is|ERROR SUMMARY: [1-9]|Invalid" "$OUT"/*.log | head -40
if [ "$BENCH" = 1 ]; then
  echo "---- skinny gemm bench ----"
  tail -32 "$OUT/skinny_bench.log"
  echo "---- model bench ----"
  tail -30 "$OUT/model_bench.log"
fi
echo "---- summary ----"
cat "$OUT/summary.txt"
