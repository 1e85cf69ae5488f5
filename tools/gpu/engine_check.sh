#!/usr/bin/env bash
# On the GPU machine: build the CUDA backend (Release, build-gpu) and run the chosen phases;
# logs under $OUT, a short table last. The build keeps between calls while the machine
# stays warm, so a second call with other phases only links what is new.
# Usage (repository root): tools/gpu/engine_check.sh PHASE...
# With TANDEM_GPU_PREBUILT=DIR (or a .tar.xz of one, tools/gpu/pack_prebuilt.sh) the binaries
# are taken from there (built elsewhere with nvcc and carried to the GPU machine) and nothing is
# built; every lib/ folder in it goes on LD_LIBRARY_PATH (binaries built on Debian 12 want its
# libyaml-cpp.so.0.7 and libspdlog.so.1.10 there).
#   tests      skinny GEMM, kernel (attention, small ops, sampling), runtime (incl. the
#              forward against transformers' logits) and engine GPU tests
#   disagg     the disaggregated nodes on CUDA with layer-streamed KV (local transport)
#   memcheck   compute-sanitizer memcheck on the skinny GEMM, the decode attention and the
#              runtime's graph / host-copy tests
#   model      bench/model/model_bench (Llama-3-8B shape: decode, prefill, KV swap)
#   skinny     bench/kernels/skinny_gemm_bench --no-sweep
#   attention  bench/kernels/decode_attention_bench and PyTorch SDPA in the same run
#   sampling   the sampling tests (token choice, penalties, logit_bias, logprobs against the host
#              reference; also under compute-sanitizer memcheck) and decode_attention_bench --sampling
#   all        every phase above
set -u
OUT=${OUT:-/tmp/tandem_gpu_out}
mkdir -p "$OUT"
PHASES=" $* "
[ "$PHASES" = "  " ] && PHASES=" tests "
[[ "$PHASES" == *" all "* ]] && PHASES=" tests disagg memcheck model skinny attention "
has() { [[ "$PHASES" == *" $1 "* ]]; }
B=build-gpu
T0=$(date +%s)
LOG="$OUT/engine_build.log"
source "$(dirname "$0")/lib.sh"
if [ -n "${TANDEM_GPU_PREBUILT:-}" ]; then use_prebuilt "$TANDEM_GPU_PREBUILT" || exit 1; fi

TARGETS=""
has tests && TARGETS="$TARGETS skinny_gemm_test kernels_test runtime_cuda_test runtime_cuda_kv_test engine_cuda_test"
has memcheck && TARGETS="$TARGETS skinny_gemm_test kernels_test runtime_cuda_test"
has model && TARGETS="$TARGETS model_bench"
has skinny && TARGETS="$TARGETS skinny_gemm_bench"
has attention && TARGETS="$TARGETS decode_attention_bench"
has sampling && TARGETS="$TARGETS runtime_cuda_test decode_attention_bench"
if [ -z "${TANDEM_GPU_PREBUILT:-}" ]; then
  step configure
  cmake -S . -B $B -G Ninja -DTANDEM_CUDA=ON -DCMAKE_BUILD_TYPE=Release >> "$LOG" 2>&1 \
    || { echo "configure failed"; tail -30 "$LOG"; exit 1; }
  step "build$TARGETS"
  if [ -n "$TARGETS" ]; then
    ninja -C $B -j16 $TARGETS >> "$LOG" 2>&1 || { echo "build failed"; grep -E "error" -A3 "$LOG" | head -60; exit 1; }
  fi
fi
if has disagg && [ -z "${TANDEM_GPU_PREBUILT:-}" ]; then
  ninja -C $B -j16 decode_node_disagg_test >> "$LOG" 2>&1 || echo "decode_node_disagg_test did not build" | tee -a "$LOG"
fi
export TANDEM_SOURCE_DIR=$PWD
: > "$OUT/summary.txt"
run() {  # name, timeout, command...
  local name=$1 t=$2; shift 2
  step "$name"
  timeout "$t" "$@" > "$OUT/$name.log" 2>&1
  echo "$name rc=$? $(grep -E '^\[  PASSED|^\[  FAILED  \] [0-9]+ test|SKIPPED \]|ERROR SUMMARY' "$OUT/$name.log" | tr '\n' ' ')" >> "$OUT/summary.txt"
}
if has tests; then
  run skinny_gemm_test 90 "$(find_bin skinny_gemm_test)"
  # The sampler distribution tests draw 100k samples per case: the kernel tests without them.
  run kernels_test 150 "$(find_bin kernels_test)" --gtest_filter='-Filters/SamplingTest.MatchesFilteredDistribution/*'
  run runtime_cuda_test 150 "$(find_bin runtime_cuda_test)"
  run runtime_cuda_kv_test 60 "$(find_bin runtime_cuda_kv_test)"
  run engine_cuda_test 120 "$(find_bin engine_cuda_test)"
fi
if has disagg; then
  DT=$(find_bin decode_node_disagg_test)
  [ -n "$DT" ] && run disagg_cuda 120 "$DT" --gtest_filter='DisaggCudaTest.*:DisaggStreamTest.*'
fi
if has memcheck; then
  MC="compute-sanitizer --tool memcheck --error-exitcode 9"
  run memcheck_skinny 150 $MC "$(find_bin skinny_gemm_test)"
  run memcheck_kernels 150 $MC "$(find_bin kernels_test)" \
    --gtest_filter='*DecodeAttention*:*FusedRope*:*RmsNorm*:*Embedding*:*Silu*:-Cases/DecodeAttentionTest.MatchesCpuReference/11'
  run memcheck_runtime 150 $MC "$(find_bin runtime_cuda_test)" \
    --gtest_filter='CudaHostCopyQueueTest.*:*Sampling*:CudaGraphTest.*:*PrefillAndDecode*/0'
fi
if has sampling; then
  run sampling_test 150 "$(find_bin runtime_cuda_test)" --gtest_filter='CudaSamplingTest.*:*CudaSamplingGreedyTest.*'
  run memcheck_sampling 150 compute-sanitizer --tool memcheck --error-exitcode 9 "$(find_bin runtime_cuda_test)" \
    --gtest_filter='CudaSamplingTest.*:*CudaSamplingGreedyTest.*'
  step sampling-bench
  timeout 120 "$(find_bin decode_attention_bench)" --sampling > "$OUT/sampling_bench.log" 2>&1
  echo "sampling_bench rc=$?" >> "$OUT/summary.txt"
fi
if has skinny; then
  step skinny-bench
  timeout 150 "$(find_bin skinny_gemm_bench)" --no-sweep > "$OUT/skinny_bench.log" 2>&1; echo "skinny_bench rc=$?" >> "$OUT/summary.txt"
fi
if has model; then
  step model-bench
  timeout 240 "$(find_bin model_bench)" > "$OUT/model_bench.log" 2>&1; echo "model_bench rc=$?" >> "$OUT/summary.txt"
fi
if has attention; then
  step attention-bench
  timeout 150 "$(find_bin decode_attention_bench)" --csv "$OUT/decode.csv" > "$OUT/attention_bench.log" 2>&1
  echo "attention_bench rc=$?" >> "$OUT/summary.txt"
  step sdpa
  PYTHONUNBUFFERED=1 timeout 150 python3 bench/kernels/sdpa_compare.py "$OUT/decode.csv" > "$OUT/sdpa.log" 2>&1
  echo "sdpa rc=$?" >> "$OUT/summary.txt"
fi
step done
echo "---- failures ----"
grep -hE "^\[  FAILED|Failure|Expected|Which is|ERROR SUMMARY: [1-9]|Invalid" "$OUT"/*.log | head -40
if has tests; then
  echo "---- accuracy ----"
  grep -hE "top-1|epilogue|relative error" "$OUT/runtime_cuda_test.log" "$OUT/skinny_gemm_test.log" | head -24
fi
has sampling && { echo "---- sampling bench ----"; tail -8 "$OUT/sampling_bench.log"; }
has skinny && { echo "---- skinny gemm bench ----"; tail -16 "$OUT/skinny_bench.log"; }
has model && { echo "---- model bench ----"; tail -32 "$OUT/model_bench.log"; }
has attention && { echo "---- attention bench ----"; tail -24 "$OUT/attention_bench.log"; echo "---- sdpa ----"; tail -16 "$OUT/sdpa.log"; }
echo "---- summary ----"
cat "$OUT/summary.txt"
