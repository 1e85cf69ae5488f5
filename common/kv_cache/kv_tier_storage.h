// Where KV blocks live, behind an interface so the policy code (pools,
// scheduler) never touches memory. The policy side emits batches of block
// copies between tiers (device->host demote and swap-out, host->device promote
// and swap-in); the engine hands each batch to ExecuteCopies() before the
// forward that needs it. CpuKvTierStorage is the plain-memory implementation
// (the CPU backend, and tests); a CUDA one (device memory + pinned host memory,
// async copies on a stream) plugs in behind the same interface.
// Thread rule: an implementation is owned by the engine thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "common/base/ids.h"
#include "common/base/status.h"
#include "common/kv_cache/kv_layout.h"

namespace tandem::kv_cache {

enum class KvTier : uint8_t { kDevice = 0, kHost = 1 };
inline constexpr int kNumKvTiers = 2;
std::string_view KvTierName(KvTier tier);

// Copy every layer (K and V) of one block from one tier to another.
struct BlockCopy {
  KvTier src_tier = KvTier::kDevice;
  BlockId src_block = kInvalidBlock;
  KvTier dst_tier = KvTier::kHost;
  BlockId dst_block = kInvalidBlock;

  friend bool operator==(const BlockCopy&, const BlockCopy&) = default;
};

class KvTierStorage {
 public:
  virtual ~KvTierStorage() = default;
  // Runs `copies` strictly in list order (a later copy may overwrite the source
  // of an earlier one, or read its destination). Out-of-range ids are an
  // InvalidArgument and nothing after the bad entry runs.
  virtual Status ExecuteCopies(std::span<const BlockCopy> copies) = 0;
};

// One plain host buffer per tier, each laid out as KvLayout describes
// ([num_layers, num_blocks, 2, num_kv_heads, block_size, head_dim]).
class CpuKvTierStorage final : public KvTierStorage {
 public:
  // `layout.num_blocks` is ignored; each tier gets its own block count.
  // Fails on an invalid layout or when the buffers cannot be allocated.
  static StatusOr<std::unique_ptr<CpuKvTierStorage>> Create(const KvLayout& layout, int num_device_blocks,
                                                            int num_host_blocks);

  // The layout of one tier (num_blocks set to that tier's count).
  const KvLayout& layout(KvTier tier) const { return layouts_[static_cast<int>(tier)]; }
  // Base pointer of one tier's buffer (TotalBytes() of its layout).
  std::byte* data(KvTier tier) { return buffers_[static_cast<int>(tier)].data(); }
  const std::byte* data(KvTier tier) const { return buffers_[static_cast<int>(tier)].data(); }

  Status ExecuteCopies(std::span<const BlockCopy> copies) override;

 private:
  CpuKvTierStorage() = default;

  KvLayout layouts_[kNumKvTiers];
  std::vector<std::byte> buffers_[kNumKvTiers];
};

}  // namespace tandem::kv_cache
