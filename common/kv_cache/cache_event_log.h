// CacheEventLog: which prefix-cache block hashes became reusable ("stored")
// or stopped being reusable ("removed") on one node, so the router can place
// requests where their prefix is cached (docs/protocol.md, Heartbeat).
//
// KvCacheManager records a hash as stored when it becomes present in either
// tier and as removed when it leaves the last tier holding it, so the events
// of one hash alternate. Pending events are coalesced per hash: a hash stored
// and removed again between two drains leaves nothing behind. Bounded: past
// max_pending pending hashes the events are dropped and a reset is needed:
// the next drain (DrainCacheEvents in kv_cache_manager.h) is the full list of
// present hashes with reset = true.
// Thread rule: not thread-safe; engine thread only (like KvCacheManager).
#pragma once

#include <cstddef>
#include <unordered_map>
#include <vector>

#include "common/kv_cache/block_hash.h"

namespace tandem::kv_cache {

// Default bound of a CacheEventLog: far above one engine step's changes.
inline constexpr size_t kDefaultMaxPendingCacheEvents = size_t{1} << 16;

// One drain of cache events.
struct CacheEvents {
  // True: `stored` is the complete set of present hashes; it replaces whatever
  // the reader knew (and `removed` is empty).
  bool reset = false;
  std::vector<BlockHash> stored;   // present now (became present since the last drain)
  std::vector<BlockHash> removed;  // absent now (were present at the last drain)

  bool empty() const { return !reset && stored.empty() && removed.empty(); }
  size_t size() const { return stored.size() + removed.size(); }
};

class CacheEventLog {
 public:
  explicit CacheEventLog(size_t max_pending = kDefaultMaxPendingCacheEvents);

  void RecordStored(const BlockHash& hash) { Record(hash, true); }
  void RecordRemoved(const BlockHash& hash) { Record(hash, false); }
  // Drops what is pending and asks for a full list at the next drain.
  void RequestReset();

  // Events were lost (overflow or RequestReset): the next drain must be a full list.
  bool reset_needed() const { return reset_needed_; }
  size_t num_pending() const { return pending_.size(); }

  // Moves out the pending events and clears the log. When reset_needed(), the
  // result is {reset = true, empty lists}: the caller fills `stored` with the
  // full set (DrainCacheEvents does).
  CacheEvents Take();

 private:
  void Record(const BlockHash& hash, bool present);

  size_t max_pending_;
  bool reset_needed_ = false;
  // hash -> present now; an entry exists only while the hash differs from the last drain.
  std::unordered_map<BlockHash, bool, BlockHashHasher> pending_;
};

}  // namespace tandem::kv_cache
