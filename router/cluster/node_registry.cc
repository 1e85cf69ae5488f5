#include "router/cluster/node_registry.h"

#include <cstring>
#include <map>

#include "common/base/logging.h"

namespace tandem::router::cluster {

NodeRegistry::NodeRegistry(const Clock& clock, int32_t heartbeat_interval_ms, int32_t dead_after_ms)
    : clock_(clock), heartbeat_interval_ms_(heartbeat_interval_ms), dead_after_ms_(dead_after_ms) {}

StatusOr<proto::RegisterReply> NodeRegistry::Register(const std::shared_ptr<net::RpcConnection>& conn,
                                                      const proto::RegisterRequest& request) {
  const proto::NodeRole role = request.role();
  if (!ServesDecode(role) && !ServesPrefill(role)) return InvalidArgumentError("register: unknown node role");
  if (request.address().empty() || request.address().size() > 256 || request.address().find(':') == std::string::npos) {
    return InvalidArgumentError("register: address must be host:port");
  }
  if (request.node_name().size() > 256) return InvalidArgumentError("register: node_name too long");
  if (request.capacity().num_gpu_blocks() < 0) return InvalidArgumentError("register: negative capacity");
  const std::string model_id = request.model_id().substr(0, 256);
  std::lock_guard<std::mutex> lock(mu_);
  auto old = by_conn_.find(conn.get());
  for (const auto& [id, other] : nodes_) {
    if (old != by_conn_.end() && id == old->second) continue;
    if (other.model_id != model_id) {
      return FailedPreconditionError("register: model '" + model_id + "' differs from '" + other.model_id +
                                     "' of node " + std::to_string(id) + " ('" + other.handle.name + "')");
    }
    // Scalar fields only, so equal serializations mean equal layouts.
    if (other.kv_layout.SerializeAsString() != request.kv_layout().SerializeAsString()) {
      return FailedPreconditionError("register: KV layout {" + request.kv_layout().ShortDebugString() +
                                     "} differs from {" + other.kv_layout.ShortDebugString() + "} of node " +
                                     std::to_string(id) + " ('" + other.handle.name + "')");
    }
  }
  if (old != by_conn_.end()) nodes_.erase(old->second);
  const uint32_t id = next_node_id_++;
  Node& node = nodes_[id];
  node.handle = {id, role, request.address(), request.node_name(), conn};
  node.view.node_id = id;
  node.view.role = role;
  node.view.free_gpu_blocks = request.capacity().num_gpu_blocks();
  node.model_id = model_id;
  node.block_size = std::max(request.kv_layout().block_size(), 0);
  node.kv_layout = request.kv_layout();
  node.last_seen_ns = clock_.NowNanos();
  node.registered_ns = node.last_seen_ns;
  node.capacity = request.capacity();
  node.build_version = request.build_version().substr(0, 64);
  node.protocol_version = request.protocol_version();
  by_conn_[conn.get()] = id;
  proto::RegisterReply reply;
  reply.set_node_id(id);
  reply.set_heartbeat_interval_ms(static_cast<uint32_t>(heartbeat_interval_ms_));
  return reply;
}

NodeId NodeRegistry::OnHeartbeat(const net::RpcConnection* conn, const proto::Heartbeat& heartbeat) {
  std::lock_guard<std::mutex> lock(mu_);
  auto id = by_conn_.find(conn);
  if (id == by_conn_.end()) return 0;
  auto it = nodes_.find(id->second);
  if (it == nodes_.end()) return 0;
  if (heartbeat.node_id() != 0 && heartbeat.node_id() != id->second) return 0;
  Node& node = it->second;
  node.last_seen_ns = clock_.NowNanos();
  node.last_heartbeat_ns = node.last_seen_ns;
  // Sequences start anywhere after a registration; then each heartbeat is the last + 1.
  const bool gap = node.last_sequence != 0 && heartbeat.sequence() != node.last_sequence + 1;
  node.last_sequence = heartbeat.sequence();
  ApplyCacheReport(heartbeat.cache(), gap, &node);
  const bool began_draining = heartbeat.draining() && !node.view.draining;
  node.view.draining = heartbeat.draining() || node.drain_requested;
  const proto::LoadReport& load = heartbeat.load();
  node.num_reservations = std::max(load.num_reservations(), 0);
  node.view.num_running = std::max(load.num_running(), 0);
  node.view.num_waiting = std::max(load.num_waiting(), 0);
  node.view.queued_prefill_tokens = std::max<int64_t>(load.queued_prefill_tokens(), 0);
  for (const proto::TierUsage& tier : load.tiers()) {
    if (tier.tier() == proto::KV_TIER_GPU) {
      node.view.free_gpu_blocks = std::max<int64_t>(tier.free_blocks(), 0);
      node.gpu_usage = tier;
    } else if (tier.tier() == proto::KV_TIER_HOST) {
      node.host_usage = tier;
    }
  }
  return began_draining ? id->second : 0;
}

bool NodeRegistry::Avoid(NodeId node_id, int64_t duration_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = nodes_.find(node_id);
  if (it == nodes_.end()) return false;
  const Nanos now = clock_.NowNanos();
  const NodeView before = ViewLocked(it->second, now);
  const bool took_work = !before.avoided && !before.draining;
  it->second.avoid_until_ns = std::max(it->second.avoid_until_ns, now + duration_ms * 1'000'000);
  return took_work;
}

NodeView NodeRegistry::ViewLocked(const Node& node, Nanos now) const {
  NodeView view = node.view;
  view.avoided = now < node.avoid_until_ns;
  return view;
}

void NodeRegistry::MarkSeen(const net::RpcConnection* conn) {
  std::lock_guard<std::mutex> lock(mu_);
  auto id = by_conn_.find(conn);
  if (id == by_conn_.end()) return;
  auto it = nodes_.find(id->second);
  if (it != nodes_.end()) it->second.last_seen_ns = clock_.NowNanos();
}

void NodeRegistry::ApplyCacheReport(const proto::CacheReport& report, bool gap, Node* node) {
  if (report.reset()) {
    node->cached.clear();
    node->cache_synced = true;
  } else if (gap) {
    // A lost heartbeat may have carried changes: forget the view until the next full report.
    if (node->cache_synced) TANDEM_LOG_WARN("node {}: heartbeat gap, prefix-cache view dropped", node->view.node_id);
    node->cached.clear();
    node->cache_synced = false;
  }
  if (node->cache_synced) {
    auto parse = [](const std::string& bytes, kv_cache::BlockHash* hash) {
      if (bytes.size() != hash->bytes.size()) return false;  // malformed: ignored
      std::memcpy(hash->bytes.data(), bytes.data(), bytes.size());
      return true;
    };
    kv_cache::BlockHash hash;
    for (const std::string& bytes : report.removed_hashes()) {
      if (parse(bytes, &hash)) node->cached.erase(hash);
    }
    for (const std::string& bytes : report.stored_hashes()) {
      if (node->cached.size() < kMaxCachedHashesPerNode && parse(bytes, &hash)) node->cached.insert(hash);
    }
  }
  node->view.cached_blocks = static_cast<int64_t>(node->cached.size());
}

std::optional<uint32_t> NodeRegistry::OnConnectionClosed(const net::RpcConnection* conn, const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  auto id = by_conn_.find(conn);
  if (id == by_conn_.end()) return std::nullopt;
  const uint32_t node_id = id->second;
  by_conn_.erase(id);
  auto node = nodes_.find(node_id);
  if (node != nodes_.end()) {
    RememberDeadLocked(node->second, why, clock_.NowNanos());
    nodes_.erase(node);
  }
  return node_id;
}

std::vector<NodeHandle> NodeRegistry::SweepExpired() {
  std::vector<NodeHandle> dead;
  const Nanos now = clock_.NowNanos();
  const Nanos limit = Nanos{dead_after_ms_} * 1'000'000;
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = nodes_.begin(); it != nodes_.end();) {
    if (now - it->second.last_seen_ns > limit) {
      dead.push_back(it->second.handle);
      RememberDeadLocked(it->second, "silent for " + std::to_string(dead_after_ms_) + " ms", now);
      by_conn_.erase(it->second.handle.conn.get());
      it = nodes_.erase(it);
    } else {
      ++it;
    }
  }
  return dead;
}

std::vector<NodeView> NodeRegistry::Views() const {
  const Nanos now = clock_.NowNanos();
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<NodeView> views;
  views.reserve(nodes_.size());
  for (const auto& [id, node] : nodes_) views.push_back(ViewLocked(node, now));
  return views;
}

std::vector<NodeView> NodeRegistry::ViewsFor(std::span<const TokenId> prompt, const std::string& tenant_salt) const {
  // Hash outside the lock, once per (model id, block size) among nodes with a view.
  using Key = std::pair<std::string, int32_t>;
  std::map<Key, std::vector<kv_cache::BlockHash>> chains;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, node] : nodes_) {
      if (!node.cached.empty() && node.block_size > 0) chains[{node.model_id, node.block_size}];
    }
  }
  for (auto& [key, hashes] : chains) {
    kv_cache::ExtendBlockHashes(tenant_salt, key.first, key.second, prompt, &hashes);
  }
  const Nanos now = clock_.NowNanos();
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<NodeView> views;
  views.reserve(nodes_.size());
  for (const auto& [id, node] : nodes_) {
    views.push_back(ViewLocked(node, now));
    auto chain = chains.find({node.model_id, node.block_size});
    if (chain == chains.end() || node.cached.empty()) continue;
    int64_t hit = 0;
    for (const kv_cache::BlockHash& h : chain->second) {
      if (node.cached.count(h) == 0) break;
      ++hit;
    }
    views.back().prefix_hit_blocks = hit;
    views.back().prefix_hit_tokens = hit * node.block_size;
  }
  return views;
}

std::vector<std::pair<std::string, int64_t>> NodeRegistry::CachedBlocksByNode() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::pair<std::string, int64_t>> out;
  for (const auto& [id, node] : nodes_) {
    std::string name = node.handle.name.empty() ? "node-" + std::to_string(id) : node.handle.name;
    out.emplace_back(std::move(name), static_cast<int64_t>(node.cached.size()));
  }
  return out;
}

std::optional<NodeHandle> NodeRegistry::Get(uint32_t node_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = nodes_.find(node_id);
  if (it == nodes_.end()) return std::nullopt;
  return it->second.handle;
}

uint32_t NodeRegistry::NodeIdOf(const net::RpcConnection* conn) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_conn_.find(conn);
  return it == by_conn_.end() ? 0 : it->second;
}

void NodeRegistry::AddInflight(uint32_t node_id, int32_t requests, int64_t prefill_tokens) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = nodes_.find(node_id);
  if (it == nodes_.end()) return;
  it->second.view.router_inflight = std::max(it->second.view.router_inflight + requests, 0);
  it->second.view.router_prefill_tokens = std::max<int64_t>(it->second.view.router_prefill_tokens + prefill_tokens, 0);
}

bool NodeRegistry::HasDecodeNode() const { return Counts().decode > 0; }

bool NodeRegistry::HasOtherDecodeNode(NodeId node_id) const {
  const Nanos now = clock_.NowNanos();
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [id, node] : nodes_) {
    const NodeView view = ViewLocked(node, now);
    if (id != node_id && view.alive && !view.draining && !view.avoided && ServesDecode(view.role)) return true;
  }
  return false;
}

NodeCounts NodeRegistry::Counts() const {
  const Nanos now = clock_.NowNanos();
  std::lock_guard<std::mutex> lock(mu_);
  NodeCounts counts;
  for (const auto& [id, node] : nodes_) {
    if (ViewLocked(node, now).draining) {
      counts.draining++;
    } else if (ServesDecode(node.view.role)) {
      counts.decode++;
    } else if (ServesPrefill(node.view.role)) {
      counts.prefill++;
    }
  }
  return counts;
}

PoolLoads NodeRegistry::Pools() const {
  const Nanos now = clock_.NowNanos();
  std::lock_guard<std::mutex> lock(mu_);
  PoolLoads pools;
  for (const auto& [id, node] : nodes_) {
    const NodeView view = ViewLocked(node, now);
    if (view.draining) continue;
    PoolLoad* pool = ServesDecode(view.role) ? &pools.decode : ServesPrefill(view.role) ? &pools.prefill : nullptr;
    if (pool == nullptr) continue;
    pool->queued_requests += view.num_waiting;
    pool->inflight_prefill_tokens += view.router_prefill_tokens;
    pool->running += view.num_running;
    pool->max_running += node.capacity.max_running_requests();
    pool->free_kv_blocks += node.gpu_usage ? node.gpu_usage->free_blocks() : view.free_gpu_blocks;
    pool->kv_blocks += node.gpu_usage ? node.gpu_usage->total_blocks() : node.capacity.num_gpu_blocks();
  }
  return pools;
}

}  // namespace tandem::router::cluster
