// Placement: which node gets a request. Pure functions over snapshots of the
// registry, so they are unit-tested without sockets.
//   decode:  highest (free GPU blocks + prefix-hit blocks) per unit of load
//            (1 + running + waiting, or + the router's own count of requests
//            on the node when that is higher, since heartbeats lag); a prompt
//            prefix the node reported cached is worth its blocks, so a full
//            or overloaded node still loses; ties -> lower node id.
//   prefill: least work ahead of the prompt's first token: queued prompt
//            tokens (reported, or the router's own in-flight count when
//            higher) + the prompt tokens the node would compute (those past
//            the prefix it reported cached); ties -> lower node id.
// Both skip dead and draining nodes and nodes of other roles. An avoided node (one
// that lately timed out or answered unavailable) is decode's last resort, and never
// prefill's (the decode node prefills instead).
// Thread rule: free functions over values; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/proto/control.pb.h"

namespace tandem::router::cluster {

// What placement knows about one node.
struct NodeView {
  uint32_t node_id = 0;
  proto::NodeRole role = proto::NODE_ROLE_UNSPECIFIED;
  bool alive = true;
  bool draining = false;
  bool avoided = false;               // NodeRegistry::Avoid: a last resort until then
  int64_t free_gpu_blocks = 0;        // from the last heartbeat (capacity before one)
  int32_t num_running = 0;            // from the last heartbeat
  int32_t num_waiting = 0;            // from the last heartbeat
  int64_t queued_prefill_tokens = 0;  // from the last heartbeat
  int32_t router_inflight = 0;        // requests the router has on it now
  int64_t router_prefill_tokens = 0;  // prompt tokens the router has queued on it now
  int64_t cached_blocks = 0;          // blocks in the router's view of its prefix cache
  int64_t prefix_hit_blocks = 0;      // leading blocks of this request's prompt it holds (per request)
  int64_t prefix_hit_tokens = 0;      // the same in tokens (blocks x the node's block size)
};

// True for roles that serve decode (DECODE, COLOCATED).
bool ServesDecode(proto::NodeRole role);
// True for roles that take PrefillRequests with a reservation (PREFILL).
bool ServesPrefill(proto::NodeRole role);

// The decode node for the next request; nullopt when none is usable.
std::optional<uint32_t> PickDecode(const std::vector<NodeView>& nodes);
// The prefill node for a prompt of `prompt_tokens` tokens; nullopt when none is usable.
std::optional<uint32_t> PickPrefill(const std::vector<NodeView>& nodes, int64_t prompt_tokens);

// Prompt tokens `node` would compute: those past its cached prefix.
int64_t UncachedTokens(const NodeView& node, int64_t prompt_tokens);

}  // namespace tandem::router::cluster
