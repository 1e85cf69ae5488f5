// What the two-process session tests and their helper processes agree on: the
// layouts, the block lists, and the byte pattern of the sender's pool.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/kv_cache/kv_layout.h"

namespace tandem::kv_transfer::testing {

inline kv_cache::KvLayout PeerLayout(int num_blocks) {
  kv_cache::KvLayout l;
  l.num_layers = 4;
  l.num_kv_heads = 2;
  l.head_dim = 64;
  l.block_size = 16;
  l.num_blocks = num_blocks;
  return l;
}
inline constexpr int kPeerSendBlocks = 40, kPeerRecvBlocks = 50;
inline const std::vector<int32_t> kPeerSrcBlocks = {0, 1, 2, 3, 20, 21, 9, 33};
inline const std::vector<int32_t> kPeerDstBlocks = {45, 46, 47, 48, 3, 4, 10, 0};

inline uint8_t PeerPattern(size_t i) { return static_cast<uint8_t>((i * 2654435761u) >> 11); }

}  // namespace tandem::kv_transfer::testing
