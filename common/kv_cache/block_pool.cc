#include "common/kv_cache/block_pool.h"

#include <algorithm>
#include <bit>

#include <fmt/format.h>

#include "common/base/check.h"

namespace tandem::kv_cache {

BlockPool::BlockPool(int num_blocks)
    : refcount_(static_cast<size_t>(num_blocks), 0),
      has_hash_(static_cast<size_t>(num_blocks), 0),
      hash_(static_cast<size_t>(num_blocks)),
      free_bits_((static_cast<size_t>(num_blocks) + 63) / 64, 0),
      num_free_(num_blocks),
      lru_prev_(static_cast<size_t>(num_blocks) + 1, num_blocks),
      lru_next_(static_cast<size_t>(num_blocks) + 1, num_blocks) {
  TANDEM_CHECK_GE(num_blocks, 0);
  for (BlockId b = 0; b < num_blocks; ++b) SetFreeBit(b, true);
  by_hash_.reserve(static_cast<size_t>(num_blocks));
}

size_t BlockPool::Index(BlockId block) const {
  TANDEM_CHECK(block >= 0 && block < num_blocks()) << "block " << block << " out of range";
  return static_cast<size_t>(block);
}

bool BlockPool::IsFree(BlockId block) const {
  size_t i = Index(block);
  return (free_bits_[i / 64] >> (i % 64)) & 1u;
}

void BlockPool::SetFreeBit(BlockId block, bool free) {
  uint64_t mask = uint64_t{1} << (block % 64);
  if (free) {
    free_bits_[block / 64] |= mask;
    lowest_free_ = std::min(lowest_free_, block);
  } else {
    free_bits_[block / 64] &= ~mask;
  }
}

BlockId BlockPool::NextWithBit(BlockId from, bool free) const {
  const int n = num_blocks();
  if (from >= n) return n;
  size_t word = static_cast<size_t>(from) / 64;
  uint64_t bits = free ? free_bits_[word] : ~free_bits_[word];
  bits &= ~uint64_t{0} << (from % 64);
  while (bits == 0) {
    if (++word >= free_bits_.size()) return n;
    bits = free ? free_bits_[word] : ~free_bits_[word];
  }
  BlockId found = static_cast<BlockId>(word * 64 + std::countr_zero(bits));
  return found < n ? found : n;
}

void BlockPool::TakeRun(BlockId first, int count, std::vector<BlockId>* out) {
  for (BlockId b = first; b < first + count; ++b) {
    TANDEM_CHECK(IsFree(b) && refcount_[b] == 0) << "allocating non-free block " << b;
    SetFreeBit(b, false);
    refcount_[b] = 1;
    out->push_back(b);
  }
  num_free_ -= count;
}

bool BlockPool::AllocateFree(int n, BlockId hint, std::vector<BlockId>* out) {
  TANDEM_CHECK_GE(n, 0);
  if (n > num_free_) return false;
  int need = n;
  // 1. Extend the caller's last run.
  if (hint != kInvalidBlock && hint + 1 < num_blocks()) {
    BlockId end = std::min<BlockId>(NextWithBit(hint + 1, false), hint + 1 + need);
    int len = end - (hint + 1);
    if (len > 0) {
      TakeRun(hint + 1, len, out);
      need -= len;
    }
  }
  if (need == 0) return true;
  // 2. First free run that holds the rest in one piece.
  lowest_free_ = NextWithBit(lowest_free_, true);
  for (BlockId start = lowest_free_; start < num_blocks();) {
    BlockId end = NextWithBit(start, false);
    if (end - start >= need) {
      TakeRun(start, need, out);
      return true;
    }
    start = NextWithBit(end, true);
  }
  // 3. Fragmented: free runs in ascending order.
  for (BlockId start = lowest_free_; need > 0 && start < num_blocks();) {
    BlockId end = NextWithBit(start, false);
    int len = std::min(need, end - start);
    TakeRun(start, len, out);
    need -= len;
    start = NextWithBit(start + len, true);
  }
  TANDEM_CHECK_EQ(need, 0) << "free count out of sync";
  return true;
}

std::optional<std::pair<BlockId, BlockHash>> BlockPool::EvictLru() {
  const BlockId sentinel = num_blocks();
  BlockId victim = lru_next_[sentinel];
  if (victim == sentinel) return std::nullopt;
  TANDEM_CHECK(refcount_[victim] == 0 && has_hash_[victim]) << "bad LRU entry " << victim;
  LruRemove(victim);
  BlockHash hash = hash_[victim];
  by_hash_.erase(hash);
  has_hash_[victim] = 0;
  --num_cached_;
  SetFreeBit(victim, true);
  ++num_free_;
  return std::make_pair(victim, hash);
}

void BlockPool::Ref(BlockId block) {
  size_t i = Index(block);
  TANDEM_CHECK(!IsFree(block)) << "Ref of free block " << block;
  if (refcount_[i] == 0) {
    TANDEM_CHECK(has_hash_[i]) << "unreferenced non-free block without hash " << block;
    LruRemove(block);
    --num_cached_;
  }
  ++refcount_[i];
}

void BlockPool::Unref(BlockId block) {
  size_t i = Index(block);
  TANDEM_CHECK_GT(refcount_[i], 0) << "double free of block " << block;
  if (--refcount_[i] > 0) return;
  if (has_hash_[i]) {
    LruPushBack(block);
    ++num_cached_;
  } else {
    SetFreeBit(block, true);
    ++num_free_;
  }
}

std::optional<BlockId> BlockPool::Lookup(const BlockHash& hash) const {
  auto it = by_hash_.find(hash);
  if (it == by_hash_.end()) return std::nullopt;
  return it->second;
}

bool BlockPool::SetHash(BlockId block, const BlockHash& hash) {
  size_t i = Index(block);
  TANDEM_CHECK_GT(refcount_[i], 0) << "SetHash on unreferenced block " << block;
  if (has_hash_[i]) return false;
  if (!by_hash_.emplace(hash, block).second) return false;
  hash_[i] = hash;
  has_hash_[i] = 1;
  return true;
}

void BlockPool::AppendHashes(std::vector<BlockHash>* out) const {
  for (const auto& [hash, block] : by_hash_) out->push_back(hash);
}

void BlockPool::LruPushBack(BlockId block) {
  const BlockId sentinel = num_blocks();
  BlockId last = lru_prev_[sentinel];
  lru_prev_[block] = last;
  lru_next_[block] = sentinel;
  lru_next_[last] = block;
  lru_prev_[sentinel] = block;
}

void BlockPool::LruRemove(BlockId block) {
  BlockId prev = lru_prev_[block];
  BlockId next = lru_next_[block];
  lru_next_[prev] = next;
  lru_prev_[next] = prev;
  lru_prev_[block] = lru_next_[block] = num_blocks();
}

Status BlockPool::CheckConsistency() const {
  const int n = num_blocks();
  int free = 0, cached = 0, hashed = 0;
  for (BlockId b = 0; b < n; ++b) {
    if (refcount_[b] < 0) return InternalError(fmt::format("block {} refcount {}", b, refcount_[b]));
    bool is_free = IsFree(b);
    if (is_free && (refcount_[b] != 0 || has_hash_[b])) {
      return InternalError(fmt::format("free block {} has refs or hash", b));
    }
    if (!is_free && refcount_[b] == 0 && !has_hash_[b]) {
      return InternalError(fmt::format("block {} leaked: no refs, no hash, not free", b));
    }
    free += is_free;
    cached += !is_free && refcount_[b] == 0;
    if (has_hash_[b]) {
      ++hashed;
      auto it = by_hash_.find(hash_[b]);
      if (it == by_hash_.end() || it->second != b) {
        return InternalError(fmt::format("hash index misses block {}", b));
      }
    }
  }
  int lru_len = 0;
  for (BlockId b = lru_next_[n]; b != n; b = lru_next_[b]) {
    if (++lru_len > n || refcount_[b] != 0 || !has_hash_[b]) {
      return InternalError(fmt::format("bad LRU entry {}", b));
    }
  }
  if (free != num_free_ || cached != num_cached_ || lru_len != cached || hashed != static_cast<int>(by_hash_.size())) {
    return InternalError(fmt::format("counts: free {} vs {}, cached {} vs {}, lru {}, hashed {} vs {}", free, num_free_,
                                     cached, num_cached_, lru_len, hashed, by_hash_.size()));
  }
  return Status::Ok();
}

}  // namespace tandem::kv_cache
