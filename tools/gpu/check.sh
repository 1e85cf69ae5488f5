#!/usr/bin/env bash
# On the GPU machine: build the CUDA kernels, run their tests, compute-sanitizer memcheck,
# the decode-attention benchmark and the PyTorch SDPA comparison; logs under $OUT; a short
# table last.   Usage (repository root): tools/gpu/check.sh [--quick]
set -u
OUT=${OUT:-/tmp/tandem_gpu_out}
mkdir -p "$OUT"
QUICK=${1:-}
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
