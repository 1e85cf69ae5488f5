#include "common/kv_cache/cache_report_buffer.h"

#include <utility>

#include "common/base/check.h"

namespace tandem::kv_cache {

CacheReportBuffer::CacheReportBuffer(size_t max_pending) : max_pending_(max_pending) {}

void CacheReportBuffer::Publish(CacheEventLog& log, const KvCacheManager& kv) {
  CacheEvents events = DrainCacheEvents(log, kv);
  const size_t cache_blocks =
      static_cast<size_t>(kv.config().num_device_blocks) + static_cast<size_t>(kv.config().num_host_blocks);
  bool full = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    full = !events.reset && (full_requested_ || pending_.size() + events.size() > max_pending_ + cache_blocks);
  }
  // The engine thread is the only writer of the cache, so this list is current.
  if (full) events = CacheEvents{true, kv.CachedHashes(), {}};
  if (events.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (events.reset) full_requested_ = false;
  MergeLocked(std::move(events));
}

void CacheReportBuffer::MergeLocked(CacheEvents events) {
  if (events.reset) {
    reset_ = true;
    pending_.clear();
    for (const BlockHash& h : events.stored) pending_[h] = true;
    return;
  }
  // Same coalescing as CacheEventLog: an opposite event cancels a pending one.
  auto record = [this](const BlockHash& h, bool present) {
    auto [it, inserted] = pending_.try_emplace(h, present);
    if (!inserted && it->second != present) pending_.erase(it);
  };
  for (const BlockHash& h : events.stored) record(h, true);
  for (const BlockHash& h : events.removed) record(h, false);
}

void CacheReportBuffer::RequestFull() {
  std::lock_guard<std::mutex> lock(mu_);
  if (reset_) return;  // a full list is already waiting to be taken
  full_requested_ = true;
}

std::optional<CacheEvents> CacheReportBuffer::Take(size_t max_hashes) {
  TANDEM_CHECK_GT(max_hashes, 0u);
  std::lock_guard<std::mutex> lock(mu_);
  if (full_requested_ || (!reset_ && pending_.empty())) return std::nullopt;
  CacheEvents out;
  out.reset = reset_;
  reset_ = false;
  auto it = pending_.begin();
  for (size_t n = 0; n < max_hashes && it != pending_.end(); ++n) {
    (it->second ? out.stored : out.removed).push_back(it->first);
    it = pending_.erase(it);
  }
  return out;
}

}  // namespace tandem::kv_cache
