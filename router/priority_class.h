// Request priority: the API's integer `priority` (vLLM's convention: lower is
// more urgent, default 0) and the scheduling class it maps to. The class is what
// orders work: the router's admission queue, each node's queue and its preemption
// order (the nodes' scheduler::Priority, proto::RequestPriority on the wire).
// Thread rule: constants and pure functions.
#pragma once

#include <cstdint>
#include <limits>

namespace tandem::router {

// The range of the API's `priority` (and of an API key's priority settings).
inline constexpr int64_t kMinPriority = std::numeric_limits<int32_t>::min();
inline constexpr int64_t kMaxPriority = std::numeric_limits<int32_t>::max();

// Lower goes first; FCFS within a class.
enum class PriorityClass : uint8_t {
  kInteractive = 0,  // priority <= 0: the default
  kBatch = 1,        // priority > 0: queued behind interactive work, preempted before it
};
inline constexpr int kNumPriorityClasses = 2;

// The class of an API priority: <= 0 interactive, > 0 batch. Values within a
// class are not ordered further (the nodes' scheduler has these two classes).
inline PriorityClass PriorityClassOf(int64_t priority) {
  return priority > 0 ? PriorityClass::kBatch : PriorityClass::kInteractive;
}

}  // namespace tandem::router
