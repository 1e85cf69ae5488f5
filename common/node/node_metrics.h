// NodeMetrics: the /metrics registry of a node: the ServingMetrics families
// plus the node's own KV-clean gauges, refreshed from engine counters.
//
// Metric names added here (documented next to metric_names.h's table):
//   tandem_kv_transfer_sessions      gauge  open KV transfer sessions (KV clean: 0 when idle)
//   tandem_kv_transfer_blocks_in_use gauge  landing (decode) / staging (prefill) host blocks held
//   tandem_node_ready                gauge  1 when registered with the router and not draining
//
// Thread rule: thread-safe (metrics are atomics).
#pragma once

#include <mutex>
#include <string>

#include "common/metrics/metrics_registry.h"
#include "common/metrics/serving_metrics.h"
#include "common/scheduler/scheduler_output.h"

namespace tandem::node {

inline constexpr char kKvTransferSessions[] = "tandem_kv_transfer_sessions";
inline constexpr char kKvTransferBlocksInUse[] = "tandem_kv_transfer_blocks_in_use";
inline constexpr char kNodeReady[] = "tandem_node_ready";

struct NodeMetrics {
  NodeMetrics();
  metrics::MetricsRegistry registry;
  metrics::ServingMetrics serving;
  metrics::Gauge* transfer_sessions = nullptr;
  metrics::Gauge* transfer_blocks_in_use = nullptr;
  metrics::Gauge* ready = nullptr;

  // Refreshes the gauges that mirror engine state, plus the transfer gauges.
  void Update(const scheduler::SchedulerCounters& counters, int64_t transfer_sessions_open,
              int64_t transfer_blocks_held);
  std::string Render() const { return registry.RenderText(); }

 private:
  std::mutex mu_;               // guards last_preemptions_
  int64_t last_preemptions_ = 0;  // engine counter value already exported
};

}  // namespace tandem::node
