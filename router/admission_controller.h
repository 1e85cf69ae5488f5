// AdmissionController: bounds the inference requests the router works on.
//
// At most `max_running` hold a slot; up to `max_queued` more wait, one queue
// per priority class: a freed slot goes to the oldest waiter of the most urgent
// class that has one (interactive before batch, FIFO within a class). Anything
// beyond `max_queued` waiters in all is rejected at once (the caller answers 429).
// Thread rule: thread-safe. `on_admitted` callbacks run on the thread that
// calls Release(), outside the lock; they should only post work elsewhere.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>

#include "router/priority_class.h"

namespace tandem::router {

class AdmissionController {
 public:
  using Ticket = uint64_t;
  enum class Outcome { kAdmitted, kQueued, kRejected };

  AdmissionController(int32_t max_running, int32_t max_queued);

  // kAdmitted: the caller holds a slot now (on_admitted is not called).
  // kQueued: *ticket identifies the wait; on_admitted runs once a slot is
  // handed over, unless CancelQueued(ticket) removes it first.
  // kRejected: nothing held. `priority` places a queued caller.
  Outcome Acquire(PriorityClass priority, std::function<void()> on_admitted, Ticket* ticket);
  // Returns a held slot; hands it to the next waiter (see the class comment) if any.
  void Release();
  // Removes a waiter. True if it was still queued (it will never be admitted);
  // false if it was already admitted (its on_admitted has run or is running,
  // and the caller then owns a slot to Release()).
  bool CancelQueued(Ticket ticket);

  int32_t running() const;
  int32_t queued() const;
  // Calls `publish(running, queued)` with the counts as they are, under the controller's
  // lock: gauges set through it end at the last counts (a snapshot taken outside the lock
  // and set late could leave a gauge at a stale value after every call is gone).
  void Publish(const std::function<void(int32_t running, int32_t queued)>& publish) const;

 private:
  struct Waiter {
    Ticket ticket;
    std::function<void()> on_admitted;
  };
  const int32_t max_running_;
  const int32_t max_queued_;
  mutable std::mutex mu_;
  int32_t running_ = 0;                             // guarded by mu_
  int32_t num_queued_ = 0;                          // guarded by mu_; waiters in all queues
  std::deque<Waiter> queues_[kNumPriorityClasses];  // guarded by mu_; by class, each FIFO
  Ticket next_ticket_ = 1;                          // guarded by mu_
};

}  // namespace tandem::router
