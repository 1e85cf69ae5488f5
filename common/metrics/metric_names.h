// The metric names every Tandem process exports, with vLLM-compatible meaning
// where vLLM has the metric, so existing dashboards map one to one.
//
// Prefix: "tandem_" (an underscore, not vLLM's "vllm:" colon): colons are
// reserved for recording rules and `promtool check metrics` rejects them.
// A dashboard built for vLLM needs only `s/vllm:/tandem_/`.
//
// | name                                   | type      | labels          | who      | vLLM equivalent                    |
// |----------------------------------------|-----------|-----------------|----------|------------------------------------|
// | tandem_time_to_first_token_seconds     | histogram |                 | router   | vllm:time_to_first_token_seconds   |
// | tandem_inter_token_latency_seconds     | histogram |                 | router   | vllm:inter_token_latency_seconds   |
// | tandem_e2e_request_latency_seconds     | histogram |                 | router   | vllm:e2e_request_latency_seconds   |
// | tandem_request_queue_time_seconds      | histogram | stage           | all      | vllm:request_queue_time_seconds    |
// | tandem_request_prefill_time_seconds    | histogram |                 | prefill* | vllm:request_prefill_time_seconds  |
// | tandem_request_decode_time_seconds     | histogram |                 | decode   | vllm:request_decode_time_seconds   |
// | tandem_kv_transfer_seconds             | histogram |                 | nodes    | (none) one request's KV handoff    |
// | tandem_kv_transfer_bytes_total         | counter   | direction       | nodes    | (none)                             |
// | tandem_num_requests_running            | gauge     |                 | all      | vllm:num_requests_running          |
// | tandem_num_requests_waiting            | gauge     |                 | all      | vllm:num_requests_waiting          |
// | tandem_kv_cache_usage_ratio            | gauge     | tier            | nodes    | vllm:kv_cache_usage_perc (0..1)    |
// | tandem_kv_blocks_referenced            | gauge     | tier            | nodes    | (none) KV-clean check: 0 when idle |
// | tandem_kv_reservations_active          | gauge     |                 | decode   | (none) KV-clean check: 0 when idle |
// | tandem_kv_staging_buffers_in_use       | gauge     |                 | nodes    | (none) KV-clean check: 0 when idle |
// | tandem_prompt_tokens_total             | counter   |                 | all      | vllm:prompt_tokens_total           |
// | tandem_generation_tokens_total         | counter   |                 | all      | vllm:generation_tokens_total       |
// | tandem_prefix_cache_queries_total      | counter   |                 | nodes    | vllm:prefix_cache_queries_total    |
// | tandem_prefix_cache_hits_total         | counter   |                 | nodes    | vllm:prefix_cache_hits_total       |
// | tandem_request_success_total           | counter   | finished_reason | router   | vllm:request_success_total         |
// | tandem_num_preemptions_total           | counter   |                 | decode   | vllm:num_preemptions_total         |
// | tandem_kv_reservations_total           | counter   | outcome         | decode   | (none)                             |
// | tandem_requests_rejected_total         | counter   | reason          | router   | (none) 429/503 backpressure        |
// | tandem_router_nodes                    | gauge     | role            | router   | (none) live decode/prefill/draining|
// | tandem_kv_transfer_sessions            | gauge     |                 | nodes    | (none) KV-clean check: 0 when idle |
// | tandem_kv_transfer_blocks_in_use       | gauge     |                 | nodes    | (none) landing/staging blocks held |
// | tandem_node_ready                      | gauge     |                 | nodes    | (none) 1 when registered, not draining |
// | tandem_router_node_cached_blocks       | gauge     | node            | router   | (none) prefix-cache blocks known per node |
//
// (*) decode too, when it prefills locally. Units: seconds and bytes; ratios in
// 0..1; token counts are counts of tokens (prefix cache queries/hits count
// prompt tokens, as vLLM does).
//
// Label values (fixed sets, never user input):
//   stage:           "router", "prefill", "decode"
//   direction:       "sent", "received"
//   tier:            "gpu", "host"
//   finished_reason: "stop", "length", "abort", "error"
//   outcome:         "granted", "refused", "expired"
//   reason:          "queue_full", "overloaded", "no_nodes"
//   node:            a registered node's name (operator config; "node-<id>" when unnamed)
#pragma once

#include <vector>

namespace tandem::metrics {

inline constexpr char kTimeToFirstTokenSeconds[] = "tandem_time_to_first_token_seconds";
inline constexpr char kInterTokenLatencySeconds[] = "tandem_inter_token_latency_seconds";
inline constexpr char kE2eRequestLatencySeconds[] = "tandem_e2e_request_latency_seconds";
inline constexpr char kRequestQueueTimeSeconds[] = "tandem_request_queue_time_seconds";
inline constexpr char kRequestPrefillTimeSeconds[] = "tandem_request_prefill_time_seconds";
inline constexpr char kRequestDecodeTimeSeconds[] = "tandem_request_decode_time_seconds";
inline constexpr char kKvTransferSeconds[] = "tandem_kv_transfer_seconds";
inline constexpr char kKvTransferBytesTotal[] = "tandem_kv_transfer_bytes_total";
inline constexpr char kNumRequestsRunning[] = "tandem_num_requests_running";
inline constexpr char kNumRequestsWaiting[] = "tandem_num_requests_waiting";
inline constexpr char kKvCacheUsageRatio[] = "tandem_kv_cache_usage_ratio";
inline constexpr char kKvBlocksReferenced[] = "tandem_kv_blocks_referenced";
inline constexpr char kKvReservationsActive[] = "tandem_kv_reservations_active";
inline constexpr char kKvStagingBuffersInUse[] = "tandem_kv_staging_buffers_in_use";
inline constexpr char kPromptTokensTotal[] = "tandem_prompt_tokens_total";
inline constexpr char kGenerationTokensTotal[] = "tandem_generation_tokens_total";
inline constexpr char kPrefixCacheQueriesTotal[] = "tandem_prefix_cache_queries_total";
inline constexpr char kPrefixCacheHitsTotal[] = "tandem_prefix_cache_hits_total";
inline constexpr char kRequestSuccessTotal[] = "tandem_request_success_total";
inline constexpr char kNumPreemptionsTotal[] = "tandem_num_preemptions_total";
inline constexpr char kKvReservationsTotal[] = "tandem_kv_reservations_total";
inline constexpr char kRequestsRejectedTotal[] = "tandem_requests_rejected_total";
inline constexpr char kRouterNodeCachedBlocks[] = "tandem_router_node_cached_blocks";

// Bucket bounds, seconds (the same spread vLLM uses, so quantiles compare).
std::vector<double> TimeToFirstTokenBuckets();
std::vector<double> InterTokenLatencyBuckets();
// E2E, queue, prefill and decode times.
std::vector<double> RequestLatencyBuckets();
// One request's KV transfer.
std::vector<double> TransferSecondsBuckets();

}  // namespace tandem::metrics
