#include "router/cluster/placement.h"

#include <algorithm>

namespace tandem::router::cluster {

bool ServesDecode(proto::NodeRole role) {
  return role == proto::NODE_ROLE_DECODE || role == proto::NODE_ROLE_COLOCATED;
}

bool ServesPrefill(proto::NodeRole role) { return role == proto::NODE_ROLE_PREFILL; }

namespace {

// Whether placement may take `n` in this pass: the first pass passes over avoided nodes.
bool Usable(const NodeView& n, bool take_avoided) { return n.alive && !n.draining && (take_avoided || !n.avoided); }

}  // namespace

std::optional<uint32_t> PickDecode(const std::vector<NodeView>& nodes) {
  // Avoided nodes only when no other can take the request: a slow only decode node still serves.
  auto pick = [&](bool take_avoided) -> std::optional<uint32_t> {
    std::optional<uint32_t> best;
    double best_score = 0;
    for (const NodeView& n : nodes) {
      if (!Usable(n, take_avoided) || !ServesDecode(n.role)) continue;
      const int64_t load = std::max<int64_t>(int64_t{n.num_running} + n.num_waiting, n.router_inflight);
      const int64_t blocks = std::max<int64_t>(n.free_gpu_blocks, 0) + std::max<int64_t>(n.prefix_hit_blocks, 0);
      const double score = static_cast<double>(blocks) / static_cast<double>(1 + load);
      if (!best || score > best_score || (score == best_score && n.node_id < *best)) {
        best = n.node_id;
        best_score = score;
      }
    }
    return best;
  };
  std::optional<uint32_t> best = pick(/*take_avoided=*/false);
  return best ? best : pick(/*take_avoided=*/true);
}

int64_t UncachedTokens(const NodeView& node, int64_t prompt_tokens) {
  return std::max<int64_t>(prompt_tokens - std::max<int64_t>(node.prefix_hit_tokens, 0), 0);
}

std::optional<uint32_t> PickPrefill(const std::vector<NodeView>& nodes, int64_t prompt_tokens) {
  std::optional<uint32_t> best;
  int64_t best_work = 0;
  for (const NodeView& n : nodes) {
    // An avoided prefill node is passed over: the decode node prefills instead.
    if (!Usable(n, /*take_avoided=*/false) || !ServesPrefill(n.role)) continue;
    const int64_t work = std::max(n.queued_prefill_tokens, n.router_prefill_tokens) + UncachedTokens(n, prompt_tokens);
    if (!best || work < best_work || (work == best_work && n.node_id < *best)) {
      best = n.node_id;
      best_work = work;
    }
  }
  return best;
}

}  // namespace tandem::router::cluster
