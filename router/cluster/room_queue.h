// RoomQueue: the requests waiting at the router for room on a decode node — refused for
// lack of it (no batch slot, KV blocks or queue space: ResourceExhausted), or held back
// behind such requests — in the order room goes to them: the more urgent class first,
// then arrival. A request keeps its place until it has room (its Reserve or local
// PrefillRequest accepted), so while one tries, those behind it wait:
//   - a request may try when nobody waits ahead of it (the first polls on its backoff
//     timer, for room freed where the router cannot see it);
//   - a request that ends may have freed room, and one that waited and got room shows
//     there may be more: the first waiter not trying yet is woken at once (WakeFirst),
//     and may try while those ahead of it are all trying too (a decode step that
//     finishes several requests wakes as many).
// Thread rule: thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <utility>

#include "common/base/ids.h"
#include "router/priority_class.h"

namespace tandem::router::cluster {

class RoomQueue {
 public:
  // Queues `id` at (priority, arrival), or puts it back to waiting there after a refused
  // try. `timer_seq`: what waking it fires (its Handoff's last kArmTimer).
  void Wait(RequestId id, PriorityClass priority, uint64_t arrival, uint64_t timer_seq);
  // It has room, ended, or waits for something else. False when it was not queued.
  bool Remove(RequestId id);
  // Whether `id` (queued or not) may try for room now (see the class comment); if so and
  // it is queued, it is marked trying.
  bool MayTry(RequestId id, PriorityClass priority, uint64_t arrival);
  struct Wake {
    RequestId id = 0;
    uint64_t timer_seq = 0;
  };
  // The first waiter not trying yet, marked trying and woken; nullopt when there is none.
  std::optional<Wake> WakeFirst();
  size_t size() const;

 private:
  using Key = std::pair<uint8_t, uint64_t>;  // (class, arrival): the order room goes in
  struct Waiter {
    RequestId id = 0;
    uint64_t timer_seq = 0;
    bool trying = false;  // its placement or node call is under way
    bool woken = false;   // WakeFirst chose it; MayTry has not seen it since
  };
  mutable std::mutex mu_;
  std::map<Key, Waiter> queue_;     // guarded by mu_
  std::map<RequestId, Key> by_id_;  // guarded by mu_
};

}  // namespace tandem::router::cluster
