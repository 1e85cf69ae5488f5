#include "common/node/node_metrics.h"

#include "common/metrics/metric_names.h"

namespace tandem::node {

NodeMetricsOptions NodeMetricsOptions::For(const std::string& role, engine::Engine& engine) {
  const engine::EngineConfig& config = engine.config();
  const kv_cache::KvLayout& layout = engine.device_kv().layout();
  NodeMetricsOptions o;
  o.role = role;
  o.model_name = config.model_name;
  o.max_num_batched_tokens = config.scheduler.max_num_batched_tokens;
  o.block_size = layout.block_size;
  o.num_gpu_blocks = layout.num_blocks;
  o.num_cpu_blocks = config.num_host_blocks;
  o.enable_prefix_caching = config.enable_prefix_caching;
  o.cache_dtype = std::string(DTypeName(layout.dtype));
  return o;
}

NodeMetrics::NodeMetrics(const NodeMetricsOptions& o) {
  namespace m = metrics;
  const bool decode = o.role != "prefill";  // decode and colocated
  const std::vector<std::string> model = {o.model_name};
  metrics::MetricsRegistry& r = registry;
  auto histogram = [&](const char* name, const char* help, std::vector<double> bounds) {
    return &r.AddHistogram(name, help, std::move(bounds), {"model_name"}).WithLabels(model);
  };
  auto counter = [&](const char* name, const char* help) {
    return &r.AddCounter(name, help, {"model_name"}).WithLabels(model);
  };
  auto gauge = [&](const char* name, const char* help) {
    return &r.AddGauge(name, help, {"model_name"}).WithLabels(model);
  };

  request_queue_time =
      &r.AddHistogram(m::kRequestQueueTimeSeconds, "Time a request waited in a queue, seconds, by stage.",
                      m::RequestLatencyBuckets(), {"model_name", "stage"})
           .WithLabels({o.model_name, decode ? "decode" : "prefill"});
  request_prefill_time = histogram(m::kRequestPrefillTimeSeconds,
                                   "Prefill time of a prompt computed here (first step to first token), seconds.",
                                   m::RequestLatencyBuckets());
  if (decode) {
    request_decode_time =
        histogram(m::kRequestDecodeTimeSeconds, "Decode time of a request, first to last token, seconds.",
                  m::RequestLatencyBuckets());
  }
  iteration_tokens = histogram(m::kIterationTokens, "Tokens computed per engine step (prefill and decode).",
                               m::IterationTokenBuckets(o.max_num_batched_tokens));
  kv_transfer_seconds = histogram(m::kKvTransferSeconds,
                                  decode ? "One request's KV transfer here: first layer landed to every layer "
                                           "landed, seconds."
                                         : "One request's KV transfer here: first layer handed to the sender to every "
                                           "layer written, seconds.",
                                  m::TransferSecondsBuckets());
  kv_transfer_bytes = &r.AddCounter(m::kKvTransferBytesTotal, "KV cache bytes moved between nodes, by direction.",
                                    {"model_name", "direction"})
                           .WithLabels({o.model_name, decode ? "received" : "sent"});
  if (decode) {
    kv_handoff_wait = histogram(m::kKvHandoffWaitSeconds,
                                "Time a request waited for its KV handoff: reservation granted to KV landed and "
                                "first token in, seconds.",
                                m::RequestLatencyBuckets());
  }
  running_ = gauge(m::kNumRequestsRunning, "Requests running now.");
  waiting_ = gauge(m::kNumRequestsWaiting, "Requests waiting to run now (queued or swapped out).");
  metrics::Family<metrics::Gauge>& usage =
      r.AddGauge(m::kKvCacheUsageRatio, "Fraction of KV blocks in use (0..1), by tier.", {"model_name", "tier"});
  usage_gpu_ = &usage.WithLabels({o.model_name, "gpu"});
  usage_host_ = &usage.WithLabels({o.model_name, "host"});
  metrics::Family<metrics::Gauge>& referenced = r.AddGauge(
      m::kKvBlocksReferenced, "KV blocks referenced by requests (0 when idle), by tier.", {"model_name", "tier"});
  referenced_gpu_ = &referenced.WithLabels({o.model_name, "gpu"});
  referenced_host_ = &referenced.WithLabels({o.model_name, "host"});
  if (decode) {
    reservations_active_ = gauge(m::kKvReservationsActive, "KV reservations (leases) held for incoming transfers.");
    metrics::Family<metrics::Counter>& outcomes =
        r.AddCounter(m::kKvReservationsTotal, "KV reservation outcomes.", {"model_name", "outcome"});
    reservations_granted = &outcomes.WithLabels({o.model_name, "granted"});
    reservations_refused = &outcomes.WithLabels({o.model_name, "refused"});
    reservations_expired = &outcomes.WithLabels({o.model_name, "expired"});
  }
  prompt_tokens = counter(m::kPromptTokensTotal, "Prompt tokens of requests that finished here.");
  generation_tokens = counter(m::kGenerationTokensTotal, "Output tokens generated here.");
  prefix_cache_queries = counter(m::kPrefixCacheQueriesTotal, "Prompt tokens looked up in the prefix cache.");
  prefix_cache_hits = counter(m::kPrefixCacheHitsTotal, "Prompt tokens found in the prefix cache.");
  preemptions_ = counter(m::kNumPreemptionsTotal, "Requests preempted.");
  r.AddGauge(m::kCacheConfigInfo, "The KV cache configuration (labels); always 1.",
             {"model_name", "block_size", "num_gpu_blocks", "num_cpu_blocks", "enable_prefix_caching", "cache_dtype"})
      .WithLabels({o.model_name, std::to_string(o.block_size), std::to_string(o.num_gpu_blocks),
                   std::to_string(o.num_cpu_blocks), o.enable_prefix_caching ? "True" : "False", o.cache_dtype})
      .Set(1);

  transfer_sessions = &r.AddGauge(m::kKvTransferSessions, "Open KV transfer sessions.").Get();
  transfer_blocks_in_use =
      &r.AddGauge(m::kKvTransferBlocksInUse, "Landing or staging host blocks held by transfers.").Get();
  ready = &r.AddGauge(m::kNodeReady, "1 when registered with the router and not draining.").Get();
  engine_cpu_ = &r.AddCounter(m::kEngineCpuSeconds, "CPU time of the engine thread (its steps), seconds.").Get();
  engine_wait_ = &r.AddCounter(m::kEngineRunQueueWaitSeconds,
                               "Time the engine thread was runnable but waited for a core, seconds.")
                      .Get();
  process_ = std::make_unique<metrics::ProcessMetrics>(r);
}

void NodeMetrics::CollectCpu(double engine_cpu_seconds, double engine_wait_seconds) {
  process_->Collect();
  engine_cpu_->AdvanceTo(engine_cpu_seconds);
  if (engine_wait_seconds >= 0) engine_wait_->AdvanceTo(engine_wait_seconds);
}

void NodeMetrics::ObserveFinished(const engine::EngineOutput& out) {
  const engine::RequestTimes& t = out.times;
  if (t.admitted) request_queue_time->Observe(t.queued_seconds);
  if (t.first_token && !t.remote_first_token) request_prefill_time->Observe(t.prefill_seconds);
  if (request_decode_time && t.first_token) request_decode_time->Observe(t.decode_seconds);
  prompt_tokens->Increment(out.num_prompt_tokens);
  prefix_cache_queries->Increment(out.num_prompt_tokens);
  prefix_cache_hits->Increment(out.num_cached_tokens);
}

void NodeMetrics::Update(const scheduler::SchedulerCounters& c, int64_t transfer_sessions_open,
                         int64_t transfer_blocks_held) {
  running_->Set(static_cast<double>(c.num_running));
  waiting_->Set(static_cast<double>(c.num_waiting + c.num_swapped));
  referenced_gpu_->Set(static_cast<double>(c.kv.device.referenced_blocks));
  referenced_host_->Set(static_cast<double>(c.kv.host.referenced_blocks));
  auto usage = [](const kv_cache::KvTierCounters& t) {
    return t.total_blocks > 0 ? static_cast<double>(t.referenced_blocks) / t.total_blocks : 0.0;
  };
  usage_gpu_->Set(usage(c.kv.device));
  usage_host_->Set(usage(c.kv.host));
  if (reservations_active_) reservations_active_->Set(static_cast<double>(c.reservations_active));
  preemptions_->AdvanceTo(static_cast<double>(c.preemptions));
  transfer_sessions->Set(static_cast<double>(transfer_sessions_open));
  transfer_blocks_in_use->Set(static_cast<double>(transfer_blocks_held));
}

}  // namespace tandem::node
