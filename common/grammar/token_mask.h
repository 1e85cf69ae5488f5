// Token masks: one bit per token id, bit (id % 32) of word (id / 32) set = allowed.
// Thread rule: pure functions.
#pragma once

#include <cstdint>
#include <span>

#include "common/base/ids.h"

namespace tandem::grammar {

// Words of a mask for a vocabulary of `vocab_size` ids.
constexpr int MaskWords(int vocab_size) { return (vocab_size + 31) / 32; }

inline void SetMaskBit(std::span<uint32_t> mask, TokenId id) { mask[id / 32] |= 1u << (id % 32); }
inline void ClearMaskBit(std::span<uint32_t> mask, TokenId id) { mask[id / 32] &= ~(1u << (id % 32)); }
inline bool MaskBit(std::span<const uint32_t> mask, TokenId id) { return (mask[id / 32] >> (id % 32)) & 1u; }

}  // namespace tandem::grammar
