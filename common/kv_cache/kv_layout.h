// The KV cache layout contract: what the kernels, the CPU backend, the block
// pools and the transfer code all rely on. Both ends of a KV transfer compare
// KvLayout (Compatible) at handshake and refuse a mismatch.
//
// One tier's pool is one buffer, layer-major, so one layer of a run of
// consecutive blocks is one contiguous region (cheap layer-wise transfers):
//
//   pool  [num_layers, num_blocks, 2, num_kv_heads, block_size, head_dim]
//   block [2 (K then V), num_kv_heads, block_size, head_dim]   ("HND" within a block)
//
// Token t of a sequence lives in block block_table[t / block_size], slot t % block_size.
// Thread rule: plain value type.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/base/dtype.h"
#include "common/base/status.h"

namespace tandem::kv_cache {

inline constexpr uint32_t kKvLayoutVersion = 1;

struct KvLayout {
  int num_layers = 0;          // transformer layers
  int num_kv_heads = 0;        // KV heads per layer (after GQA grouping)
  int head_dim = 0;            // elements per head
  int block_size = 16;         // tokens per block
  int num_blocks = 0;          // blocks in this pool (differs between nodes; not part of Compatible)
  DType dtype = DType::kBF16;  // element type of K and V

  // Elements of one K (or V) half of one block of one layer: num_kv_heads * block_size * head_dim.
  size_t ElementsPerHalfBlock() const { return static_cast<size_t>(num_kv_heads) * block_size * head_dim; }
  // Bytes of one block of one layer (K and V).
  size_t BytesPerBlockLayer() const { return 2 * ElementsPerHalfBlock() * DTypeSize(dtype); }
  // Bytes of one layer of the whole pool.
  size_t BytesPerLayer() const { return BytesPerBlockLayer() * num_blocks; }
  // Bytes of the whole pool.
  size_t TotalBytes() const { return BytesPerLayer() * num_layers; }
  // Bytes of KV per token across all layers.
  size_t BytesPerToken() const {
    return static_cast<size_t>(num_layers) * 2 * num_kv_heads * head_dim * DTypeSize(dtype);
  }

  // Byte offset of (layer, block) in the pool; K half first, V half at + BytesPerBlockLayer()/2.
  size_t BlockOffset(int layer, int block) const {
    return (static_cast<size_t>(layer) * num_blocks + block) * BytesPerBlockLayer();
  }
  // Element offset of one (layer, block, kv, head, slot) row of head_dim elements.
  // kv: 0 = K, 1 = V.
  size_t ElementOffset(int layer, int block, int kv, int head, int slot) const {
    size_t block_elems = 2 * ElementsPerHalfBlock();
    return (static_cast<size_t>(layer) * num_blocks + block) * block_elems +
           ((static_cast<size_t>(kv) * num_kv_heads + head) * block_size + slot) * head_dim;
  }

  // Positive sizes and a block size that is a power of two.
  Status Validate() const;
  // True when two nodes can exchange blocks: same everything but num_blocks.
  bool Compatible(const KvLayout& other) const {
    return num_layers == other.num_layers && num_kv_heads == other.num_kv_heads && head_dim == other.head_dim &&
           block_size == other.block_size && dtype == other.dtype;
  }
  std::string DebugString() const;
};

}  // namespace tandem::kv_cache
