// The operator endpoints without sockets (admin_endpoints.h): the admin key
// (off, missing, wrong, right; never an API key), the routes and their JSON
// over a fake ClusterAdmin, and the readiness of each serving mode.
#include "router/admin_endpoints.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "router/router_config.h"

namespace tandem::router {
namespace {

using nlohmann::json;

constexpr char kAdminKey[] = "admin-key-0123456789abcdef";
const std::string kBearer = std::string("Bearer ") + kAdminKey;

NodeStatus Node(uint32_t id, std::string name, std::string role, NodeState state) {
  NodeStatus node;
  node.id = id;
  node.name = std::move(name);
  node.role = std::move(role);
  node.address = "127.0.0.1:" + std::to_string(7100 + id);
  node.state = state;
  return node;
}

class FakeClusterAdmin : public ClusterAdmin {
 public:
  std::vector<NodeStatus> ListNodes() const override { return nodes; }
  StatusOr<NodeStatus> Drain(std::string_view node) override {
    drained.emplace_back(node);
    if (node == "twin") return FailedPreconditionError("2 live nodes are named 'twin'");
    for (NodeStatus& n : nodes) {
      if (n.name == node && n.state != NodeState::kDead) {
        n.state = NodeState::kDraining;
        return n;
      }
    }
    return NotFoundError("no live node with id, name or address '" + std::string(node) + "'");
  }
  bool colocated_mode() const override { return colocated; }

  std::vector<NodeStatus> nodes;
  std::vector<std::string> drained;
  bool colocated = false;
};

json Body(const JsonReply& reply) { return json::parse(reply.body, nullptr, false); }

TEST(AdminAuthTest, NeverOpenAndOnlyTheAdminKey) {
  const AdminAuth off("");
  EXPECT_FALSE(off.enabled());
  EXPECT_FALSE(off.Check(""));
  EXPECT_FALSE(off.Check("Bearer anything"));

  const AdminAuth on(kAdminKey);
  EXPECT_TRUE(on.enabled());
  EXPECT_TRUE(on.Check(kBearer));
  EXPECT_TRUE(on.Check(std::string("bearer ") + kAdminKey));  // the scheme is case-insensitive
  EXPECT_FALSE(on.Check(""));
  EXPECT_FALSE(on.Check(kAdminKey));  // no scheme
  EXPECT_FALSE(on.Check("Bearer admin-key-0123456789abcdeF"));
  EXPECT_FALSE(on.Check("Bearer admin-key-0123456789abcde"));  // a prefix
  EXPECT_FALSE(on.Check(kBearer + "x"));
}

TEST(AdminConfigTest, TheAdminKeyIsLongAndUnlikeEveryApiKey) {
  RouterConfig config;
  config.admin_key = "short-key";
  EXPECT_NE(config.Validate().message().find("admin_key is shorter than 16 bytes"), std::string::npos);
  config.admin_key = kAdminKey;
  EXPECT_TRUE(config.Validate().ok());
  config.api_keys = {{kAdminKey, "team"}};
  const Status same = config.Validate();
  EXPECT_NE(same.message().find("admin_key equals an API key"), std::string::npos) << same.ToString();
  EXPECT_EQ(same.message().find(kAdminKey), std::string::npos) << "the key leaked";
}

TEST(AdminEndpointsTest, RefusesWithoutAClusterAKeyOrTheRightKey) {
  FakeClusterAdmin admin;
  const AdminAuth on(kAdminKey);
  JsonReply r = HandleAdmin(on, nullptr, "GET", "/admin/nodes", kBearer);
  EXPECT_EQ(r.http_status, 404) << r.body;

  r = HandleAdmin(AdminAuth(""), &admin, "GET", "/admin/nodes", kBearer);
  EXPECT_EQ(r.http_status, 403);
  EXPECT_EQ(Body(r)["error"]["code"], "admin_disabled");
  EXPECT_NE(Body(r)["error"]["message"].get<std::string>().find("admin_key"), std::string::npos);

  for (const std::string& header : {std::string(), std::string("Bearer wrong-key-0123456789abcdef")}) {
    r = HandleAdmin(on, &admin, "GET", "/admin/nodes", header);
    EXPECT_EQ(r.http_status, 401) << "'" << header << "'";
    EXPECT_EQ(Body(r)["error"]["code"], "invalid_admin_key");
  }
  // Nothing is revealed or done before the key checks out: not even whether a route exists.
  EXPECT_EQ(HandleAdmin(on, &admin, "POST", "/admin/nodes/d1/drain", "").http_status, 401);
  EXPECT_EQ(HandleAdmin(on, &admin, "GET", "/admin/nope", "").http_status, 401);
  EXPECT_TRUE(admin.drained.empty());
}

TEST(AdminEndpointsTest, ListsNodesWithTheirStateLoadKvAndVersion) {
  FakeClusterAdmin admin;
  NodeStatus d1 = Node(1, "d1", "decode", NodeState::kReady);
  d1.router_requests = 3;
  d1.running = 2;
  d1.waiting = 1;
  d1.reservations = 1;
  d1.kv_gpu_used_blocks = 40;
  d1.kv_gpu_total_blocks = 512;
  d1.cached_blocks = 12;
  d1.version = "0.1.0";
  d1.protocol_version = 1;
  d1.last_heartbeat_age_ms = 120;
  NodeStatus p = Node(2, "p", "prefill", NodeState::kStarting);
  NodeStatus gone = Node(3, "d2", "decode", NodeState::kDead);
  gone.dead_reason = "connection closed (while draining)";
  gone.dead_age_ms = 2500;
  admin.nodes = {d1, p, gone};
  JsonReply r = HandleAdmin(AdminAuth(kAdminKey), &admin, "GET", "/admin/nodes", kBearer);
  ASSERT_EQ(r.http_status, 200) << r.body;
  const json nodes = Body(r)["nodes"];
  ASSERT_EQ(nodes.size(), 3u) << r.body;
  EXPECT_EQ(nodes[0]["id"], 1);
  EXPECT_EQ(nodes[0]["name"], "d1");
  EXPECT_EQ(nodes[0]["role"], "decode");
  EXPECT_EQ(nodes[0]["address"], "127.0.0.1:7101");
  EXPECT_EQ(nodes[0]["state"], "ready");
  EXPECT_EQ(nodes[0]["load"]["router_requests"], 3);
  EXPECT_EQ(nodes[0]["load"]["running"], 2);
  EXPECT_EQ(nodes[0]["load"]["waiting"], 1);
  EXPECT_EQ(nodes[0]["load"]["reservations"], 1);
  EXPECT_EQ(nodes[0]["kv"]["gpu_used_blocks"], 40);
  EXPECT_EQ(nodes[0]["kv"]["gpu_total_blocks"], 512);
  EXPECT_EQ(nodes[0]["kv"]["cached_blocks"], 12);
  EXPECT_EQ(nodes[0]["version"], "0.1.0");
  EXPECT_EQ(nodes[0]["protocol_version"], 1);
  EXPECT_EQ(nodes[0]["last_heartbeat_ms"], 120);
  EXPECT_FALSE(nodes[0].contains("dead_reason"));
  EXPECT_EQ(nodes[1]["state"], "starting");
  EXPECT_TRUE(nodes[1]["last_heartbeat_ms"].is_null());
  EXPECT_EQ(nodes[2]["state"], "dead");
  EXPECT_EQ(nodes[2]["dead_reason"], "connection closed (while draining)");
  EXPECT_EQ(nodes[2]["dead_ms"], 2500);
  EXPECT_EQ(HandleAdmin(AdminAuth(kAdminKey), &admin, "POST", "/admin/nodes", kBearer).http_status, 405);
}

TEST(AdminEndpointsTest, DrainsANodeByNameAndSaysWhyItCannot) {
  FakeClusterAdmin admin;
  admin.nodes = {Node(1, "d1", "decode", NodeState::kReady), Node(2, "decode 2", "decode", NodeState::kReady)};
  const AdminAuth auth(kAdminKey);
  JsonReply r = HandleAdmin(auth, &admin, "POST", "/admin/nodes/d1/drain", kBearer);
  ASSERT_EQ(r.http_status, 202) << r.body;
  EXPECT_EQ(Body(r)["node"]["name"], "d1");
  EXPECT_EQ(Body(r)["node"]["state"], "draining");
  r = HandleAdmin(auth, &admin, "POST", "/admin/nodes/decode%202/drain", kBearer);  // escapes decoded
  EXPECT_EQ(r.http_status, 202) << r.body;
  r = HandleAdmin(auth, &admin, "POST", "/admin/nodes/nobody/drain", kBearer);
  EXPECT_EQ(r.http_status, 404);
  EXPECT_EQ(Body(r)["error"]["code"], "node_not_found");
  r = HandleAdmin(auth, &admin, "POST", "/admin/nodes/twin/drain", kBearer);
  EXPECT_EQ(r.http_status, 409);
  EXPECT_EQ(Body(r)["error"]["code"], "ambiguous_node");
  EXPECT_EQ(admin.drained, (std::vector<std::string>{"d1", "decode 2", "nobody", "twin"}));
  EXPECT_EQ(HandleAdmin(auth, &admin, "GET", "/admin/nodes/d1/drain", kBearer).http_status, 405);
  EXPECT_EQ(HandleAdmin(auth, &admin, "POST", "/admin/nodes/%zz/drain", kBearer).http_status, 400);
  EXPECT_EQ(HandleAdmin(auth, &admin, "POST", "/admin/nodes//drain", kBearer).http_status, 404);
  EXPECT_EQ(admin.drained.size(), 4u) << "a refused call drained something";
}

TEST(AdminEndpointsTest, ReadinessNamesTheMissingPool) {
  FakeClusterAdmin admin;
  const AdminAuth auth(kAdminKey);
  auto ready = [&] { return HandleAdmin(auth, &admin, "GET", "/admin/ready", kBearer); };
  JsonReply r = ready();
  EXPECT_EQ(r.http_status, 503);
  EXPECT_EQ(Body(r)["missing"], json({"decode", "prefill"}));
  EXPECT_EQ(Body(r)["message"], "no ready decode node; no ready prefill node");
  EXPECT_EQ(Body(r)["serving"], false);

  admin.nodes = {Node(1, "d1", "decode", NodeState::kReady), Node(2, "p", "prefill", NodeState::kDraining),
                 Node(3, "p2", "prefill", NodeState::kDead)};
  r = ready();
  EXPECT_EQ(r.http_status, 503) << r.body;
  EXPECT_EQ(Body(r)["missing"], json({"prefill"}));
  EXPECT_EQ(Body(r)["message"], "no ready prefill node");
  EXPECT_EQ(Body(r)["serving"], true) << "decode nodes prefill locally meanwhile";
  EXPECT_EQ(Body(r)["mode"], "disaggregated");
  EXPECT_EQ(Body(r)["pools"]["prefill"]["draining"], 1);
  EXPECT_EQ(Body(r)["pools"]["prefill"]["ready"], 0) << "a dead node counts nowhere";

  admin.colocated = true;  // colocated mode needs decode only
  r = ready();
  EXPECT_EQ(r.http_status, 200) << r.body;
  EXPECT_EQ(Body(r)["ready"], true);
  EXPECT_EQ(Body(r)["message"], "ready");
  EXPECT_EQ(Body(r)["pools"]["prefill"]["required"], false);

  admin.colocated = false;
  admin.nodes = {Node(1, "c1", "colocated", NodeState::kStarting), Node(2, "p", "prefill", NodeState::kReady),
                 Node(3, "d1", "decode", NodeState::kDraining)};
  r = ready();
  EXPECT_EQ(r.http_status, 200) << r.body;
  EXPECT_EQ(Body(r)["pools"]["decode"]["ready"], 1) << "a colocated node serves decode; starting takes work";
  EXPECT_EQ(Body(r)["pools"]["decode"]["draining"], 1);
  admin.nodes[0].state = NodeState::kDraining;
  r = ready();
  EXPECT_EQ(r.http_status, 503);
  EXPECT_EQ(Body(r)["missing"], json({"decode"}));
  EXPECT_EQ(Body(r)["serving"], false);
  EXPECT_EQ(HandleAdmin(auth, &admin, "DELETE", "/admin/ready", kBearer).http_status, 405);
}

}  // namespace
}  // namespace tandem::router
