// NodeMetrics: a node's /metrics registry: the families its role owns
// (docs/metrics.md), every serving series labelled model_name, plus the node's
// plumbing gauges (tandem_node_ready, tandem_kv_transfer_sessions,
// tandem_kv_transfer_blocks_in_use). A prefill node never decodes nor
// reserves: the decode-only pointers are null there, and those families are
// not registered.
//
// Thread rule: the pointers are set by the constructor and never change; the
// metrics are atomics (thread-safe); Update is thread-safe.
#pragma once

#include <memory>
#include <string>

#include "common/engine/engine.h"
#include "common/metrics/metrics_registry.h"
#include "common/metrics/process_metrics.h"
#include "common/scheduler/scheduler_output.h"

namespace tandem::node {

struct NodeMetricsOptions {
  // "prefill", "decode" or "colocated" (the decode families): which families the node owns.
  std::string role = "decode";
  // The model_name label (EngineConfig::model_name).
  std::string model_name = "tiny";
  // Upper bound of the tokens-per-step buckets (SchedulerConfig::max_num_batched_tokens).
  int max_num_batched_tokens = 2048;
  // tandem_cache_config_info's labels: the KV cache as the engine sized it.
  int block_size = 16;
  int num_gpu_blocks = 0;
  int num_cpu_blocks = 0;
  bool enable_prefix_caching = true;
  std::string cache_dtype = "bf16";

  // The options of a `role` node running `engine` (its config and KV pool).
  static NodeMetricsOptions For(const std::string& role, engine::Engine& engine);
};

struct NodeMetrics {
  explicit NodeMetrics(const NodeMetricsOptions& options);

  metrics::MetricsRegistry registry;
  // Both roles.
  metrics::Histogram* request_queue_time = nullptr;    // stage = prefill | decode (colocated: decode)
  metrics::Histogram* request_prefill_time = nullptr;  // prompts this node computed
  metrics::Histogram* iteration_tokens = nullptr;
  metrics::Histogram* kv_transfer_seconds = nullptr;
  metrics::Counter* kv_transfer_bytes = nullptr;  // direction "sent" (prefill) or "received" (decode)
  metrics::Counter* prompt_tokens = nullptr;
  metrics::Counter* generation_tokens = nullptr;
  metrics::Counter* prefix_cache_queries = nullptr;
  metrics::Counter* prefix_cache_hits = nullptr;
  // Decode only (null on a prefill node).
  metrics::Histogram* request_decode_time = nullptr;
  metrics::Histogram* kv_handoff_wait = nullptr;
  metrics::Counter* reservations_granted = nullptr;
  metrics::Counter* reservations_refused = nullptr;
  metrics::Counter* reservations_expired = nullptr;
  // Plumbing (no model_name).
  metrics::Gauge* transfer_sessions = nullptr;
  metrics::Gauge* transfer_blocks_in_use = nullptr;
  metrics::Gauge* ready = nullptr;

  // A request's end on this node: its engine phases (queue; prefill when
  // computed here; decode on a decode node) and its prompt-token counters.
  void ObserveFinished(const engine::EngineOutput& finished);
  // Refreshes the gauges that mirror engine state, plus the transfer gauges.
  void Update(const scheduler::SchedulerCounters& counters, int64_t transfer_sessions_open,
              int64_t transfer_blocks_held);
  // Refreshes the process's CPU time and memory and the engine thread's CPU time
  // (Engine::CpuSeconds): what the node costs its host, and how much of it the steps;
  // and how long the engine thread waited for a core (ThreadRunQueueWaitSeconds; < 0:
  // unknown, left as it was).
  void CollectCpu(double engine_cpu_seconds, double engine_wait_seconds);
  std::string Render() const { return registry.RenderText(); }

 private:
  metrics::Gauge* running_ = nullptr;
  metrics::Gauge* waiting_ = nullptr;
  metrics::Gauge* usage_gpu_ = nullptr;
  metrics::Gauge* usage_host_ = nullptr;
  metrics::Gauge* referenced_gpu_ = nullptr;
  metrics::Gauge* referenced_host_ = nullptr;
  metrics::Gauge* reservations_active_ = nullptr;  // decode only
  metrics::Counter* preemptions_ = nullptr;
  metrics::Counter* engine_cpu_ = nullptr;
  metrics::Counter* engine_wait_ = nullptr;
  std::unique_ptr<metrics::ProcessMetrics> process_;
};

}  // namespace tandem::node
