#include "common/node/node_metrics.h"

namespace tandem::node {

NodeMetrics::NodeMetrics() : serving(metrics::ServingMetrics::Register(registry)) {
  transfer_sessions = &registry.AddGauge(kKvTransferSessions, "Open KV transfer sessions.").Get();
  transfer_blocks_in_use =
      &registry.AddGauge(kKvTransferBlocksInUse, "Landing or staging host blocks held by transfers.").Get();
  ready = &registry.AddGauge(kNodeReady, "1 when registered with the router and not draining.").Get();
}

void NodeMetrics::Update(const scheduler::SchedulerCounters& c, int64_t transfer_sessions_open,
                         int64_t transfer_blocks_held) {
  serving.num_requests_running->Get().Set(static_cast<double>(c.num_running));
  serving.num_requests_waiting->Get().Set(static_cast<double>(c.num_waiting + c.num_swapped));
  serving.kv_blocks_referenced->WithLabels({"gpu"}).Set(static_cast<double>(c.kv.device.referenced_blocks));
  serving.kv_blocks_referenced->WithLabels({"host"}).Set(static_cast<double>(c.kv.host.referenced_blocks));
  auto usage = [](const kv_cache::KvTierCounters& t) {
    return t.total_blocks > 0 ? static_cast<double>(t.referenced_blocks) / t.total_blocks : 0.0;
  };
  serving.kv_cache_usage->WithLabels({"gpu"}).Set(usage(c.kv.device));
  serving.kv_cache_usage->WithLabels({"host"}).Set(usage(c.kv.host));
  serving.kv_reservations_active->Get().Set(static_cast<double>(c.reservations_active));
  serving.kv_staging_buffers_in_use->Get().Set(static_cast<double>(transfer_blocks_held));
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (c.preemptions > last_preemptions_) {
      serving.num_preemptions->Get().Increment(static_cast<double>(c.preemptions - last_preemptions_));
      last_preemptions_ = c.preemptions;
    }
  }
  transfer_sessions->Set(static_cast<double>(transfer_sessions_open));
  transfer_blocks_in_use->Set(static_cast<double>(transfer_blocks_held));
}

}  // namespace tandem::node
