// CancelTombstones: what a node remembers of cancels that came before their request.
//
// The router sends a request (Reserve, PrefillRequest) and may cancel it from another
// thread a moment later; the Cancel can reach the node first, or while the request
// waits behind an older epoch of its id. Without a record the node would drop the
// Cancel and then run a request nobody waits for. A tombstone (id, epoch) makes the
// node refuse that id at that epoch or older when it arrives.
//
// Bounded: at most `capacity` tombstones, each for `ttl` (the router gives up on a
// node call long before). Not thread-safe: the node's own mutex guards it.
#pragma once

#include <cstddef>
#include <deque>
#include <unordered_map>
#include <utility>

#include "common/base/clock.h"
#include "common/base/ids.h"

namespace tandem::node {

class CancelTombstones {
 public:
  static constexpr size_t kDefaultCapacity = 1 << 16;
  static constexpr Nanos kDefaultTtl = 60'000'000'000;  // 60 s

  explicit CancelTombstones(size_t capacity = kDefaultCapacity, Nanos ttl = kDefaultTtl)
      : capacity_(capacity), ttl_(ttl) {}

  // A cancel of `id` at `epoch` found no request of that epoch (it may still come).
  void Bury(uint64_t id, Epoch epoch, Nanos now);
  // True when a cancel of `id` at `epoch` or newer came before, within the ttl.
  bool Buried(uint64_t id, Epoch epoch, Nanos now) const;
  // Forgets all (a new router reuses request ids).
  void Clear();
  size_t size() const { return by_id_.size(); }

 private:
  struct Tombstone {
    Epoch epoch = 0;
    Nanos at = 0;
  };
  size_t capacity_;
  Nanos ttl_;
  std::unordered_map<uint64_t, Tombstone> by_id_;
  std::deque<std::pair<Nanos, uint64_t>> order_;  // (buried at, id), oldest first
};

}  // namespace tandem::node
