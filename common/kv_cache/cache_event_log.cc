#include "common/kv_cache/cache_event_log.h"

namespace tandem::kv_cache {
namespace {

// clear() zeroes the whole bucket array, which stays as large as the biggest
// burst; a drain runs every engine step, so a big table is dropped instead.
template <typename Map>
void ClearCheaply(Map* map) {
  if (map->bucket_count() > 1024) {
    Map().swap(*map);
  } else if (!map->empty()) {
    map->clear();
  }
}

}  // namespace

CacheEventLog::CacheEventLog(size_t max_pending) : max_pending_(max_pending) {}

void CacheEventLog::Record(const BlockHash& hash, bool present) {
  if (reset_needed_) return;  // the full list at the next drain covers it
  auto [it, inserted] = pending_.try_emplace(hash, present);
  if (!inserted) {
    // The opposite event undoes the pending one: the hash is back to its last drained state.
    if (it->second != present) pending_.erase(it);
    return;
  }
  if (pending_.size() > max_pending_) RequestReset();
}

void CacheEventLog::RequestReset() {
  reset_needed_ = true;
  ClearCheaply(&pending_);
}

CacheEvents CacheEventLog::Take() {
  CacheEvents out;
  if (reset_needed_) {
    out.reset = true;
    reset_needed_ = false;
    return out;
  }
  if (pending_.empty()) return out;
  for (const auto& [hash, present] : pending_) (present ? out.stored : out.removed).push_back(hash);
  ClearCheaply(&pending_);
  return out;
}

}  // namespace tandem::kv_cache
