// BackendKvTierStorage: the KV tiers of an engine. The device tier is the
// runtime's PagedKvCache (backend memory, read and written by the model); the
// host tier is a host buffer with the same per-block layout. Block copies
// between them go through the backend's copy functions, one contiguous
// (layer, block) region at a time.
// Thread rule: engine thread only.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "common/kv_cache/kv_tier_storage.h"
#include "common/runtime/backend.h"
#include "common/runtime/paged_kv_cache.h"

namespace tandem::engine {

class BackendKvTierStorage final : public kv_cache::KvTierStorage {
 public:
  // `backend` and `device` must outlive this. num_host_blocks may be 0.
  BackendKvTierStorage(runtime::Backend* backend, runtime::PagedKvCache* device, int num_host_blocks);

  Status ExecuteCopies(std::span<const kv_cache::BlockCopy> copies) override;

  // Host-tier bytes of (layer, block), for tests and transfers.
  std::byte* HostBlock(int layer, BlockId block);

 private:
  // The device pool's (layer, block) region as a byte tensor view.
  runtime::Tensor DeviceBlock(int layer, BlockId block) const;
  Status CopyOne(const kv_cache::BlockCopy& copy);

  runtime::Backend* backend_;
  runtime::PagedKvCache* device_;
  kv_cache::KvLayout host_layout_;
  std::vector<std::byte> host_;
  std::vector<std::byte> bounce_;  // device -> device copies
};

}  // namespace tandem::engine
