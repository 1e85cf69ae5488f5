// CacheReportBuffer: hands a node's prefix-cache events from the engine thread
// to the thread that builds heartbeats.
//
// The engine thread calls Publish() once per step: it drains the manager's
// CacheEventLog into the buffer (coalesced per hash, as in the log) and, when
// a full report was requested or the buffer grew past its bound, replaces the
// buffer with the complete set of present hashes (reset). Another thread calls
// Take(max) per heartbeat: a reset report may span several Takes (the first
// one carries reset = true, the rest come as stored hashes), which keeps every
// heartbeat small and still leaves the reader with the exact set.
// Thread rule: thread-safe (one mutex); Publish on the engine thread only.
#pragma once

#include <cstddef>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "common/kv_cache/cache_event_log.h"
#include "common/kv_cache/kv_cache_manager.h"

namespace tandem::kv_cache {

class CacheReportBuffer {
 public:
  // `max_pending`: hashes held beyond the cache's own size before the buffer
  // is replaced by a full list (when nobody takes reports for a long time).
  explicit CacheReportBuffer(size_t max_pending = kDefaultMaxPendingCacheEvents);

  // --- engine thread ---
  // Moves `log`'s events (the log of `kv`) into the buffer; builds a full list
  // when one is requested, when the log overflowed, or past the bound.
  void Publish(CacheEventLog& log, const KvCacheManager& kv);

  // --- any thread ---
  // The next report is a full list (reset = true); it is ready after the next Publish.
  void RequestFull();
  // Up to max_hashes (>= 1) changes, the oldest reset first. nullopt when there
  // is nothing to report or a requested full list is not published yet.
  std::optional<CacheEvents> Take(size_t max_hashes);

 private:
  void MergeLocked(CacheEvents events);

  const size_t max_pending_;
  std::mutex mu_;
  bool full_requested_ = false;  // guarded by mu_
  bool reset_ = false;           // guarded by mu_; the next Take carries reset = true
  // hash -> present now; only hashes whose state the reader does not know yet. Guarded by mu_.
  std::unordered_map<BlockHash, bool, BlockHashHasher> pending_;
};

}  // namespace tandem::kv_cache
