#include "router/cluster_admin.h"

namespace tandem::router {

const char* NodeStateName(NodeState state) {
  switch (state) {
    case NodeState::kStarting: return "starting";
    case NodeState::kReady: return "ready";
    case NodeState::kDraining: return "draining";
    case NodeState::kDead: return "dead";
  }
  return "unknown";
}

bool ClusterReadiness::ready() const { return missing().empty(); }

bool ClusterReadiness::serving() const {
  for (const PoolReadiness& pool : pools) {
    if (pool.pool == "decode") return pool.ready > 0;
  }
  return false;
}

std::vector<std::string> ClusterReadiness::missing() const {
  std::vector<std::string> out;
  for (const PoolReadiness& pool : pools) {
    if (pool.required && pool.ready == 0) out.push_back(pool.pool);
  }
  return out;
}

ClusterReadiness ComputeReadiness(const std::vector<NodeStatus>& nodes, bool colocated_mode) {
  ClusterReadiness readiness;
  readiness.mode = colocated_mode ? "colocated" : "disaggregated";
  PoolReadiness decode{"decode", true, 0, 0};
  PoolReadiness prefill{"prefill", !colocated_mode, 0, 0};
  for (const NodeStatus& node : nodes) {
    if (node.state == NodeState::kDead) continue;
    PoolReadiness& pool = node.role == "prefill" ? prefill : decode;
    if (node.state == NodeState::kDraining) {
      pool.draining++;
    } else {
      pool.ready++;
    }
  }
  readiness.pools = {decode, prefill};
  return readiness;
}

}  // namespace tandem::router
