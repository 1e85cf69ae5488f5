#include "router/cluster/node_admin.h"

namespace tandem::router::cluster {

StatusOr<NodeStatus> NodeAdmin::Drain(std::string_view node) {
  TANDEM_ASSIGN_OR_RETURN(NodeId id, client_.registry().Resolve(node));
  TANDEM_RETURN_IF_ERROR(client_.DrainNode(id, "operator request"));
  for (NodeStatus& status : client_.registry().Statuses()) {
    if (status.id == id && status.state != NodeState::kDead) return std::move(status);
  }
  return NotFoundError("node " + std::to_string(id) + " left while it was drained");
}

}  // namespace tandem::router::cluster
