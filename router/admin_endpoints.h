// The operator endpoints, behind the admin key (never an API key), without sockets:
//   GET  /admin/nodes                 {"nodes": [node, ...]}: live nodes, then the recently dead
//   POST /admin/nodes/{node}/drain    202 {"node": node}: placement stops, the node is told to drain
//   GET  /admin/ready                 200 or 503 {"ready", "serving", "mode", "missing", "message", "pools"}
// {node} is a node id, a name only one live node has, or a control address
// (percent-escapes decoded). The JSON shapes are in router/README.md ("Operator
// API"). Errors are OpenAI-shaped (api_error.h): 403 admin_disabled when no
// admin key is configured, 401 invalid_admin_key, 404 (route, or node_not_found),
// 405, 409 ambiguous_node.
// Thread rule: HandleAdmin is as thread-safe as the ClusterAdmin it calls.
#pragma once

#include <nlohmann/json.hpp>

#include <string_view>

#include "router/admin_auth.h"
#include "router/cluster_admin.h"
#include "router/utility_endpoints.h"

namespace tandem::router {

// Answers an /admin/ request. `admin` null = this server has no cluster (404).
// `path` has no query string; `authorization` is the header's value ("" if absent).
JsonReply HandleAdmin(const AdminAuth& auth, ClusterAdmin* admin, std::string_view method, std::string_view path,
                      std::string_view authorization);

// The JSON of one node and of the readiness (router/README.md, "Operator API").
nlohmann::json NodeStatusJson(const NodeStatus& node);
nlohmann::json ReadinessJson(const ClusterReadiness& readiness);

}  // namespace tandem::router
