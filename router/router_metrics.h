// RouterMetrics: what the router records into the shared serving metrics
// (common/metrics/metric_names.h): router queue time, TTFT, inter-token
// latency, e2e latency, running/waiting requests, prompt and generation
// tokens, finished requests by reason, and backpressure rejections.
// Every method is a no-op without a ServingMetrics (tests, metrics off).
//
// Thread rule: thread-safe (the metrics are atomics).
#pragma once

#include <cstdint>

#include "common/metrics/serving_metrics.h"

namespace tandem::router {

class RouterMetrics {
 public:
  explicit RouterMetrics(metrics::ServingMetrics* metrics) : m_(metrics) {}

  // reason: "queue_full" (429 at once), "overloaded" (429 after waiting),
  // "no_nodes" (503, not ready).
  void OnRejected(const char* reason) const;
  void OnAdmitted(double queue_seconds) const;
  void SetLoad(int32_t running, int32_t waiting) const;
  void OnFirstToken(double seconds_since_arrival) const;
  // `count` tokens arrived `seconds` after the previous batch of the same choice.
  void OnTokens(double seconds, int32_t count) const;
  // finished_reason: "stop", "length", "abort", "error".
  void OnChoiceFinished(const char* finished_reason) const;
  void OnRequestFinished(int64_t prompt_tokens, int64_t completion_tokens,
                         double e2e_seconds) const;

 private:
  metrics::ServingMetrics* const m_;
};

}  // namespace tandem::router
