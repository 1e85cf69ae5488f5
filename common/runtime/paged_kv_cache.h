// PagedKvCache: one tier's KV pool on a backend device, laid out exactly as
// kv_cache::KvLayout says (layer-major, HND inside a block). Which blocks a
// sequence owns is the block manager's business; this class only owns the
// memory. The model's RopeKvWrite op fills it, PagedAttention reads it.
// Thread rule: engine thread only (like its backend).
#pragma once

#include "common/kv_cache/kv_layout.h"
#include "common/model/model_config.h"
#include "common/runtime/backend.h"

namespace tandem::runtime {

// The layout a model needs: its layers, KV heads and head_dim, with the
// given block size, block count and element dtype.
kv_cache::KvLayout KvLayoutForModel(const model::ModelConfig& config, int block_size, int num_blocks, DType dtype);

class PagedKvCache {
 public:
  // Allocates a zeroed pool of layout.TotalBytes() on `backend`.
  // InvalidArgument for an invalid layout or num_blocks == 0; ResourceExhausted
  // when the device is out of memory. `backend` must outlive the cache.
  static StatusOr<PagedKvCache> Create(Backend* backend, const kv_cache::KvLayout& layout);

  const kv_cache::KvLayout& layout() const { return layout_; }
  // The pool, [num_layers, num_blocks, 2, num_kv_heads, block_size, head_dim] flattened.
  Tensor pool() const { return pool_.tensor(); }

 private:
  PagedKvCache(kv_cache::KvLayout layout, Buffer pool) : layout_(layout), pool_(std::move(pool)) {}

  kv_cache::KvLayout layout_;
  Buffer pool_;
};

}  // namespace tandem::runtime
