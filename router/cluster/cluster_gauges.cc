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
}

void ClusterGauges::UpdateNodes(const NodeRegistry& registry) {
  if (!nodes_) return;
  NodeCounts counts = registry.Counts();
  nodes_->WithLabels({"decode"}).Set(counts.decode);
  nodes_->WithLabels({"prefill"}).Set(counts.prefill);
  nodes_->WithLabels({"draining"}).Set(counts.draining);
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
