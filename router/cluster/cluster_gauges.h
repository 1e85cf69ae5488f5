// ClusterGauges: the router's view of its nodes on /metrics:
//   tandem_router_nodes{role}: live nodes by role (decode, prefill; draining apart);
//   tandem_router_node_cached_blocks{node}: blocks in the router's view of each
//   node's prefix cache (a node that left reads 0: series cannot be removed);
//   tandem_router_pool_*{pool}: what an autoscaler acts on, per pool (decode,
//   prefill) over its live nodes that are not draining: queued requests,
//   in-flight prefill tokens, batch occupancy and KV headroom (NodeRegistry::Pools);
//   tandem_router_pool_waiting_for_room{pool="decode"}: requests at the router waiting
//   for room on a decode node (RoomQueue).
// Thread rule: UpdateNodes is thread-safe; UpdateCachedBlocks is called by one
// thread at a time (the router's tick).
#pragma once

#include <set>
#include <string>

#include "common/metrics/metrics_registry.h"
#include "router/cluster/node_registry.h"

namespace tandem::router::cluster {

class ClusterGauges {
 public:
  // Registers the families in `metrics`; null: every update does nothing.
  explicit ClusterGauges(metrics::MetricsRegistry* metrics);

  // The node counts and the pool gauges.
  void UpdateNodes(const NodeRegistry& registry);
  void UpdateCachedBlocks(const NodeRegistry& registry);
  void UpdateWaitingForRoom(size_t waiting);

 private:
  metrics::Family<metrics::Gauge>* nodes_ = nullptr;
  metrics::Family<metrics::Gauge>* cached_blocks_ = nullptr;
  metrics::Family<metrics::Gauge>* pool_queued_ = nullptr;
  metrics::Family<metrics::Gauge>* pool_prefill_tokens_ = nullptr;
  metrics::Family<metrics::Gauge>* pool_occupancy_ = nullptr;
  metrics::Family<metrics::Gauge>* pool_kv_headroom_ = nullptr;
  metrics::Family<metrics::Gauge>* waiting_for_room_ = nullptr;
  std::set<std::string> cache_names_;  // node names the cached-blocks gauge has seen
};

}  // namespace tandem::router::cluster
