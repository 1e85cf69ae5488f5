#!/usr/bin/env bash
# On the GPU machine: build the engine on the CUDA backend and run the GPU tests
# (kernels, runtime, engine), then single-process generation on the tiny model
# with --backend cuda. Logs under $OUT; a short table last.
# Usage (repository root): tools/gpu/engine_check.sh
set -u
OUT=${OUT:-/tmp/tandem_gpu_out}
mkdir -p "$OUT"
B=build-gpu
T0=$(date +%s)
step() { echo "== $1 ($(( $(date +%s) - T0 )) s)" | tee -a "$OUT/engine_build.log"; }
step configure
cmake -S . -B $B -G Ninja -DTANDEM_CUDA=ON -DCMAKE_BUILD_TYPE=Release >> "$OUT/engine_build.log" 2>&1 \
  || { echo "configure failed"; tail -30 "$OUT/engine_build.log"; exit 1; }
step build
ninja -C $B -j16 engine_cuda_test engine_test runtime_cuda_test kernels_test tandem-make-model tandem_engine \
  >> "$OUT/engine_build.log" 2>&1 || { echo "build failed"; grep -E "error" -A3 "$OUT/engine_build.log" | head -60; exit 1; }
export TANDEM_SOURCE_DIR=$PWD
run() {  # name, timeout, command...
  local name=$1 t=$2; shift 2
  step "$name"
  timeout "$t" "$@" > "$OUT/$name.log" 2>&1
  echo "$name rc=$? $(grep -E '^\[  PASSED|^\[  FAILED  \] [0-9]+ test|SKIPPED' "$OUT/$name.log" | tr '\n' ' ')" >> "$OUT/summary.txt"
}
run engine_cuda_test 120 $B/tests/common/engine/engine_cuda_test
run engine_test 120 $B/tests/common/engine/engine_test
run runtime_cuda_test 150 "$(find $B -name runtime_cuda_test -type f | head -1)"
run kernels_test 150 "$(find $B -name kernels_test -type f | head -1)"
run engine_cuda_memcheck 150 compute-sanitizer --tool memcheck --error-exitcode 9 $B/tests/common/engine/engine_cuda_test
step done
echo "---- failures ----"
grep -hE "^\[  FAILED|Failure|Expected|Which is|ERROR SUMMARY" "$OUT"/*.log | head -40
echo "---- summary ----"
cat "$OUT/summary.txt"
