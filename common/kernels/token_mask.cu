#include "common/kernels/token_mask.h"

#include <algorithm>
#include <cmath>

#include "common/cuda/cuda_status.h"

namespace tandem::kernels {
namespace {

constexpr int kMaskThreads = 256;

// Grid (column blocks, masked rows). One thread per logit, so a warp's writes are
// coalesced and its 32 lanes read the same mask word; only blocked tokens are written.
__global__ void __launch_bounds__(kMaskThreads) ApplyTokenMaskKernel(TokenMaskParams p) {
  const int r = blockIdx.y;
  float* row = p.logits + static_cast<int64_t>(p.rows[r]) * p.logits_stride;
  const uint32_t* mask = p.masks + static_cast<int64_t>(r) * p.mask_words;
  for (int t = blockIdx.x * blockDim.x + threadIdx.x; t < p.vocab; t += gridDim.x * blockDim.x) {
    if ((__ldg(mask + (t >> 5)) >> (t & 31) & 1u) == 0) row[t] = -INFINITY;
  }
}

}  // namespace

Status LaunchApplyTokenMask(const TokenMaskParams& p, cudaStream_t stream) {
  if (p.num_rows == 0) return Status::Ok();
  if (p.logits == nullptr || p.rows == nullptr || p.masks == nullptr || p.vocab <= 0 || p.num_rows < 0 ||
      p.logits_stride < p.vocab || p.num_rows > p.num_logits_rows || p.mask_words != (p.vocab + 31) / 32 ||
      p.num_rows > 65535) {
    return InvalidArgumentError("LaunchApplyTokenMask: bad params");
  }
  const int column_blocks = std::min((p.vocab + kMaskThreads - 1) / kMaskThreads, 128);
  ApplyTokenMaskKernel<<<dim3(column_blocks, p.num_rows), kMaskThreads, 0, stream>>>(p);
  return cuda::CudaStatus(cudaGetLastError(), "ApplyTokenMaskKernel launch");
}

}  // namespace tandem::kernels
