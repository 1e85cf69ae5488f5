#include "router/cluster/room_queue.h"

namespace tandem::router::cluster {

void RoomQueue::Wait(RequestId id, PriorityClass priority, uint64_t arrival, uint64_t timer_seq) {
  std::lock_guard<std::mutex> lock(mu_);
  const Key key{static_cast<uint8_t>(priority), arrival};
  by_id_[id] = key;
  queue_[key] = Waiter{.id = id, .timer_seq = timer_seq};
}

bool RoomQueue::Remove(RequestId id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return false;
  queue_.erase(it->second);
  by_id_.erase(it);
  return true;
}

bool RoomQueue::MayTry(RequestId id, PriorityClass priority, uint64_t arrival) {
  std::lock_guard<std::mutex> lock(mu_);
  const Key key{static_cast<uint8_t>(priority), arrival};
  auto self = queue_.find(key);
  if (self != queue_.end() && self->second.id != id) self = queue_.end();
  const bool woken = self != queue_.end() && self->second.woken;
  for (auto it = queue_.begin(); it != queue_.end() && it->first < key; ++it) {
    // Not woken: anyone ahead goes first. Woken: room freed for more than those trying.
    if (!woken || !it->second.trying) return false;
  }
  if (self != queue_.end()) {
    self->second.trying = true;
    self->second.woken = false;
  }
  return true;
}

std::optional<RoomQueue::Wake> RoomQueue::WakeFirst() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [key, waiter] : queue_) {
    if (waiter.trying) continue;
    waiter.trying = true;
    waiter.woken = true;
    return Wake{waiter.id, waiter.timer_seq};
  }
  return std::nullopt;
}

size_t RoomQueue::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size();
}

}  // namespace tandem::router::cluster
