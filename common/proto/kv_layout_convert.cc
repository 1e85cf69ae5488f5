#include "common/proto/kv_layout_convert.h"

#include <string>

namespace tandem::proto {

KvLayoutInfo ToKvLayoutInfo(const kv_cache::KvLayout& layout) {
  KvLayoutInfo info;
  info.set_layout_version(kv_cache::kKvLayoutVersion);
  info.set_num_layers(layout.num_layers);
  info.set_num_kv_heads(layout.num_kv_heads);
  info.set_head_dim(layout.head_dim);
  info.set_block_size(layout.block_size);
  info.set_dtype(static_cast<int32_t>(layout.dtype));
  return info;
}

StatusOr<kv_cache::KvLayout> FromKvLayoutInfo(const KvLayoutInfo& info) {
  if (info.layout_version() != kv_cache::kKvLayoutVersion) {
    return InvalidArgumentError("peer KV layout version " + std::to_string(info.layout_version()) +
                                ", this build has " + std::to_string(kv_cache::kKvLayoutVersion));
  }
  if (info.dtype() < 0 || info.dtype() > static_cast<int32_t>(DType::kU8)) {
    return InvalidArgumentError("peer KV layout has unknown dtype " + std::to_string(info.dtype()));
  }
  kv_cache::KvLayout layout;
  layout.num_layers = info.num_layers();
  layout.num_kv_heads = info.num_kv_heads();
  layout.head_dim = info.head_dim();
  layout.block_size = info.block_size();
  layout.dtype = static_cast<DType>(info.dtype());
  TANDEM_RETURN_IF_ERROR(layout.Validate().WithContext("peer KV layout"));
  // Caps far above any real model keep size arithmetic on a peer's numbers from overflowing.
  if (layout.num_layers > 4096 || layout.num_kv_heads > 4096 || layout.head_dim > 16384 || layout.block_size > 4096) {
    return InvalidArgumentError("peer KV layout is implausibly large: " + layout.DebugString());
  }
  return layout;
}

}  // namespace tandem::proto
