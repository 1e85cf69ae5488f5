// Content addresses of full KV blocks, for prefix reuse.
//
// A full block's identity is SHA-256 over (parent block hash, tenant salt,
// model id, the block's token ids). Chaining the parent makes a hash name the
// whole prefix, so equal hashes mean equal KV. The salt keeps tenants apart:
// different salts never produce the same chain. Only full blocks are hashed.
// Thread rule: pure functions and value types.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/base/ids.h"

namespace tandem::kv_cache {

// 32 bytes of SHA-256. The all-zero value is the parent of a sequence's first block.
struct BlockHash {
  std::array<uint8_t, 32> bytes{};

  friend bool operator==(const BlockHash& a, const BlockHash& b) = default;
  // Lowercase hex, 64 characters.
  std::string ToHex() const;
};

// For unordered containers: SHA-256 output is uniform, so the first 8 bytes do.
struct BlockHashHasher {
  size_t operator()(const BlockHash& h) const {
    size_t v;
    std::memcpy(&v, h.bytes.data(), sizeof(v));
    return v;
  }
};

// Hash of one full block. `tokens` must hold exactly one block of token ids.
BlockHash HashBlock(const BlockHash& parent, std::string_view tenant_salt, std::string_view model_id,
                    std::span<const TokenId> tokens);

// Appends to `hashes` the hashes of the full blocks of `tokens` that are not in it
// yet (hashes->size() blocks are taken as already hashed, chaining from the last).
// Returns the number of hashes appended.
int ExtendBlockHashes(std::string_view tenant_salt, std::string_view model_id, int block_size,
                      std::span<const TokenId> tokens, std::vector<BlockHash>* hashes);

}  // namespace tandem::kv_cache
