#include "common/kv_cache/kv_tier_storage.h"

#include <cstring>
#include <new>

#include <fmt/format.h>

namespace tandem::kv_cache {

std::string_view KvTierName(KvTier tier) {
  switch (tier) {
    case KvTier::kDevice: return "device";
    case KvTier::kHost: return "host";
  }
  return "unknown";
}

StatusOr<std::unique_ptr<CpuKvTierStorage>> CpuKvTierStorage::Create(const KvLayout& layout, int num_device_blocks,
                                                                     int num_host_blocks) {
  TANDEM_RETURN_IF_ERROR(layout.Validate());
  if (num_device_blocks < 0 || num_host_blocks < 0) {
    return InvalidArgumentError("CpuKvTierStorage: block counts must be >= 0");
  }
  std::unique_ptr<CpuKvTierStorage> storage(new CpuKvTierStorage());
  const int counts[kNumKvTiers] = {num_device_blocks, num_host_blocks};
  for (int t = 0; t < kNumKvTiers; ++t) {
    storage->layouts_[t] = layout;
    storage->layouts_[t].num_blocks = counts[t];
    try {
      storage->buffers_[t].resize(storage->layouts_[t].TotalBytes());
    } catch (const std::bad_alloc&) {
      return ResourceExhaustedError(fmt::format("CpuKvTierStorage: cannot allocate {} bytes for {} tier",
                                                storage->layouts_[t].TotalBytes(), KvTierName(static_cast<KvTier>(t))));
    }
  }
  return storage;
}

Status CpuKvTierStorage::ExecuteCopies(std::span<const BlockCopy> copies) {
  for (const BlockCopy& c : copies) {
    const KvLayout& src = layout(c.src_tier);
    const KvLayout& dst = layout(c.dst_tier);
    if (c.src_block < 0 || c.src_block >= src.num_blocks || c.dst_block < 0 || c.dst_block >= dst.num_blocks) {
      return InvalidArgumentError(fmt::format("block copy {}:{} -> {}:{} out of range", KvTierName(c.src_tier),
                                              c.src_block, KvTierName(c.dst_tier), c.dst_block));
    }
    const size_t bytes = src.BytesPerBlockLayer();
    for (int layer = 0; layer < src.num_layers; ++layer) {
      // memmove: a same-tier copy of a block onto itself must stay defined.
      std::memmove(data(c.dst_tier) + dst.BlockOffset(layer, c.dst_block),
                   data(c.src_tier) + src.BlockOffset(layer, c.src_block), bytes);
    }
  }
  return Status::Ok();
}

}  // namespace tandem::kv_cache
