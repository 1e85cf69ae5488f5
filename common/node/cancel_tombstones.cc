#include "common/node/cancel_tombstones.h"

#include <algorithm>

namespace tandem::node {

void CancelTombstones::Bury(uint64_t id, Epoch epoch, Nanos now) {
  Tombstone& t = by_id_[id];
  t.epoch = std::max(t.epoch, epoch);
  t.at = now;
  order_.emplace_back(now, id);
  while (!order_.empty() && (order_.size() > capacity_ || now - order_.front().first > ttl_)) {
    const auto [at, old] = order_.front();
    order_.pop_front();
    // A later Bury of the same id renewed it: that entry further back owns it now.
    if (auto it = by_id_.find(old); it != by_id_.end() && it->second.at == at) by_id_.erase(it);
  }
}

bool CancelTombstones::Buried(uint64_t id, Epoch epoch, Nanos now) const {
  auto it = by_id_.find(id);
  return it != by_id_.end() && epoch <= it->second.epoch && now - it->second.at <= ttl_;
}

void CancelTombstones::Clear() {
  by_id_.clear();
  order_.clear();
}

}  // namespace tandem::node
