#!/usr/bin/env bash
# Run HERE (the development machine): builds Release with CUDA (build-release, ccache), strips the
# cluster's binaries (router, both nodes, make-model, bench client, profiler) and the GPU tests and
# benches, puts the shared libraries they load next to them (all but the C/C++ runtime and the CUDA/driver
# libraries the GPU image has: UCX with its ucx/ modules, utf8proc, spdlog, fmt, yaml-cpp, numa,
# protobuf, ...), and packs build-carry/cluster.tar.xz (git-ignored). On the GPU machine:
#   TANDEM_GPU_PREBUILT=build-carry/cluster.tar.xz tools/gpu/cluster_check.sh   (or engine_check.sh,
#   two_gpu_check.sh)
# Usage: tools/gpu/pack_prebuilt.sh [--cluster-only | --two-gpu]
# PACK_TARGETS="t1 t2" packs only those targets; PACK_BUILD_DIR / PACK_BUILD_TYPE (Release) pick the
# build folder and its type (an existing RelWithDebInfo build folder is reused as it is).
#   --cluster-only  without the GPU tests/benches
#   --two-gpu       the cluster's binaries and two_gpu_check.sh's: the cuda_ipc and nccl transport tests
#                   with their helper process, kv_transfer_gpu_bench
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${PACK_BUILD_DIR:-build-release}
PACKED=${PACK_OUT:-build-carry/cluster.tar.xz}
TARGETS=(tandem-router tandem-prefill tandem-decode tandem-make-model tandem-bench-serving tandem-profile)
TWO_GPU_TARGETS=(kv_transfer_cuda_ipc_test kv_transfer_nccl_test kv_transfer_gpu_peer kv_transfer_gpu_bench)
GPU_TARGETS=(skinny_gemm_test kernels_test runtime_cuda_test runtime_cuda_kv_test engine_cuda_test
             decode_node_disagg_test model_bench skinny_gemm_bench decode_attention_bench "${TWO_GPU_TARGETS[@]}")
case "${1:-}" in
  --cluster-only) ;;
  --two-gpu) TARGETS+=("${TWO_GPU_TARGETS[@]}") ;;
  *) TARGETS+=("${GPU_TARGETS[@]}") ;;
esac
if [ -n "${PACK_TARGETS:-}" ]; then read -r -a TARGETS <<< "$PACK_TARGETS"; fi
# Present on the GPU image (Ubuntu 24.04 + CUDA 13): never carried.
IMAGE_HAS='^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|librt\.so|libpthread\.so|libgcc_s|libstdc\+\+|libcuda\.so|libcudart|libcublas|libnccl|libnvidia|libnvrtc|libcurand)'

if ! command -v nvcc > /dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=/usr/local/cuda/bin:$PATH; fi
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
launcher=()
command -v ccache > /dev/null 2>&1 && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
cmake -S . -B "$BUILD" -G Ninja -DTANDEM_CUDA=ON -DCMAKE_BUILD_TYPE="${PACK_BUILD_TYPE:-Release}" "${launcher[@]}" > /dev/null
ninja -C "$BUILD" -j"$(nproc)" "${TARGETS[@]}"

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/prebuilt/bin" "$stage/prebuilt/lib/ucx"
for t in "${TARGETS[@]}"; do
  f=$(find "$BUILD" -name "$t" -type f -executable | head -1)
  [ -n "$f" ] || { echo "pack_prebuilt: $t was not built"; exit 1; }
  cp "$f" "$stage/prebuilt/bin/"
  strip --strip-unneeded "$stage/prebuilt/bin/$t"
done
ldd "$stage"/prebuilt/bin/* | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | sort -u |
  while read -r name path; do
    [[ "$name" =~ $IMAGE_HAS ]] || cp -L "$path" "$stage/prebuilt/lib/$name"
  done
# UCX loads its transport modules from ucx/ next to libucs (InfiniBand/RDMA ones need libibverbs: left out).
ucs=""
if [ -f "$stage/prebuilt/bin/tandem-decode" ]; then
  ucs=$(ldd "$stage/prebuilt/bin/tandem-decode" | awk '$1 ~ /^libucs\.so/ {print $3}')
fi
if [ -n "$ucs" ]; then
  for m in "$(dirname "$ucs")"/ucx/libuct_*.so.0; do
    [[ "$m" == *_ib.* || "$m" == *_rdmacm.* ]] || cp -L "$m" "$stage/prebuilt/lib/ucx/"
  done
fi
strip --strip-unneeded "$stage"/prebuilt/lib/*.so* "$stage"/prebuilt/lib/ucx/* 2> /dev/null || true
mkdir -p "$(dirname "$PACKED")"
tar -cJf "$PACKED" -C "$stage" prebuilt
echo "libraries: $(cd "$stage/prebuilt/lib" && find . -type f | sort | tr '\n' ' ')"
echo "unpacked $(du -sh "$stage/prebuilt" | cut -f1), packed $PACKED $(du -h "$PACKED" | cut -f1)" \
     "(limit for the whole carried tree: 64 MiB)"
