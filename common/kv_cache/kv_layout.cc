#include "common/kv_cache/kv_layout.h"

#include <fmt/format.h>

namespace tandem::kv_cache {

Status KvLayout::Validate() const {
  if (num_layers <= 0 || num_kv_heads <= 0 || head_dim <= 0 || num_blocks < 0) {
    return InvalidArgumentError("KV layout needs positive layers, heads and head_dim: " + DebugString());
  }
  if (block_size <= 0 || (block_size & (block_size - 1)) != 0) {
    return InvalidArgumentError(fmt::format("KV block size must be a power of two, got {}", block_size));
  }
  return Status::Ok();
}

std::string KvLayout::DebugString() const {
  return fmt::format("KvLayout{{layers={}, kv_heads={}, head_dim={}, block_size={}, blocks={}, dtype={}}}", num_layers,
                     num_kv_heads, head_dim, block_size, num_blocks, DTypeName(dtype));
}

}  // namespace tandem::kv_cache
