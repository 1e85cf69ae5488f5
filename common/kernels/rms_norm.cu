#include "common/kernels/rms_norm.h"

#include "common/cuda/cuda_status.h"
#include "common/kernels/kernel_util.cuh"

namespace tandem::kernels {
namespace {

using detail::Bf16x8ToFloat;
using detail::FloatToBf16x8;

constexpr int kMaxThreads = 512;
constexpr int kMaxHidden = 8 * 8 * kMaxThreads;  // 8 vectors of 8 per thread

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

// One block per row; thread i owns the vectors i, i + blockDim.x, ... (at most
// kPerThread), kept in registers from the load to the store. The norm weights come first:
// nobody writes them, so their loads go out before the previous kernel ends.
template <typename T, int kPerThread>
__global__ void __launch_bounds__(kMaxThreads) RmsNormKernel(RmsNormParams p) {
  __shared__ float scratch[32];
  const int vecs = p.hidden / 8;
  uint4 w[kPerThread];
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    const int i = threadIdx.x + j * blockDim.x;
    if (i < vecs) w[j] = reinterpret_cast<const uint4*>(p.weight)[i];
  }
  detail::WaitForPreviousKernel();
  detail::AllowNextKernel();
  const int64_t row = blockIdx.x;
  const T* in = static_cast<const T*>(p.input) + row * p.hidden;
  T* res = p.residual ? static_cast<T*>(p.residual) + row * p.hidden : nullptr;
  float x[kPerThread][8];
  float sum_sq = 0.f;
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    const int i = threadIdx.x + j * blockDim.x;
    if (i >= vecs) break;
    Load8(in, i, x[j]);
    if (res != nullptr) {
      float r[8];
      Load8(res, i, r);
#pragma unroll
      for (int e = 0; e < 8; ++e) x[j][e] += r[e];
      Store8(res, i, x[j]);  // normalize the sum as stored
    }
#pragma unroll
    for (int e = 0; e < 8; ++e) sum_sq += x[j][e] * x[j][e];
  }
  const float inv_rms = rsqrtf(detail::BlockSum(sum_sq, scratch) / p.hidden + p.eps);
  uint4* out = reinterpret_cast<uint4*>(p.out + row * p.hidden);
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    const int i = threadIdx.x + j * blockDim.x;
    if (i >= vecs) break;
    float g[8];
    Bf16x8ToFloat(w[j], g);
#pragma unroll
    for (int e = 0; e < 8; ++e) x[j][e] = x[j][e] * inv_rms * g[e];
    out[i] = FloatToBf16x8(x[j]);
  }
}

template <typename T>
Status LaunchTyped(const RmsNormParams& p, int threads, int per_thread, cudaStream_t stream) {
  switch (per_thread) {
    case 1: return detail::LaunchPdl("RmsNormKernel", RmsNormKernel<T, 1>, p.num_rows, threads, 0, stream, p);
    case 2: return detail::LaunchPdl("RmsNormKernel", RmsNormKernel<T, 2>, p.num_rows, threads, 0, stream, p);
    case 4: return detail::LaunchPdl("RmsNormKernel", RmsNormKernel<T, 4>, p.num_rows, threads, 0, stream, p);
    default: return detail::LaunchPdl("RmsNormKernel", RmsNormKernel<T, 8>, p.num_rows, threads, 0, stream, p);
  }
}

}  // namespace

Status LaunchRmsNorm(const RmsNormParams& p, cudaStream_t stream) {
  if (p.input == nullptr || p.weight == nullptr || p.out == nullptr)
    return InvalidArgumentError("RmsNorm: null input, weight or out");
  if (p.num_rows < 0 || p.hidden <= 0 || p.hidden % 8 != 0 || p.hidden > kMaxHidden || !(p.eps > 0.f))
    return InvalidArgumentError("RmsNorm: need num_rows >= 0, hidden % 8 == 0 and <= 32768, eps > 0");
  if (p.f32 && p.out == p.input) return InvalidArgumentError("RmsNorm: a bf16 out cannot alias an fp32 input");
  if (p.num_rows == 0) return Status::Ok();
  const int vecs = p.hidden / 8;
  const int threads = vecs >= kMaxThreads ? kMaxThreads : ((vecs + 31) / 32) * 32;
  int per_thread = 1;
  while (per_thread * threads < vecs) per_thread *= 2;
  if (p.f32) return LaunchTyped<float>(p, threads, per_thread, stream);
  return LaunchTyped<__nv_bfloat16>(p, threads, per_thread, stream);
}

}  // namespace tandem::kernels
