// Device helpers shared by the kernels in this folder (not a public header).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace tandem::kernels::detail {

__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float WarpMax(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over the block; `scratch` holds at least 32 floats. All threads get the result.
__device__ __forceinline__ float BlockSum(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int num_warps = (blockDim.x + 31) >> 5;
  v = WarpSum(v);
  __syncthreads();  // scratch may still be read from a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float t = lane < num_warps ? scratch[lane] : 0.f;
  return WarpSum(t);
}

// 8 bf16 values in one 16-byte vector.
union Bf16x8 {
  uint4 u;
  __nv_bfloat162 h2[4];
};

__device__ __forceinline__ void Bf16x8ToFloat(const uint4& u, float (&f)[8]) {
  Bf16x8 v;
  v.u = u;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float2 p = __bfloat1622float2(v.h2[i]);
    f[2 * i] = p.x;
    f[2 * i + 1] = p.y;
  }
}

__device__ __forceinline__ uint4 FloatToBf16x8(const float (&f)[8]) {
  Bf16x8 v;
#pragma unroll
  for (int i = 0; i < 4; ++i) v.h2[i] = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
  return v.u;
}

}  // namespace tandem::kernels::detail
