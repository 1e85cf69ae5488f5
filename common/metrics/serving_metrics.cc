#include "common/metrics/serving_metrics.h"

#include "common/metrics/metric_names.h"

namespace tandem::metrics {

std::vector<double> TimeToFirstTokenBuckets() {
  return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25, 0.5,   0.75,
          1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
}

std::vector<double> InterTokenLatencyBuckets() {
  return {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,  0.4, 0.5,
          0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
}

std::vector<double> RequestLatencyBuckets() {
  return {0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
          30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
}

std::vector<double> TransferSecondsBuckets() {
  return {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0};
}

ServingMetrics ServingMetrics::Register(MetricsRegistry& r) {
  ServingMetrics m;
  m.time_to_first_token = &r.AddHistogram(kTimeToFirstTokenSeconds,
      "Time from request arrival to its first token, seconds.", TimeToFirstTokenBuckets());
  m.inter_token_latency = &r.AddHistogram(kInterTokenLatencySeconds,
      "Time between consecutive output tokens of a request, seconds.", InterTokenLatencyBuckets());
  m.e2e_request_latency = &r.AddHistogram(kE2eRequestLatencySeconds,
      "Time from request arrival to its last token, seconds.", RequestLatencyBuckets());
  m.request_queue_time = &r.AddHistogram(kRequestQueueTimeSeconds,
      "Time a request waited in a queue, seconds, by stage.", RequestLatencyBuckets(), {"stage"});
  m.request_prefill_time = &r.AddHistogram(kRequestPrefillTimeSeconds,
      "Prefill compute time of a request, seconds.", RequestLatencyBuckets());
  m.request_decode_time = &r.AddHistogram(kRequestDecodeTimeSeconds,
      "Decode time of a request, first to last token, seconds.", RequestLatencyBuckets());
  m.kv_transfer_seconds = &r.AddHistogram(kKvTransferSeconds,
      "Time to move one request's KV blocks from prefill to decode, seconds.", TransferSecondsBuckets());
  m.kv_transfer_bytes = &r.AddCounter(kKvTransferBytesTotal,
      "KV cache bytes moved between nodes, by direction.", {"direction"});
  m.num_requests_running = &r.AddGauge(kNumRequestsRunning, "Requests running now.");
  m.num_requests_waiting = &r.AddGauge(kNumRequestsWaiting, "Requests waiting to run now.");
  m.kv_cache_usage = &r.AddGauge(kKvCacheUsageRatio,
      "Fraction of KV blocks in use (0..1), by tier.", {"tier"});
  m.kv_blocks_referenced = &r.AddGauge(kKvBlocksReferenced,
      "KV blocks referenced by requests (0 when idle), by tier.", {"tier"});
  m.kv_reservations_active = &r.AddGauge(kKvReservationsActive,
      "KV reservations (leases) held for incoming transfers.");
  m.kv_staging_buffers_in_use = &r.AddGauge(kKvStagingBuffersInUse,
      "Transfer staging buffers in use.");
  m.prompt_tokens = &r.AddCounter(kPromptTokensTotal, "Prompt tokens processed.");
  m.generation_tokens = &r.AddCounter(kGenerationTokensTotal, "Output tokens generated.");
  m.prefix_cache_queries = &r.AddCounter(kPrefixCacheQueriesTotal,
      "Prompt tokens looked up in the prefix cache.");
  m.prefix_cache_hits = &r.AddCounter(kPrefixCacheHitsTotal,
      "Prompt tokens found in the prefix cache.");
  m.request_success = &r.AddCounter(kRequestSuccessTotal,
      "Requests finished, by finish reason.", {"finished_reason"});
  m.num_preemptions = &r.AddCounter(kNumPreemptionsTotal, "Requests preempted.");
  m.kv_reservations = &r.AddCounter(kKvReservationsTotal,
      "KV reservation outcomes.", {"outcome"});
  m.requests_rejected = &r.AddCounter(kRequestsRejectedTotal,
      "Requests refused by admission control, by reason.", {"reason"});

  for (const char* stage : {"router", "prefill", "decode"}) m.request_queue_time->WithLabels({stage});
  for (const char* direction : {"sent", "received"}) m.kv_transfer_bytes->WithLabels({direction});
  for (const char* tier : {"gpu", "host"}) {
    m.kv_cache_usage->WithLabels({tier});
    m.kv_blocks_referenced->WithLabels({tier});
  }
  for (const char* reason : {"stop", "length", "abort", "error"}) m.request_success->WithLabels({reason});
  for (const char* outcome : {"granted", "refused", "expired"}) m.kv_reservations->WithLabels({outcome});
  for (const char* reason : {"queue_full", "overloaded", "no_nodes"}) m.requests_rejected->WithLabels({reason});
  return m;
}

}  // namespace tandem::metrics
