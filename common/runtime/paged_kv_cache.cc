#include "common/runtime/paged_kv_cache.h"

#include <utility>

namespace tandem::runtime {

kv_cache::KvLayout KvLayoutForModel(const model::ModelConfig& config, int block_size, int num_blocks, DType dtype) {
  kv_cache::KvLayout layout;
  layout.num_layers = config.num_layers;
  layout.num_kv_heads = config.num_kv_heads;
  layout.head_dim = config.head_dim;
  layout.block_size = block_size;
  layout.num_blocks = num_blocks;
  layout.dtype = dtype;
  return layout;
}

StatusOr<PagedKvCache> PagedKvCache::Create(Backend* backend, const kv_cache::KvLayout& layout) {
  TANDEM_RETURN_IF_ERROR(layout.Validate());
  if (layout.num_blocks <= 0) return InvalidArgumentError("KV cache needs at least one block: " + layout.DebugString());
  int64_t elements = static_cast<int64_t>(layout.TotalBytes() / DTypeSize(layout.dtype));
  TANDEM_ASSIGN_OR_RETURN(Buffer pool, backend->Allocate(layout.dtype, {elements}));
  return PagedKvCache(layout, std::move(pool));
}

}  // namespace tandem::runtime
