// ServingMetrics: the standard families of metric_names.h registered in one
// call, so the router and both node kinds export the same names and buckets.
// A process updates the ones that apply to it and leaves the rest at zero.
//
// Thread rule: the pointers are set once by Register and never change; the
// metrics themselves are thread-safe. Lifetime: valid while the registry lives.
#pragma once

#include "common/metrics/metrics_registry.h"

namespace tandem::metrics {

struct ServingMetrics {
  Family<Histogram>* time_to_first_token = nullptr;
  Family<Histogram>* inter_token_latency = nullptr;
  Family<Histogram>* e2e_request_latency = nullptr;
  Family<Histogram>* request_queue_time = nullptr;   // label: stage
  Family<Histogram>* request_prefill_time = nullptr;
  Family<Histogram>* request_decode_time = nullptr;
  Family<Histogram>* kv_transfer_seconds = nullptr;
  Family<Counter>* kv_transfer_bytes = nullptr;       // label: direction
  Family<Gauge>* num_requests_running = nullptr;
  Family<Gauge>* num_requests_waiting = nullptr;
  Family<Gauge>* kv_cache_usage = nullptr;            // label: tier
  Family<Gauge>* kv_blocks_referenced = nullptr;      // label: tier
  Family<Gauge>* kv_reservations_active = nullptr;
  Family<Gauge>* kv_staging_buffers_in_use = nullptr;
  Family<Counter>* prompt_tokens = nullptr;
  Family<Counter>* generation_tokens = nullptr;
  Family<Counter>* prefix_cache_queries = nullptr;
  Family<Counter>* prefix_cache_hits = nullptr;
  Family<Counter>* request_success = nullptr;         // label: finished_reason
  Family<Counter>* num_preemptions = nullptr;
  Family<Counter>* kv_reservations = nullptr;         // label: outcome
  Family<Counter>* requests_rejected = nullptr;       // label: reason

  // Registers every family of metric_names.h in `registry` (once per registry)
  // and creates the children of the fixed label sets, so every series renders
  // from the first scrape.
  static ServingMetrics Register(MetricsRegistry& registry);
};

}  // namespace tandem::metrics
