// BlockPool: the blocks of one KV tier (device or host) and their bookkeeping.
//
// Every block is in exactly one state:
//   free        refcount 0, no content hash          (in the free bitmap)
//   referenced  refcount > 0, with or without a hash  (held by sequences/reservations)
//   cached      refcount 0, with a hash               (in the LRU; reusable by a prefix hit)
// so free + referenced + cached = num_blocks at all times. A cached block is
// only turned back into a free one by EvictLru(); the caller (KvCacheManager)
// decides whether its content is demoted to the next tier first.
// Allocation prefers contiguous runs: extending the run after a hint block, then
// the first free run long enough, then free blocks in ascending order.
// The pool holds ids only; the memory lives in a KvTierStorage.
// Thread rule: not thread-safe; owned by the engine thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/base/ids.h"
#include "common/base/status.h"
#include "common/kv_cache/block_hash.h"

namespace tandem::kv_cache {

class BlockPool {
 public:
  explicit BlockPool(int num_blocks);

  int num_blocks() const { return static_cast<int>(refcount_.size()); }
  int NumFree() const { return num_free_; }
  int NumCached() const { return num_cached_; }
  int NumReferenced() const { return num_blocks() - num_free_ - num_cached_; }

  // Takes n free blocks (never evicts cached ones), each with refcount 1, and
  // appends them to `out`. Tries hint+1, hint+2, ... first (kInvalidBlock: no hint).
  // Returns false and changes nothing when fewer than n blocks are free.
  bool AllocateFree(int n, BlockId hint, std::vector<BlockId>* out);
  // Turns the least recently used cached block into a free one, dropping its
  // hash. Returns (block, its former hash), or nullopt when nothing is cached.
  std::optional<std::pair<BlockId, BlockHash>> EvictLru();

  // One more reference; a cached block leaves the LRU. REQUIRES: not free.
  void Ref(BlockId block);
  // One reference less. At zero a hashed block becomes cached (most recently
  // used end of the LRU), an unhashed one free. REQUIRES: refcount > 0.
  void Unref(BlockId block);

  // The block holding `hash` (referenced or cached), or nullopt.
  std::optional<BlockId> Lookup(const BlockHash& hash) const;
  // Gives a referenced block its content hash. Returns false (nothing changes)
  // when the block already has a hash or another block holds this one.
  bool SetHash(BlockId block, const BlockHash& hash);

  int RefCount(BlockId block) const { return refcount_[Index(block)]; }
  bool IsFree(BlockId block) const;
  bool HasHash(BlockId block) const { return has_hash_[Index(block)] != 0; }
  // Appends the hash of every hashed block (referenced or cached), in no order.
  void AppendHashes(std::vector<BlockHash>* out) const;

  // Full consistency scan, O(num_blocks): states, counts, LRU, hash index.
  Status CheckConsistency() const;

 private:
  size_t Index(BlockId block) const;
  void SetFreeBit(BlockId block, bool free);
  // First block >= from whose free bit is `free`, or num_blocks().
  BlockId NextWithBit(BlockId from, bool free) const;
  void TakeRun(BlockId first, int count, std::vector<BlockId>* out);
  void LruPushBack(BlockId block);
  void LruRemove(BlockId block);

  std::vector<int32_t> refcount_;
  std::vector<uint8_t> has_hash_;
  std::vector<BlockHash> hash_;
  std::vector<uint64_t> free_bits_;  // bit set = free
  int num_free_ = 0;
  int num_cached_ = 0;
  // No block below this index is free (a search start, not exact).
  BlockId lowest_free_ = 0;
  // Intrusive LRU over block ids; index num_blocks() is the sentinel.
  std::vector<BlockId> lru_prev_;
  std::vector<BlockId> lru_next_;
  std::unordered_map<BlockHash, BlockId, BlockHashHasher> by_hash_;
};

}  // namespace tandem::kv_cache
