#include "common/engine/backend_kv_storage.h"

#include <cstring>
#include <string>

namespace tandem::engine {

using kv_cache::BlockCopy;
using kv_cache::KvTier;

BackendKvTierStorage::BackendKvTierStorage(runtime::Backend* backend, runtime::PagedKvCache* device,
                                           int num_host_blocks)
    : backend_(backend), device_(device), host_layout_(device->layout()) {
  host_layout_.num_blocks = num_host_blocks;
  host_.resize(host_layout_.TotalBytes());
  bounce_.resize(host_layout_.BytesPerBlockLayer());
}

runtime::Tensor BackendKvTierStorage::DeviceBlock(int layer, BlockId block) const {
  const kv_cache::KvLayout& layout = device_->layout();
  runtime::Tensor pool = device_->pool();
  auto* base = static_cast<std::byte*>(pool.data) + layout.BlockOffset(layer, block);
  return runtime::Tensor(base, DType::kU8, pool.device, {static_cast<int64_t>(layout.BytesPerBlockLayer())});
}

std::byte* BackendKvTierStorage::HostBlock(int layer, BlockId block) {
  return host_.data() + host_layout_.BlockOffset(layer, block);
}

Status BackendKvTierStorage::CopyOne(const BlockCopy& copy) {
  auto in_range = [&](KvTier tier, BlockId b) {
    int n = tier == KvTier::kDevice ? device_->layout().num_blocks : host_layout_.num_blocks;
    return b >= 0 && b < n;
  };
  if (!in_range(copy.src_tier, copy.src_block) || !in_range(copy.dst_tier, copy.dst_block)) {
    return InvalidArgumentError("block copy out of range: " + std::to_string(copy.src_block) + " -> " +
                                std::to_string(copy.dst_block));
  }
  const size_t bytes = host_layout_.BytesPerBlockLayer();
  for (int layer = 0; layer < host_layout_.num_layers; ++layer) {
    if (copy.src_tier == KvTier::kHost && copy.dst_tier == KvTier::kHost) {
      std::memmove(HostBlock(layer, copy.dst_block), HostBlock(layer, copy.src_block), bytes);
    } else if (copy.src_tier == KvTier::kHost) {
      TANDEM_RETURN_IF_ERROR(
          backend_->CopyToDevice(HostBlock(layer, copy.src_block), bytes, DeviceBlock(layer, copy.dst_block)));
    } else if (copy.dst_tier == KvTier::kHost) {
      TANDEM_RETURN_IF_ERROR(
          backend_->CopyToHost(DeviceBlock(layer, copy.src_block), HostBlock(layer, copy.dst_block), bytes));
    } else {
      TANDEM_RETURN_IF_ERROR(backend_->CopyToHost(DeviceBlock(layer, copy.src_block), bounce_.data(), bytes));
      TANDEM_RETURN_IF_ERROR(backend_->CopyToDevice(bounce_.data(), bytes, DeviceBlock(layer, copy.dst_block)));
    }
  }
  return Status::Ok();
}

Status BackendKvTierStorage::ExecuteCopies(std::span<const BlockCopy> copies) {
  for (const BlockCopy& copy : copies) TANDEM_RETURN_IF_ERROR(CopyOne(copy));
  return Status::Ok();
}

}  // namespace tandem::engine
