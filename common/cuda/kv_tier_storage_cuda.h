// CudaKvTierStorage: the KV tiers on one GPU. The device tier is an existing pool in
// device memory (the runtime's PagedKvCache); the host tier is pinned memory with the
// same per-block layout (kv_cache::KvLayout). ExecuteCopies queues every (layer, block)
// copy on its own copy stream and returns without waiting: the copies start after the
// work already queued on the compute stream, and the compute stream's next work starts
// after them (events both ways), so demotion, promotion and swap overlap host work and
// stay ordered with the forward passes.
// Thread rule: engine thread only. Reading the host tier on the host needs Synchronize().
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>

#include "common/cuda/device_buffer.h"
#include "common/kv_cache/kv_tier_storage.h"

namespace tandem::cuda {

class CudaKvTierStorage final : public kv_cache::KvTierStorage {
 public:
  // `device_pool` holds device_layout.TotalBytes() and must outlive this; `compute_stream`
  // is the stream the model runs on. num_host_blocks may be 0 (no host tier).
  static StatusOr<std::unique_ptr<CudaKvTierStorage>> Create(void* device_pool,
                                                             const kv_cache::KvLayout& device_layout,
                                                             int num_host_blocks,
                                                             cudaStream_t compute_stream);
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
};

}  // namespace tandem::cuda
