#include "router/cluster/cluster_gauges.h"

#include <map>

#include "common/metrics/metric_names.h"

namespace tandem::router::cluster {

ClusterGauges::ClusterGauges(metrics::MetricsRegistry* metrics) {
  if (!metrics) return;
  nodes_ = &metrics->AddGauge("tandem_router_nodes",
                              "Live nodes registered with the router, by role (draining counted apart).", {"role"});
  cached_blocks_ = &metrics->AddGauge(metrics::kRouterNodeCachedBlocks,
                                      "Prefix-cache blocks the router knows a node holds (from heartbeats).", {"node"});
  pool_queued_ = &metrics->AddGauge(metrics::kRouterPoolQueuedRequests,
                                    "Requests waiting on a pool's nodes (their last heartbeats).", {"pool"});
  pool_prefill_tokens_ =
      &metrics->AddGauge(metrics::kRouterPoolInflightPrefillTokens,
                         "Prompt tokens the router placed on a pool's nodes that are not prefilled yet.", {"pool"});
  pool_occupancy_ = &metrics->AddGauge(
      metrics::kRouterPoolBatchOccupancy,
      "Running requests / the most a pool's nodes run at once (their last heartbeats; 0 without a limit).", {"pool"});
  pool_kv_headroom_ = &metrics->AddGauge(
      metrics::kRouterPoolKvHeadroom, "Free / all GPU KV blocks of a pool's nodes (their last heartbeats; 0 with none).",
      {"pool"});
  waiting_for_room_ = &metrics->AddGauge(
      metrics::kRouterPoolWaitingForRoom,
      "Requests at the router waiting for room on a pool's nodes (refused for it, or queued behind those).", {"pool"});
}

void ClusterGauges::UpdateNodes(const NodeRegistry& registry) {
  if (!nodes_) return;
  NodeCounts counts = registry.Counts();
  nodes_->WithLabels({"decode"}).Set(counts.decode);
  nodes_->WithLabels({"prefill"}).Set(counts.prefill);
  nodes_->WithLabels({"draining"}).Set(counts.draining);
  const PoolLoads pools = registry.Pools();
  for (const auto& [name, pool] : {std::pair{"decode", &pools.decode}, std::pair{"prefill", &pools.prefill}}) {
    pool_queued_->WithLabels({name}).Set(static_cast<double>(pool->queued_requests));
    pool_prefill_tokens_->WithLabels({name}).Set(static_cast<double>(pool->inflight_prefill_tokens));
    pool_occupancy_->WithLabels({name}).Set(
        pool->max_running > 0 ? static_cast<double>(pool->running) / static_cast<double>(pool->max_running) : 0.0);
    pool_kv_headroom_->WithLabels({name}).Set(
        pool->kv_blocks > 0 ? static_cast<double>(pool->free_kv_blocks) / static_cast<double>(pool->kv_blocks) : 0.0);
  }
}

void ClusterGauges::UpdateWaitingForRoom(size_t waiting) {
  if (waiting_for_room_) waiting_for_room_->WithLabels({"decode"}).Set(static_cast<double>(waiting));
}

void ClusterGauges::UpdateCachedBlocks(const NodeRegistry& registry) {
  if (!cached_blocks_) return;
  std::map<std::string, int64_t> by_name;  // a restarted node may briefly be there twice
  for (const auto& [name, blocks] : registry.CachedBlocksByNode()) by_name[name] += blocks;
  std::set<std::string> live;
  for (const auto& [name, blocks] : by_name) {
    cached_blocks_->WithLabels({name}).Set(static_cast<double>(blocks));
    live.insert(name);
  }
  for (const std::string& name : cache_names_) {
    if (live.count(name) == 0) cached_blocks_->WithLabels({name}).Set(0);
  }
  cache_names_.insert(live.begin(), live.end());
}

}  // namespace tandem::router::cluster
