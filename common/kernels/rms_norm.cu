#include "common/kernels/rms_norm.h"

#include "common/cuda/cuda_status.h"
#include "common/kernels/kernel_util.cuh"

namespace tandem::kernels {
namespace {

using detail::Bf16x8ToFloat;
using detail::FloatToBf16x8;

// 8 consecutive values of a bf16 or fp32 row as floats, and back (bf16: rounded).
__device__ __forceinline__ void Load8(const __nv_bfloat16* row, int i, float (&x)[8]) {
  Bf16x8ToFloat(reinterpret_cast<const uint4*>(row)[i], x);
}
__device__ __forceinline__ void Load8(const float* row, int i, float (&x)[8]) {
  const float4 a = reinterpret_cast<const float4*>(row)[2 * i], b = reinterpret_cast<const float4*>(row)[2 * i + 1];
  x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w, x[4] = b.x, x[5] = b.y, x[6] = b.z, x[7] = b.w;
}
// Stores x and leaves in it the values as stored.
__device__ __forceinline__ void Store8(__nv_bfloat16* row, int i, float (&x)[8]) {
  const uint4 packed = FloatToBf16x8(x);
  reinterpret_cast<uint4*>(row)[i] = packed;
  Bf16x8ToFloat(packed, x);
}
__device__ __forceinline__ void Store8(float* row, int i, float (&x)[8]) {
  reinterpret_cast<float4*>(row)[2 * i] = make_float4(x[0], x[1], x[2], x[3]);
  reinterpret_cast<float4*>(row)[2 * i + 1] = make_float4(x[4], x[5], x[6], x[7]);
}

template <typename T>
__global__ void RmsNormKernel(RmsNormParams p) {
  detail::WaitForPreviousKernel();
  detail::AllowNextKernel();
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const int vecs = p.hidden / 8;
  const T* in = static_cast<const T*>(p.input) + row * p.hidden;
  T* res = p.residual ? static_cast<T*>(p.residual) + row * p.hidden : nullptr;
  float sum_sq = 0.f;
  for (int i = threadIdx.x; i < vecs; i += blockDim.x) {
    float x[8];
    Load8(in, i, x);
    if (res != nullptr) {
      float r[8];
      Load8(res, i, r);
#pragma unroll
      for (int j = 0; j < 8; ++j) x[j] += r[j];
      Store8(res, i, x);  // normalize the sum as stored
    }
#pragma unroll
    for (int j = 0; j < 8; ++j) sum_sq += x[j] * x[j];
  }
  const float inv_rms = rsqrtf(detail::BlockSum(sum_sq, scratch) / p.hidden + p.eps);
  const T* src = res != nullptr ? res : in;
  const uint4* w = reinterpret_cast<const uint4*>(p.weight);
  uint4* out = reinterpret_cast<uint4*>(p.out + row * p.hidden);
  for (int i = threadIdx.x; i < vecs; i += blockDim.x) {
    float x[8], g[8];
    Load8(src, i, x);
    Bf16x8ToFloat(w[i], g);
#pragma unroll
    for (int j = 0; j < 8; ++j) x[j] = x[j] * inv_rms * g[j];
    out[i] = FloatToBf16x8(x);
  }
}

}  // namespace

Status LaunchRmsNorm(const RmsNormParams& p, cudaStream_t stream) {
  if (p.input == nullptr || p.weight == nullptr || p.out == nullptr)
    return InvalidArgumentError("RmsNorm: null input, weight or out");
  if (p.num_rows < 0 || p.hidden <= 0 || p.hidden % 8 != 0 || !(p.eps > 0.f))
    return InvalidArgumentError("RmsNorm: need num_rows >= 0, hidden % 8 == 0, eps > 0");
  if (p.f32 && p.out == p.input) return InvalidArgumentError("RmsNorm: a bf16 out cannot alias an fp32 input");
  if (p.num_rows == 0) return Status::Ok();
  const int vecs = p.hidden / 8;
  const int threads = vecs >= 512 ? 512 : ((vecs + 31) / 32) * 32;
  if (p.f32) return detail::LaunchPdl("RmsNormKernel", RmsNormKernel<float>, p.num_rows, threads, 0, stream, p);
  return detail::LaunchPdl("RmsNormKernel", RmsNormKernel<__nv_bfloat16>, p.num_rows, threads, 0, stream, p);
}

}  // namespace tandem::kernels
