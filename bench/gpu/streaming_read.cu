#include "bench/gpu/streaming_read.h"

#include <cstdint>

#include "common/cuda/cuda_status.h"

namespace tandem::bench {
namespace {

__global__ void StreamingReadKernel(const uint4* __restrict__ src, size_t n, uint4* sink) {
  uint4 acc = make_uint4(0, 0, 0, 0);
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    const uint4 a = src[i], b = src[i + stride], c = src[i + 2 * stride], d = src[i + 3 * stride];
    acc.x ^= a.x ^ b.x ^ c.x ^ d.x;
    acc.y ^= a.y ^ b.y ^ c.y ^ d.y;
    acc.z ^= a.z ^ b.z ^ c.z ^ d.z;
    acc.w ^= a.w ^ b.w ^ c.w ^ d.w;
  }
  for (; i < n; i += stride) {
    const uint4 a = src[i];
    acc.x ^= a.x;
    acc.y ^= a.y;
    acc.z ^= a.z;
    acc.w ^= a.w;
  }
  // Fold the block into one word; keeps the loads live.
  __shared__ uint4 red[1024];
  red[threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int t = 1; t < blockDim.x; ++t) {
      acc.x ^= red[t].x;
      acc.y ^= red[t].y;
      acc.z ^= red[t].z;
      acc.w ^= red[t].w;
    }
    sink[blockIdx.x] = acc;
  }
}

}  // namespace

Status LaunchStreamingRead(const void* src, size_t bytes, void* sink, cudaStream_t stream) {
  if (src == nullptr || sink == nullptr || bytes % 16 != 0)
    return InvalidArgumentError("StreamingRead: null pointer or size not a multiple of 16");
  int device = 0, sms = 0;
  TANDEM_RETURN_IF_CUDA_ERROR(cudaGetDevice(&device));
  TANDEM_RETURN_IF_CUDA_ERROR(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int blocks = sms * 4 < 4096 ? sms * 4 : 4096;
  StreamingReadKernel<<<blocks, 512, 0, stream>>>(static_cast<const uint4*>(src), bytes / 16,
                                                  static_cast<uint4*>(sink));
  return cuda::LastLaunchStatus("StreamingReadKernel");
}

}  // namespace tandem::bench
