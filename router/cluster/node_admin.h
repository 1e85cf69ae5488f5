// NodeAdmin: the operator endpoints' view of the cluster (router/cluster_admin.h)
// over a ClusterClient: its registry's node statuses, its drains, its mode.
// Thread rule: thread-safe (the client and its registry are). Lifetime: the
// client outlives it.
#pragma once

#include <string_view>
#include <vector>

#include "router/cluster/cluster_client.h"
#include "router/cluster_admin.h"

namespace tandem::router::cluster {

class NodeAdmin final : public ClusterAdmin {
 public:
  explicit NodeAdmin(ClusterClient& client) : client_(client) {}

  std::vector<NodeStatus> ListNodes() const override { return client_.registry().Statuses(); }
  StatusOr<NodeStatus> Drain(std::string_view node) override;
  bool colocated_mode() const override { return client_.mode() == ServingMode::kColocated; }

 private:
  ClusterClient& client_;
};

}  // namespace tandem::router::cluster
