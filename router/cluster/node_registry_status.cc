// NodeRegistry, operator view: node states and statuses, the recently dead
// nodes, operator drains and looking a node up by id, address or name
// (router/cluster_admin.h).
#include <algorithm>
#include <charconv>

#include "router/cluster/node_registry.h"

namespace tandem::router::cluster {
namespace {

const char* RoleName(proto::NodeRole role) {
  switch (role) {
    case proto::NODE_ROLE_PREFILL: return "prefill";
    case proto::NODE_ROLE_DECODE: return "decode";
    case proto::NODE_ROLE_COLOCATED: return "colocated";
    default: return "unknown";
  }
}

int64_t AgeMs(Nanos now, Nanos then) { return std::max<int64_t>((now - then) / 1'000'000, 0); }

// Used and total blocks of a tier: the heartbeat's (free counts cached blocks), else
// the registered capacity with none used.
void TierBlocks(const std::optional<proto::TierUsage>& usage, int64_t capacity, int64_t* used, int64_t* total) {
  if (usage) {
    *total = std::max<int64_t>(usage->total_blocks(), 0);
    *used = std::clamp<int64_t>(usage->total_blocks() - usage->free_blocks(), 0, *total);
  } else {
    *total = std::max<int64_t>(capacity, 0);
    *used = 0;
  }
}

}  // namespace

bool NodeRegistry::RequestDrain(NodeId node_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = nodes_.find(node_id);
  if (it == nodes_.end()) return false;
  it->second.drain_requested = true;
  const bool began = !it->second.view.draining;
  it->second.view.draining = true;
  return began;
}

NodeStatus NodeRegistry::StatusLocked(const Node& node, Nanos now) const {
  const NodeView view = ViewLocked(node, now);
  NodeStatus status;
  status.id = node.handle.node_id;
  status.name = node.handle.name;
  status.role = RoleName(node.handle.role);
  status.address = node.handle.address;
  if (view.draining) {
    status.state = NodeState::kDraining;
  } else {
    status.state = node.last_heartbeat_ns == 0 ? NodeState::kStarting : NodeState::kReady;
  }
  status.avoided = view.avoided;
  status.router_requests = view.router_inflight;
  status.router_prefill_tokens = view.router_prefill_tokens;
  status.running = view.num_running;
  status.waiting = view.num_waiting;
  status.reservations = node.num_reservations;
  status.queued_prefill_tokens = view.queued_prefill_tokens;
  TierBlocks(node.gpu_usage, node.capacity.num_gpu_blocks(), &status.kv_gpu_used_blocks, &status.kv_gpu_total_blocks);
  TierBlocks(node.host_usage, node.capacity.num_host_blocks(), &status.kv_host_used_blocks,
             &status.kv_host_total_blocks);
  status.cached_blocks = static_cast<int64_t>(node.cached.size());
  status.version = node.build_version;
  status.protocol_version = node.protocol_version;
  status.registered_age_ms = AgeMs(now, node.registered_ns);
  status.last_heartbeat_age_ms = node.last_heartbeat_ns == 0 ? -1 : AgeMs(now, node.last_heartbeat_ns);
  return status;
}

void NodeRegistry::RememberDeadLocked(const Node& node, const std::string& why, Nanos now) {
  DeadNode dead{StatusLocked(node, now), now};
  dead.status.state = NodeState::kDead;
  dead.status.dead_reason = why.substr(0, 256) + (node.view.draining ? " (while draining)" : "");
  dead_.push_front(std::move(dead));
  if (dead_.size() > kMaxDeadNodes) dead_.pop_back();
}

std::vector<NodeStatus> NodeRegistry::Statuses() const {
  const Nanos now = clock_.NowNanos();
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<NodeStatus> out;
  out.reserve(nodes_.size() + dead_.size());
  for (const auto& [id, node] : nodes_) out.push_back(StatusLocked(node, now));
  for (const DeadNode& dead : dead_) {
    NodeStatus status = dead.status;
    status.dead_age_ms = AgeMs(now, dead.dead_ns);
    // Ages as of now: the node is gone, so these only grow.
    status.registered_age_ms += status.dead_age_ms;
    if (status.last_heartbeat_age_ms >= 0) status.last_heartbeat_age_ms += status.dead_age_ms;
    out.push_back(std::move(status));
  }
  return out;
}

StatusOr<NodeId> NodeRegistry::Resolve(std::string_view key) const {
  std::lock_guard<std::mutex> lock(mu_);
  NodeId id = 0;
  const auto [end, error] = std::from_chars(key.data(), key.data() + key.size(), id);
  if (error == std::errc() && end == key.data() + key.size() && nodes_.count(id) > 0) return id;
  std::vector<NodeId> named;
  for (const auto& [node_id, node] : nodes_) {
    if (node.handle.address == key) return node_id;
    if (node.handle.name == key) named.push_back(node_id);
  }
  const std::string shown(key.substr(0, 256));
  if (named.size() == 1) return named[0];
  if (named.empty()) return NotFoundError("no live node with id, name or address '" + shown + "'");
  std::string ids;
  for (NodeId n : named) ids += (ids.empty() ? "" : ", ") + std::to_string(n);
  return FailedPreconditionError(std::to_string(named.size()) + " live nodes are named '" + shown + "' (ids " + ids +
                                 "): name one by id or address");
}

}  // namespace tandem::router::cluster
