#include "bench/gpu/fill_random.h"

#include <algorithm>

#include "common/cuda/cuda_status.h"

namespace tandem::bench {
namespace {

__device__ __forceinline__ uint64_t Mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

__global__ void FillRandomKernel(__nv_bfloat16* dst, size_t count, uint64_t seed, float center, float spread) {
  for (size_t e = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; e < count;
       e += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const uint64_t h = Mix64(seed * 0x9e3779b97f4a7c15ull + e);
    const float u = static_cast<float>(h >> 40) * (2.f / 16777216.f) - 1.f;
    dst[e] = __float2bfloat16(center + spread * u);
  }
}

}  // namespace

Status LaunchFillRandomBf16(__nv_bfloat16* dst, size_t count, uint64_t seed, float center, float spread,
                            cudaStream_t stream) {
  if (dst == nullptr) return InvalidArgumentError("FillRandomBf16: null pointer");
  if (count == 0) return Status::Ok();
  const size_t blocks = std::min<size_t>((count + 255) / 256, 8192);
  FillRandomKernel<<<static_cast<int>(blocks), 256, 0, stream>>>(dst, count, seed, center, spread);
  return cuda::LastLaunchStatus("FillRandomKernel");
}

}  // namespace tandem::bench
