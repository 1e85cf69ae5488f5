// NodeRegistry: the nodes registered with this router, their last reported
// load, and their liveness. A node is dead when its connection closes or when
// nothing (a heartbeat or any other message) arrived from it for dead_after_ms
// (ClusterConfig::node_dead_after_ms); a dead node
// is removed (it gets no new work) and reported once to the caller, who fails
// or moves its requests. A node that comes back re-registers under a new id.
// Prefix-cache view: per node, the block hashes its heartbeats' CacheReports
// say it holds. A report with reset = true replaces the view; deltas apply
// only on top of a reset with no heartbeat sequence gap since (a gap drops the
// view until the node's next full report). At most kMaxCachedHashesPerNode
// hashes are kept per node (more stored hashes are ignored: fewer hits, never
// wrong ones). See docs/protocol.md "Heartbeat".
// Operator view (Statuses, router/cluster_admin.h): each node's state (starting
// until its first heartbeat, ready, draining — its heartbeat says so or an
// operator asked, RequestDrain —, dead), load, KV and version; the last
// kMaxDeadNodes dead nodes are kept for it, with why they died.
// Thread rule: thread-safe (one mutex); never calls out while holding it.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "common/base/clock.h"
#include "common/base/status.h"
#include "common/kv_cache/block_hash.h"
#include "common/net/rpc_connection.h"
#include "common/proto/control.pb.h"
#include "router/cluster/placement.h"
#include "router/cluster_admin.h"

namespace tandem::router::cluster {

// What the dispatcher needs to talk to a node.
struct NodeHandle {
  uint32_t node_id = 0;
  proto::NodeRole role = proto::NODE_ROLE_UNSPECIFIED;
  std::string address;  // the node's control address (peers dial it)
  std::string name;
  std::shared_ptr<net::RpcConnection> conn;
};

struct NodeCounts {
  int32_t decode = 0;   // live, not draining, serving decode
  int32_t prefill = 0;  // live, not draining, prefill
  int32_t draining = 0;
};

// What an autoscaler watches of one pool: its live nodes that are not draining.
struct PoolLoad {
  int64_t queued_requests = 0;          // Σ num_waiting of the last heartbeats
  int64_t inflight_prefill_tokens = 0;  // Σ prompt tokens the router placed on them, not yet prefilled
  int64_t running = 0;                  // Σ num_running of the last heartbeats
  int64_t max_running = 0;              // Σ NodeCapacity.max_running_requests
  int64_t free_kv_blocks = 0;           // GPU tier: Σ free blocks of the last heartbeats
  int64_t kv_blocks = 0;                // GPU tier: Σ blocks
};
struct PoolLoads {
  PoolLoad decode;   // nodes serving decode (decode, colocated)
  PoolLoad prefill;  // prefill nodes
};

// Bound of one node's prefix-cache view (32-byte hashes: about 64 bytes each in memory).
inline constexpr size_t kMaxCachedHashesPerNode = size_t{1} << 18;
// Dead nodes kept for the operator view (the most recent).
inline constexpr size_t kMaxDeadNodes = 32;

class NodeRegistry {
 public:
  NodeRegistry(const Clock& clock, int32_t heartbeat_interval_ms, int32_t dead_after_ms);

  // Validates and records a node registered on `conn`; a second Register on the
  // same connection replaces the first entry under a new id. FailedPrecondition
  // when its model id or KV layout differs from a registered node's: the nodes of
  // one cluster serve one model and exchange KV blocks.
  StatusOr<proto::RegisterReply> Register(const std::shared_ptr<net::RpcConnection>& conn,
                                          const proto::RegisterRequest& request);
  // Updates load/draining of the node registered on `conn`; unknown connections
  // and heartbeats naming another node id are ignored. Returns the node's id when
  // it began draining with this heartbeat, else 0.
  NodeId OnHeartbeat(const net::RpcConnection* conn, const proto::Heartbeat& heartbeat);
  // The node refused work as unavailable (draining, stopping) or did not answer in
  // time: for `duration_ms` placement takes it only when no other node can (a busy
  // node is not a dead one: the only decode node stays in use), and readiness and the
  // gauges still count it. True when it took work until now (neither avoided nor draining).
  bool Avoid(NodeId node_id, int64_t duration_ms);
  // Any other message from the node on `conn` (Tokens): it is alive. A node busy
  // sending Tokens is never taken for a silent one because a heartbeat queued
  // behind them on the router's I/O thread.
  void MarkSeen(const net::RpcConnection* conn);
  // The node on `conn` (if any) is dead now (`why` kept for the operator view); returns its id.
  std::optional<uint32_t> OnConnectionClosed(const net::RpcConnection* conn,
                                             const std::string& why = "connection closed");
  // Nodes silent for dead_after_ms: removed and returned (their connections
  // are returned too, so the caller can close them outside any lock).
  std::vector<NodeHandle> SweepExpired();

  // Placement inputs for every live node.
  std::vector<NodeView> Views() const;
  // The same, with prefix_hit_blocks (and _tokens) filled: how many leading full blocks of
  // `prompt` (hashed as the node hashes them: tenant salt, its model id and
  // block size) the node reported cached.
  std::vector<NodeView> ViewsFor(std::span<const TokenId> prompt, const std::string& tenant_salt) const;
  // (node name, blocks in the router's view of its prefix cache) per live node.
  std::vector<std::pair<std::string, int64_t>> CachedBlocksByNode() const;
  std::optional<NodeHandle> Get(uint32_t node_id) const;
  // The node id registered on `conn`, 0 when none.
  uint32_t NodeIdOf(const net::RpcConnection* conn) const;
  // Router-side in-flight accounting (placement uses it between heartbeats).
  void AddInflight(uint32_t node_id, int32_t requests, int64_t prefill_tokens);

  // ---- operator view (node_registry_status.cc) ----
  // An operator drains the node: it counts as draining from now on, whatever its
  // heartbeats say. True when it was not draining before; false for an unknown id.
  bool RequestDrain(NodeId node_id);
  // Live nodes by id, then the dead ones kept (most recent first).
  std::vector<NodeStatus> Statuses() const;
  // The live node `key` names: its id (decimal), its control address, or its name when
  // no other live node has it. NotFound; FailedPrecondition for a shared name.
  StatusOr<NodeId> Resolve(std::string_view key) const;

  bool HasDecodeNode() const;
  // A decode-serving node other than `node_id` that is live, not draining and not avoided.
  bool HasOtherDecodeNode(NodeId node_id) const;
  NodeCounts Counts() const;
  PoolLoads Pools() const;
  int32_t heartbeat_interval_ms() const { return heartbeat_interval_ms_; }
  int32_t dead_after_ms() const { return dead_after_ms_; }

 private:
  struct Node {
    NodeHandle handle;
    NodeView view;
    Nanos last_seen_ns = 0;
    uint64_t last_sequence = 0;
    std::string model_id;           // block hashes mix it in
    int32_t block_size = 0;         // tokens per block; 0 = unknown (no cache-aware placement)
    proto::KvLayoutInfo kv_layout;  // as registered; the same on every node
    // Prefix-cache view; valid only while cache_synced (a reset arrived, no gap since).
    std::unordered_set<kv_cache::BlockHash, kv_cache::BlockHashHasher> cached;
    bool cache_synced = false;
    Nanos avoid_until_ns = 0;  // Avoid(): avoided until then
    // Operator view.
    Nanos registered_ns = 0;
    Nanos last_heartbeat_ns = 0;                            // 0 = none yet
    int32_t num_reservations = 0;                           // the last heartbeat's
    std::optional<proto::TierUsage> gpu_usage, host_usage;  // the last heartbeat's tiers
    proto::NodeCapacity capacity;                           // as registered
    std::string build_version;
    uint32_t protocol_version = 0;
    bool drain_requested = false;  // RequestDrain(): draining whatever its heartbeats say
  };
  struct DeadNode {
    NodeStatus status;  // as it was when it died, state kDead
    Nanos dead_ns = 0;
  };

  // The node's view as placement sees it now (avoided until avoid_until_ns).
  NodeView ViewLocked(const Node& node, Nanos now) const;

  static void ApplyCacheReport(const proto::CacheReport& report, bool gap, Node* node);
  NodeStatus StatusLocked(const Node& node, Nanos now) const;
  // Keeps `node` in dead_ (REQUIRES: mu_ held).
  void RememberDeadLocked(const Node& node, const std::string& why, Nanos now);

  const Clock& clock_;
  const int32_t heartbeat_interval_ms_;
  const int32_t dead_after_ms_;
  mutable std::mutex mu_;
  uint32_t next_node_id_ = 1;                              // guarded by mu_
  std::map<uint32_t, Node> nodes_;                         // guarded by mu_
  std::map<const net::RpcConnection*, uint32_t> by_conn_;  // guarded by mu_
  std::deque<DeadNode> dead_;                              // guarded by mu_; most recent first
};

}  // namespace tandem::router::cluster
