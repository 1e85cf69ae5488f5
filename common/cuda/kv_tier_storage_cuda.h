// CudaKvTierStorage: the KV tiers on one GPU. The device tier is an existing pool in
// device memory (the runtime's PagedKvCache); the host tier is pinned memory with the
// same per-block layout (kv_cache::KvLayout). ExecuteCopies queues every (layer, block)
// copy on its own copy stream and returns without waiting: the copies start after the
// work already queued on the compute stream, and the compute stream's next work starts
// after them (events both ways), so demotion, promotion and swap overlap host work and
// stay ordered with the forward passes. A run of consecutive blocks of at least
// kCopyEngineMinBytes per layer goes to the copy engines (cudaMemcpyAsync per layer); shorter
// cross-tier runs, scattered blocks above all, are gathered into KvBlockCopy kernel launches
// (common/kernels/kv_block_copy.h): H200, 512 scattered 64 KB blocks x 32 layers out to the
// host run at 0.30 of the pinned-copy rate as one cudaMemcpyAsync each.
// Thread rule: engine thread only. Reading the host tier on the host needs Synchronize().
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/cuda/device_buffer.h"
#include "common/kv_cache/kv_tier_storage.h"

namespace tandem::kernels {
struct KvBlockCopyParams;
}  // namespace tandem::kernels

namespace tandem::cuda {

// Bytes per layer from which a run of blocks takes the copy engines rather than the kernel.
inline constexpr size_t kCopyEngineMinBytes = size_t{2} << 20;

class CudaKvTierStorage final : public kv_cache::KvTierStorage {
 public:
  // `device_pool` holds device_layout.TotalBytes() and must outlive this; `compute_stream`
  // is the stream the model runs on. num_host_blocks may be 0 (no host tier).
  // copy_engine_min_bytes: see the file comment (tests lower it to reach both paths).
  static StatusOr<std::unique_ptr<CudaKvTierStorage>> Create(void* device_pool, const kv_cache::KvLayout& device_layout,
                                                             int num_host_blocks, cudaStream_t compute_stream,
                                                             size_t copy_engine_min_bytes = kCopyEngineMinBytes);
  ~CudaKvTierStorage() override;
  CudaKvTierStorage(const CudaKvTierStorage&) = delete;
  CudaKvTierStorage& operator=(const CudaKvTierStorage&) = delete;

  // Validates every copy first (InvalidArgument, nothing queued, for an out-of-range id),
  // then queues them in list order.
  Status ExecuteCopies(std::span<const kv_cache::BlockCopy> copies) override;

  // Waits for every queued copy.
  Status Synchronize();
  // Host-tier bytes of (layer, block) (pinned; valid after Synchronize()).
  std::byte* HostBlock(int layer, BlockId block);
  const kv_cache::KvLayout& host_layout() const { return host_layout_; }
  cudaStream_t copy_stream() const { return copy_stream_; }

 private:
  CudaKvTierStorage() = default;
  std::byte* Address(kv_cache::KvTier tier, int layer, BlockId block);

  std::byte* device_ = nullptr;
  kv_cache::KvLayout device_layout_, host_layout_;
  PinnedBuffer host_;
  cudaStream_t compute_stream_ = nullptr;
  cudaStream_t copy_stream_ = nullptr;
  cudaEvent_t compute_done_ = nullptr, copies_done_ = nullptr;
  size_t copy_engine_min_bytes_ = kCopyEngineMinBytes;
  std::unique_ptr<kernels::KvBlockCopyParams> batch_;  // ~16 KB: kept off the stack
  std::vector<uint8_t> device_marks_, host_marks_;     // destinations in the batch, per tier
  std::vector<kv_cache::BlockCopy> marked_;            // ... to clear them
};

}  // namespace tandem::cuda
