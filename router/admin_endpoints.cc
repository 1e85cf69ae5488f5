#include "router/admin_endpoints.h"

#include "router/api_error.h"

namespace tandem::router {
namespace {

using nlohmann::json;

constexpr std::string_view kNodesPath = "/admin/nodes";
constexpr std::string_view kNodesPrefix = "/admin/nodes/";
constexpr std::string_view kDrainSuffix = "/drain";
constexpr std::string_view kReadyPath = "/admin/ready";

JsonReply Error(int http_status, std::string message, std::string code = "") {
  ApiError error;
  error.http_status = http_status;
  error.message = std::move(message);
  error.code = std::move(code);
  return JsonReply{http_status, error.ToBody(), {}};
}

JsonReply ErrorFromStatus(const Status& status) {
  switch (status.code()) {
    case StatusCode::kNotFound: return Error(404, status.message(), "node_not_found");
    case StatusCode::kFailedPrecondition: return Error(409, status.message(), "ambiguous_node");
    default: return Error(500, status.message());
  }
}

JsonReply Drain(ClusterAdmin& admin, std::string_view escaped_node) {
  std::optional<std::string> node = PercentDecode(escaped_node);
  if (!node || node->empty()) return Error(400, "malformed node in the path (want /admin/nodes/{node}/drain)");
  StatusOr<NodeStatus> drained = admin.Drain(*node);
  if (!drained.ok()) return ErrorFromStatus(drained.status());
  return JsonReply{202, DumpJson(json{{"node", NodeStatusJson(*drained)}}), {}};
}

}  // namespace

JsonReply HandleAdmin(const AdminAuth& auth, ClusterAdmin* admin, std::string_view method, std::string_view path,
                      std::string_view authorization) {
  if (admin == nullptr) return Error(404, "this server has no cluster to administer");
  if (!auth.enabled()) {
    return Error(403, "the admin API is off: configure admin_key or admin_key_file on tandem-router", "admin_disabled");
  }
  if (!auth.Check(authorization)) return Error(401, "invalid or missing admin key", "invalid_admin_key");
  const bool get = method == "GET";
  const bool post = method == "POST";
  if (path == kNodesPath) {
    if (!get) return Error(405, "use GET for " + std::string(path));
    json nodes = json::array();
    for (const NodeStatus& node : admin->ListNodes()) nodes.push_back(NodeStatusJson(node));
    return JsonReply{200, DumpJson(json{{"nodes", std::move(nodes)}}), {}};
  }
  if (path == kReadyPath) {
    if (!get) return Error(405, "use GET for " + std::string(path));
    const ClusterReadiness readiness = ComputeReadiness(admin->ListNodes(), admin->colocated_mode());
    return JsonReply{readiness.ready() ? 200 : 503, DumpJson(ReadinessJson(readiness)), {}};
  }
  if (path.starts_with(kNodesPrefix) && path.ends_with(kDrainSuffix) &&
      path.size() > kNodesPrefix.size() + kDrainSuffix.size()) {
    if (!post) return Error(405, "use POST for " + std::string(path));
    return Drain(*admin, path.substr(kNodesPrefix.size(), path.size() - kNodesPrefix.size() - kDrainSuffix.size()));
  }
  return Error(404, "no admin route for " + std::string(path));
}

json NodeStatusJson(const NodeStatus& node) {
  json out = {
      {"id", node.id},
      {"name", node.name},
      {"role", node.role},
      {"address", node.address},
      {"state", NodeStateName(node.state)},
      {"avoided", node.avoided},
      {"load",
       {{"router_requests", node.router_requests},
        {"router_prefill_tokens", node.router_prefill_tokens},
        {"running", node.running},
        {"waiting", node.waiting},
        {"reservations", node.reservations},
        {"queued_prefill_tokens", node.queued_prefill_tokens}}},
      {"kv",
       {{"gpu_used_blocks", node.kv_gpu_used_blocks},
        {"gpu_total_blocks", node.kv_gpu_total_blocks},
        {"host_used_blocks", node.kv_host_used_blocks},
        {"host_total_blocks", node.kv_host_total_blocks},
        {"cached_blocks", node.cached_blocks}}},
      {"version", node.version},
      {"protocol_version", node.protocol_version},
      {"registered_ms", node.registered_age_ms},
      {"last_heartbeat_ms", node.last_heartbeat_age_ms < 0 ? json(nullptr) : json(node.last_heartbeat_age_ms)},
  };
  if (node.state == NodeState::kDead) {
    out["dead_reason"] = node.dead_reason;
    out["dead_ms"] = node.dead_age_ms;
  }
  return out;
}

json ReadinessJson(const ClusterReadiness& readiness) {
  const std::vector<std::string> missing = readiness.missing();
  std::string message = "ready";
  if (!missing.empty()) {
    message.clear();
    for (const std::string& pool : missing) message += (message.empty() ? "" : "; ") + ("no ready " + pool + " node");
  }
  json pools = json::object();
  for (const PoolReadiness& pool : readiness.pools) {
    pools[pool.pool] = {{"required", pool.required}, {"ready", pool.ready}, {"draining", pool.draining}};
  }
  return {{"ready", readiness.ready()}, {"serving", readiness.serving()},
          {"mode", readiness.mode},     {"missing", missing},
          {"message", message},         {"pools", std::move(pools)}};
}

}  // namespace tandem::router
