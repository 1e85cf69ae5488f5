#include "common/kernels/silu_mul.h"

#include "common/cuda/cuda_status.h"
#include "common/kernels/kernel_util.cuh"

namespace tandem::kernels {
namespace {

__global__ void SiluMulKernel(SiluMulParams p) {
  detail::WaitForPreviousKernel();
  detail::AllowNextKernel();
  const int vecs = p.ffn / 8;
  const int64_t total = static_cast<int64_t>(p.num_tokens) * vecs;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = i / vecs;
    const int v = static_cast<int>(i % vecs);
    const uint4* row = reinterpret_cast<const uint4*>(p.gate_up + t * 2 * p.ffn);
    float g[8], u[8];
    detail::Bf16x8ToFloat(row[v], g);
    detail::Bf16x8ToFloat(row[vecs + v], u);
#pragma unroll
    for (int j = 0; j < 8; ++j) g[j] = detail::SiluMul(g[j], u[j]);
    reinterpret_cast<uint4*>(p.out + t * p.ffn)[v] = detail::FloatToBf16x8(g);
  }
}

}  // namespace

Status LaunchSiluMul(const SiluMulParams& p, cudaStream_t stream) {
  if (p.gate_up == nullptr || p.out == nullptr) return InvalidArgumentError("SiluMul: null pointer");
  if (p.num_tokens < 0 || p.ffn <= 0 || p.ffn % 8 != 0)
    return InvalidArgumentError("SiluMul: need num_tokens >= 0 and ffn % 8 == 0");
  if (p.num_tokens == 0) return Status::Ok();
  const int64_t total = static_cast<int64_t>(p.num_tokens) * (p.ffn / 8);
  const int threads = 256;
  const int64_t blocks = (total + threads - 1) / threads;
  return detail::LaunchPdl("SiluMulKernel", SiluMulKernel, static_cast<int>(blocks < 65536 ? blocks : 65536), threads,
                           0, stream, p);
}

}  // namespace tandem::kernels
