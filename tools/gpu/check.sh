#!/usr/bin/env bash
# On the GPU machine: build the CUDA kernels, run their tests, compute-sanitizer memcheck,
# the decode-attention benchmark and the PyTorch SDPA comparison; logs under $OUT; a short
# table last.   Usage (repository root): tools/gpu/check.sh [--quick] [--runtime]
# --runtime: the CUDA backend instead: build runtime_cuda_test + model_bench (+ kernels_test),
# run the runtime GPU tests, the rope/GEMM/small-op kernel tests, compute-sanitizer memcheck
# on the runtime tests, and the Llama-3-8B-shape model benchmark.
set -u
OUT=${OUT:-/tmp/tandem_gpu_out}
mkdir -p "$OUT"
QUICK=""
RUNTIME=0
for a in "$@"; do
  case "$a" in
    --quick) QUICK=--quick ;;
    --runtime) RUNTIME=1 ;;
  esac
done
B=build-gpu
T0=$(date +%s)
nvidia-smi -L > "$OUT/build.log" 2>&1
step() { echo "== $1 ($(( $(date +%s) - T0 )) s)" | tee -a "$OUT/build.log"; }

step configure
if ! cmake -S . -B $B -G Ninja -DTANDEM_CUDA=ON -DCMAKE_BUILD_TYPE=Release \
     -DTANDEM_CUDA_PTXAS_VERBOSE=ON >> "$OUT/build.log" 2>&1; then
  echo "full tree did not configure; using tools/gpu/standalone" | tee -a "$OUT/build.log"
  B=build-gpu-sa
  cmake -S tools/gpu/standalone -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DTANDEM_CUDA_PTXAS_VERBOSE=ON >> "$OUT/build.log" 2>&1 || { echo "configure failed"; tail -30 "$OUT/build.log"; exit 1; }
fi
if [ "$RUNTIME" = 1 ]; then
  step build
  ninja -C $B -j16 runtime_cuda_test runtime_cuda_kv_test model_bench kernels_test >> "$OUT/build.log" 2>&1 \
    || { echo "build failed"; grep -E "error" -A3 "$OUT/build.log" | head -60; exit 1; }
  RT=$(find $B -name runtime_cuda_test -type f | head -1)
  RKV=$(find $B -name runtime_cuda_kv_test -type f | head -1)
  KT=$(find $B -name kernels_test -type f | head -1)
  MB=$(find $B -name model_bench -type f | head -1)
  export TANDEM_SOURCE_DIR=$PWD
  step runtime-tests
  timeout 150 "$RT" > "$OUT/runtime_tests.log" 2>&1; RT_RC=$?
  timeout 60 "$RKV" > "$OUT/runtime_kv_tests.log" 2>&1; RKV_RC=$?
  step kernel-tests
  timeout 60 "$KT" --gtest_filter='*Rope*:*Gemm*:*RmsNorm*:*Silu*:*Embedding*' > "$OUT/kernel_tests.log" 2>&1; KT_RC=$?
  step hf-bf16
  PYTHONUNBUFFERED=1 timeout 90 python3 tools/gpu/hf_bf16_error.py > "$OUT/hf_bf16.log" 2>&1; HF_RC=$?
  step model-bench
  timeout 150 "$MB" $QUICK > "$OUT/model_bench.log" 2>&1; MB_RC=$?
  step memcheck
  timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 "$RT" \
    --gtest_filter='*PrefillAndDecode*/0:*ForwardMatchesCpuBackend/2:CudaGraphTest.*:CudaBackendTest.*' \
    > "$OUT/runtime_memcheck.log" 2>&1; MC_RC=$?
  timeout 40 compute-sanitizer --tool memcheck --error-exitcode 9 "$RKV" >> "$OUT/runtime_memcheck.log" 2>&1 \
    || MC_RC=$((MC_RC + 100))
  step done
  echo "---- failures (if any) ----"
  grep -E "^\[  FAILED|Failure|error|Error|Expected|Which is|actual" "$OUT/runtime_tests.log" | head -40
  grep -E "^\[  FAILED|Failure" "$OUT/kernel_tests.log" "$OUT/runtime_kv_tests.log" | head -10
  grep -E "ERROR SUMMARY|Invalid|Program hit|FAILED" "$OUT/runtime_memcheck.log" | head -10
  echo "---- runtime test output ----"
  grep -E "rows|greedy|graph steps|mixed|fast path|baseline" "$OUT/runtime_tests.log" | head -40
  echo "---- hf bf16 vs golden ----"
  grep -E "^hf|Error" "$OUT/hf_bf16.log" | tail -12
  echo "---- model bench ----"
  tail -45 "$OUT/model_bench.log"
  echo "---- summary ----"
  printf "%-14s %s\n" runtime-tests "rc=$RT_RC $(grep -E '^\[  PASSED|^\[  FAILED  \] [0-9]+ test|SKIPPED' "$OUT/runtime_tests.log" | tr '\n' ' ')"
  printf "%-14s %s\n" kv-tier-tests "rc=$RKV_RC $(grep -E '^\[  PASSED|^\[  FAILED  \] [0-9]+ test' "$OUT/runtime_kv_tests.log" | tr '\n' ' ')"
  printf "%-14s %s\n" kernel-tests "rc=$KT_RC $(grep -E '^\[  PASSED|^\[  FAILED  \] [0-9]+ test' "$OUT/kernel_tests.log" | tr '\n' ' ')"
  printf "%-14s %s\n" memcheck "rc=$MC_RC $(grep 'ERROR SUMMARY' "$OUT/runtime_memcheck.log" | tr '\n' ' ')"
  printf "%-14s %s\n" model-bench "rc=$MB_RC"
  printf "%-14s %s\n" hf-bf16 "rc=$HF_RC"
  exit 0
fi

step build
ninja -C $B -j16 kernels_test decode_attention_bench >> "$OUT/build.log" 2>&1 \
  || { echo "build failed"; grep -E "error" -A3 "$OUT/build.log" | head -60; exit 1; }
TEST=$(find $B -name kernels_test -type f | head -1)
BENCH=$(find $B -name decode_attention_bench -type f | head -1)

step tests
timeout 300 "$TEST" > "$OUT/tests.log" 2>&1; TEST_RC=$?

step memcheck
# The sampler distribution tests launch 40k blocks each; memcheck skips them (the large-vocab
# sampler test still runs under it); CudaRaiiTest asks for 2^50 bytes on purpose.
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 "$TEST" \
  --gtest_filter='-CudaRaiiTest.*:Filters/SamplingTest.MatchesFilteredDistribution/*:Cases/DecodeAttentionTest.MatchesCpuReference/11' \
  > "$OUT/memcheck.log" 2>&1; MC_RC=$?

step bench
timeout 300 "$BENCH" --csv "$OUT/decode.csv" $QUICK > "$OUT/bench.log" 2>&1; BENCH_RC=$?

step sdpa
PYTHONUNBUFFERED=1 timeout 200 python3 bench/kernels/sdpa_compare.py "$OUT/decode.csv" \
  > "$OUT/sdpa.log" 2>&1; SDPA_RC=$?
step done

echo
echo "---- failures (if any) ----"
grep -E "^\[  FAILED|Failure|error:|out of tolerance" "$OUT/tests.log" | head -30
grep -E "ERROR SUMMARY|Invalid|Program hit" "$OUT/memcheck.log" | head -10
echo "---- bench ----"
cat "$OUT/bench.log"
echo "---- sdpa ----"
cat "$OUT/sdpa.log"
echo "---- summary ----"
printf "%-10s %s\n" tests "rc=$TEST_RC $(grep -E '^\[  PASSED|^\[  FAILED  \] [0-9]+ test' "$OUT/tests.log" | tr '\n' ' ')"
printf "%-10s %s\n" memcheck "rc=$MC_RC $(grep 'ERROR SUMMARY' "$OUT/memcheck.log" | tail -1)"
printf "%-10s %s\n" bench "rc=$BENCH_RC"
printf "%-10s %s\n" sdpa "rc=$SDPA_RC"
