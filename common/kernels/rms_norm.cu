#include "common/kernels/rms_norm.h"

#include "common/cuda/cuda_status.h"
#include "common/kernels/kernel_util.cuh"

namespace tandem::kernels {
namespace {

using detail::Bf16x8ToFloat;
using detail::FloatToBf16x8;

__global__ void RmsNormKernel(RmsNormParams p) {
  detail::WaitForPreviousKernel();
  detail::AllowNextKernel();
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const int vecs = p.hidden / 8;
  const uint4* in = reinterpret_cast<const uint4*>(p.input + row * p.hidden);
  uint4* res = p.residual ? reinterpret_cast<uint4*>(p.residual + row * p.hidden) : nullptr;
  float sum_sq = 0.f;
  for (int i = threadIdx.x; i < vecs; i += blockDim.x) {
    float x[8];
    Bf16x8ToFloat(in[i], x);
    if (res != nullptr) {
      float r[8];
      Bf16x8ToFloat(res[i], r);
#pragma unroll
      for (int j = 0; j < 8; ++j) r[j] += x[j];
      uint4 packed = FloatToBf16x8(r);
      res[i] = packed;
      Bf16x8ToFloat(packed, x);  // normalize the rounded sum, as stored
    }
#pragma unroll
    for (int j = 0; j < 8; ++j) sum_sq += x[j] * x[j];
  }
  const float inv_rms = rsqrtf(detail::BlockSum(sum_sq, scratch) / p.hidden + p.eps);
  const uint4* src = res != nullptr ? res : in;
  const uint4* w = reinterpret_cast<const uint4*>(p.weight);
  uint4* out = reinterpret_cast<uint4*>(p.out + row * p.hidden);
  for (int i = threadIdx.x; i < vecs; i += blockDim.x) {
    float x[8], g[8];
    Bf16x8ToFloat(src[i], x);
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
  if (p.num_rows == 0) return Status::Ok();
  const int vecs = p.hidden / 8;
  const int threads = vecs >= 512 ? 512 : ((vecs + 31) / 32) * 32;
  return detail::LaunchPdl("RmsNormKernel", RmsNormKernel, p.num_rows, threads, 0, stream, p);
}

}  // namespace tandem::kernels
