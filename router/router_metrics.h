// RouterMetrics: the families the router owns on /metrics (docs/metrics.md):
// what clients see — router queue time, TTFT, inter-token latency, time per
// output token, e2e latency, tokens per request, running/waiting requests,
// prompt and generation tokens, finished requests by reason, and backpressure
// rejections. Every series carries model_name (the served model name).
// Every method is a no-op without a registry (tests, metrics off).
//
// Thread rule: construct once; the methods are thread-safe (the metrics are atomics).
#pragma once

#include <cstdint>
#include <string>

#include "common/metrics/metrics_registry.h"

namespace tandem::router {

class RouterMetrics {
 public:
  // Registers the router's families in `registry` (once per registry); null: no metrics.
  // max_model_len bounds the tokens-per-request buckets.
  RouterMetrics(metrics::MetricsRegistry* registry, const std::string& model_name, int32_t max_model_len);

  // reason: "queue_full" (429 at once), "overloaded" (429 after waiting),
  // "no_nodes" (503, not ready), "draining" (503, the router is draining).
  void OnRejected(const char* reason) const;
  void OnAdmitted(double queue_seconds) const;
  void SetLoad(int32_t running, int32_t waiting) const;
  void OnFirstToken(double seconds_since_arrival) const;
  // `count` tokens arrived `seconds` after the previous batch of the same choice.
  void OnTokens(double seconds, int32_t count) const;
  // finished_reason: "stop", "length", "abort", "error".
  void OnChoiceFinished(const char* finished_reason) const;
  // A request answered in full: its usage, arrival to last token (e2e) and
  // first to last token (decode) over its `num_choices` parallel choices.
  void OnRequestFinished(int64_t prompt_tokens, int64_t completion_tokens, int32_t num_choices, double e2e_seconds,
                         double decode_seconds) const;

 private:
  std::string model_name_;
  metrics::Histogram* ttft_ = nullptr;
  metrics::Histogram* itl_ = nullptr;
  metrics::Histogram* tpot_ = nullptr;          // vLLM's older per-token name: the ITL samples again
  metrics::Histogram* request_tpot_ = nullptr;  // per request: decode time / (tokens per choice - 1)
  metrics::Histogram* e2e_ = nullptr;
  metrics::Histogram* queue_ = nullptr;  // stage="router"
  metrics::Histogram* request_prompt_tokens_ = nullptr;
  metrics::Histogram* request_generation_tokens_ = nullptr;
  metrics::Gauge* running_ = nullptr;
  metrics::Gauge* waiting_ = nullptr;
  metrics::Counter* prompt_tokens_ = nullptr;
  metrics::Counter* generation_tokens_ = nullptr;
  metrics::Family<metrics::Counter>* success_ = nullptr;   // model_name, finished_reason
  metrics::Family<metrics::Counter>* rejected_ = nullptr;  // model_name, reason
};

}  // namespace tandem::router
