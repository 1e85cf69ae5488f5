// ClusterAdmin: what the operator endpoints (/admin/*, admin_endpoints.h) ask of
// the cluster behind the router: the nodes with their state, load and KV, a
// drain, and which pools the serving mode needs. The cluster client implements
// it (router/cluster/node_admin.h); tests use fakes. Plain values, so the HTTP
// layer needs no cluster library.
// Thread rule: implementations are thread-safe (called from HTTP I/O threads).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/base/status.h"

namespace tandem::router {

// A node's state as operators see it.
enum class NodeState {
  kStarting,  // registered, no heartbeat yet (placement may already pick it)
  kReady,     // heartbeating, taking work
  kDraining,  // takes no new work: its heartbeat says draining, or an operator drained it
  kDead,      // recently gone: connection closed or silent (kept in a short list)
};

// "starting", "ready", "draining", "dead".
const char* NodeStateName(NodeState state);

// One node: what it registered with, and what the router knows of it now.
struct NodeStatus {
  uint32_t id = 0;      // the router's id for this registration (a node that comes back gets a new one)
  std::string name;     // the node's configured node_name (NodeConfig), as it registered; may repeat
  std::string role;     // "prefill", "decode", "colocated"
  std::string address;  // control address it registered ("host:port")
  NodeState state = NodeState::kStarting;
  bool avoided = false;      // lately refused work or timed out: a last resort for a while
  std::string dead_reason;   // kDead only: "connection closed: ...", "silent for N ms"
  int64_t dead_age_ms = -1;  // kDead only: since it was declared dead

  // Load: what the router has placed on it now, and what its last heartbeat said.
  int32_t router_requests = 0;        // requests the router has on it
  int64_t router_prefill_tokens = 0;  // prompt tokens the router has queued on it
  int32_t running = 0;                // heartbeat: requests in the running batch
  int32_t waiting = 0;                // heartbeat: waiting + swapped requests
  int32_t reservations = 0;           // heartbeat: KV reservations held for prefill nodes (decode)
  int64_t queued_prefill_tokens = 0;  // heartbeat: prompt tokens accepted, not yet computed

  // KV blocks (heartbeat; before the first one, the registered capacity and 0 used).
  int64_t kv_gpu_used_blocks = 0;
  int64_t kv_gpu_total_blocks = 0;
  int64_t kv_host_used_blocks = 0;
  int64_t kv_host_total_blocks = 0;
  int64_t cached_blocks = 0;  // block hashes in the router's view of its prefix cache

  std::string version;                 // build version it registered with ("" from older nodes)
  uint32_t protocol_version = 0;       // control protocol version it registered with (0 from older nodes)
  int64_t registered_age_ms = 0;       // since it registered
  int64_t last_heartbeat_age_ms = -1;  // since its last heartbeat; -1 = none yet
};

// One pool of the cluster readiness.
struct PoolReadiness {
  std::string pool;       // "decode" (decode and colocated nodes) or "prefill"
  bool required = false;  // the serving mode needs it
  int32_t ready = 0;      // starting or ready nodes: they take work
  int32_t draining = 0;
};

struct ClusterReadiness {
  std::string mode;  // "disaggregated" | "colocated"
  std::vector<PoolReadiness> pools;
  // Every required pool has a node that takes work.
  bool ready() const;
  // Requests can be served: a decode node takes work (as /health/ready).
  bool serving() const;
  // Required pools without a node that takes work ("decode", "prefill").
  std::vector<std::string> missing() const;
};

// Readiness of `nodes` (dead ones ignored) in `mode`: decode is always required,
// prefill only in disaggregated mode (without one, decode nodes prefill locally:
// the cluster serves, but not as configured).
ClusterReadiness ComputeReadiness(const std::vector<NodeStatus>& nodes, bool colocated_mode);

class ClusterAdmin {
 public:
  virtual ~ClusterAdmin() = default;

  // Live nodes by id, then the recently dead ones (most recent first).
  virtual std::vector<NodeStatus> ListNodes() const = 0;
  // Drains the live node `node` names: its id (decimal), its name when no other live
  // node has it, or its control address. Placement stops at once; the node is told
  // to drain and exits once idle. NotFound (no such live node), FailedPrecondition
  // (a name several nodes share: use the id). Draining a draining node is a no-op.
  virtual StatusOr<NodeStatus> Drain(std::string_view node) = 0;
  // True in colocated mode (decode nodes prefill every request).
  virtual bool colocated_mode() const = 0;
};

}  // namespace tandem::router
