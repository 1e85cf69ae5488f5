// The metric names Tandem processes export, and their histogram buckets.
// docs/metrics.md is the table: each family's meaning, type, labels, the
// process that exports it, and its vLLM equivalent.
//
// Prefix: "tandem_" (an underscore, not vLLM's "vllm:" colon): colons are
// reserved for recording rules and `promtool check metrics` rejects them.
// A dashboard built for vLLM needs `s/vllm:/tandem_/`, plus
// vllm:iteration_tokens_total -> tandem_iteration_tokens (promtool rejects
// `_total` on a histogram).
//
// Label values are fixed sets from code, never user input, except model_name
// and cache_config_info's values, which come from the operator's config.
#pragma once

#include <vector>

namespace tandem::metrics {

// Router: what clients see.
inline constexpr char kTimeToFirstTokenSeconds[] = "tandem_time_to_first_token_seconds";
inline constexpr char kInterTokenLatencySeconds[] = "tandem_inter_token_latency_seconds";
inline constexpr char kTimePerOutputTokenSeconds[] = "tandem_time_per_output_token_seconds";
inline constexpr char kRequestTimePerOutputTokenSeconds[] = "tandem_request_time_per_output_token_seconds";
inline constexpr char kE2eRequestLatencySeconds[] = "tandem_e2e_request_latency_seconds";
inline constexpr char kRequestPromptTokens[] = "tandem_request_prompt_tokens";
inline constexpr char kRequestGenerationTokens[] = "tandem_request_generation_tokens";
inline constexpr char kRequestSuccessTotal[] = "tandem_request_success_total";
inline constexpr char kRequestsRejectedTotal[] = "tandem_requests_rejected_total";
inline constexpr char kRouterNodeCachedBlocks[] = "tandem_router_node_cached_blocks";
inline constexpr char kRouterPoolQueuedRequests[] = "tandem_router_pool_queued_requests";
inline constexpr char kRouterPoolInflightPrefillTokens[] = "tandem_router_pool_inflight_prefill_tokens";
inline constexpr char kRouterPoolBatchOccupancy[] = "tandem_router_pool_batch_occupancy";
inline constexpr char kRouterPoolKvHeadroom[] = "tandem_router_pool_kv_headroom";
inline constexpr char kRouterPoolWaitingForRoom[] = "tandem_router_pool_waiting_for_room";

// Router and nodes (each for its own stage or work).
inline constexpr char kRequestQueueTimeSeconds[] = "tandem_request_queue_time_seconds";
inline constexpr char kNumRequestsRunning[] = "tandem_num_requests_running";
inline constexpr char kNumRequestsWaiting[] = "tandem_num_requests_waiting";
inline constexpr char kPromptTokensTotal[] = "tandem_prompt_tokens_total";
inline constexpr char kGenerationTokensTotal[] = "tandem_generation_tokens_total";

// Nodes: the engine.
inline constexpr char kRequestPrefillTimeSeconds[] = "tandem_request_prefill_time_seconds";
inline constexpr char kRequestDecodeTimeSeconds[] = "tandem_request_decode_time_seconds";
inline constexpr char kIterationTokens[] = "tandem_iteration_tokens";
inline constexpr char kKvCacheUsageRatio[] = "tandem_kv_cache_usage_ratio";
inline constexpr char kKvBlocksReferenced[] = "tandem_kv_blocks_referenced";
inline constexpr char kPrefixCacheQueriesTotal[] = "tandem_prefix_cache_queries_total";
inline constexpr char kPrefixCacheHitsTotal[] = "tandem_prefix_cache_hits_total";
inline constexpr char kNumPreemptionsTotal[] = "tandem_num_preemptions_total";
inline constexpr char kCacheConfigInfo[] = "tandem_cache_config_info";

// Nodes: the KV handoff.
inline constexpr char kKvTransferSeconds[] = "tandem_kv_transfer_seconds";
inline constexpr char kKvTransferBytesTotal[] = "tandem_kv_transfer_bytes_total";
inline constexpr char kKvHandoffWaitSeconds[] = "tandem_kv_handoff_wait_seconds";
inline constexpr char kKvReservationsActive[] = "tandem_kv_reservations_active";
inline constexpr char kKvReservationsTotal[] = "tandem_kv_reservations_total";
inline constexpr char kKvTransferSessions[] = "tandem_kv_transfer_sessions";
inline constexpr char kKvTransferBlocksInUse[] = "tandem_kv_transfer_blocks_in_use";
inline constexpr char kNodeReady[] = "tandem_node_ready";

// Every process: the client libraries' process-collector names (no tandem_ prefix), and
// a node's engine thread (the steps; the rest of process_cpu is the serving path around them).
inline constexpr char kProcessCpuSeconds[] = "process_cpu_seconds_total";
inline constexpr char kProcessResidentMemoryBytes[] = "process_resident_memory_bytes";
inline constexpr char kEngineCpuSeconds[] = "tandem_engine_cpu_seconds_total";
inline constexpr char kEngineRunQueueWaitSeconds[] = "tandem_engine_runqueue_wait_seconds_total";

// Bucket bounds. Latencies: vLLM's bounds, with finer ones below them so an
// H200's millisecond (and sub-millisecond) phases resolve; quantiles over
// vLLM's bounds still compare, since every vLLM bound is one of ours.
std::vector<double> TimeToFirstTokenBuckets();
// Inter-token latency and time per output token.
std::vector<double> InterTokenLatencyBuckets();
// E2E, queue, prefill, decode and handoff-wait times.
std::vector<double> RequestLatencyBuckets();
// One request's KV transfer.
std::vector<double> TransferSecondsBuckets();
// Tokens per request: 1, 2, 5, 10, 20, 50, ... up to max_tokens (vLLM's 1-2-5 series).
std::vector<double> TokenCountBuckets(int max_tokens);
// Tokens per engine step: 1, then powers of two from 8, up to max_tokens.
std::vector<double> IterationTokenBuckets(int max_tokens);

}  // namespace tandem::metrics
