// KV block copies by thread blocks instead of copy engines, for the KV tiers: one launch
// copies many small, scattered (layer, block) pieces between two layer-major pools (device
// memory, or pinned host memory the GPU reaches over PCIe). One cudaMemcpyAsync per 64 KB
// piece costs a few µs of copy-engine setup each (H200: scattered swap-out at 0.30 of the
// pinned-copy rate); long contiguous runs stay on the copy engines (kv_tier_storage_cuda.cc).
// Thread rule: launchers only queue work on the given stream.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "common/base/status.h"

namespace tandem::kernels {

// Pieces one launch takes: the block ids travel in the kernel parameters (< 32 KB).
inline constexpr int kKvBlockCopyMaxPieces = 2048;

struct KvBlockCopyParams {
  const std::byte* src = nullptr;  // layer-major pool: (layer, block) at (layer * src_blocks + block) * block_bytes
  std::byte* dst = nullptr;        // the same with dst_blocks
  int64_t src_blocks = 0;          // blocks per layer in each pool
  int64_t dst_blocks = 0;
  int64_t block_bytes = 0;  // bytes of one (layer, block), a multiple of 16, pools 16-byte aligned
  int num_layers = 0;
  int count = 0;  // pieces, [0, kKvBlockCopyMaxPieces]: every layer of each block pair
  int32_t src_block[kKvBlockCopyMaxPieces];
  int32_t dst_block[kKvBlockCopyMaxPieces];
};

// Queues the copies of every layer of each (src_block[i], dst_block[i]). The pairs must not
// conflict (no destination written twice, no destination another pair reads): they run in
// parallel. Errors: InvalidArgument on bad sizes, alignment or block ids; Internal on launch.
Status LaunchKvBlockCopy(const KvBlockCopyParams& params, cudaStream_t stream);

}  // namespace tandem::kernels
