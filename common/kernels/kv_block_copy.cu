#include "common/kernels/kv_block_copy.h"

#include "common/cuda/cuda_status.h"

namespace tandem::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kInFlight = 4;  // 16-byte loads per thread before its stores (PCIe latency)

// Grid: (pieces, layers). Each block moves one (layer, block) piece, kInFlight loads per
// thread at a time.
__global__ void __launch_bounds__(kThreads) KvBlockCopyKernel(const __grid_constant__ KvBlockCopyParams p) {
  const int i = blockIdx.x, layer = blockIdx.y;
  const uint4* src = reinterpret_cast<const uint4*>(p.src + (layer * p.src_blocks + p.src_block[i]) * p.block_bytes);
  uint4* dst = reinterpret_cast<uint4*>(p.dst + (layer * p.dst_blocks + p.dst_block[i]) * p.block_bytes);
  const int64_t n = p.block_bytes / 16;
  for (int64_t base = threadIdx.x; base < n; base += kThreads * kInFlight) {
    uint4 v[kInFlight];
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      const int64_t j = base + u * kThreads;
      if (j < n) v[u] = src[j];
    }
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      const int64_t j = base + u * kThreads;
      if (j < n) dst[j] = v[u];
    }
  }
}

}  // namespace

Status LaunchKvBlockCopy(const KvBlockCopyParams& p, cudaStream_t stream) {
  if (p.count < 0 || p.count > kKvBlockCopyMaxPieces || p.num_layers < 1 || p.num_layers > 65535)
    return InvalidArgumentError("KvBlockCopy: count or num_layers out of range");
  if (p.count == 0) return Status::Ok();
  if (p.src == nullptr || p.dst == nullptr || p.block_bytes <= 0 || p.block_bytes % 16 != 0 ||
      reinterpret_cast<uintptr_t>(p.src) % 16 != 0 || reinterpret_cast<uintptr_t>(p.dst) % 16 != 0)
    return InvalidArgumentError("KvBlockCopy: null pool, or block bytes / pools not 16-byte aligned");
  for (int i = 0; i < p.count; ++i) {
    if (p.src_block[i] < 0 || p.src_block[i] >= p.src_blocks || p.dst_block[i] < 0 || p.dst_block[i] >= p.dst_blocks)
      return InvalidArgumentError("KvBlockCopy: block id out of range");
  }
  KvBlockCopyKernel<<<dim3(p.count, p.num_layers), kThreads, 0, stream>>>(p);
  return cuda::LastLaunchStatus("KvBlockCopyKernel");
}

}  // namespace tandem::kernels
