// The operator view of the cluster: the registry's node states (starting, ready,
// draining, dead) with load, KV and version on a fake clock, the bounded list of
// dead nodes, finding a node by id, name or address; and through the real HTTP
// server with fake nodes: /admin/nodes, a drain that stops placement at once and
// reaches the node, /admin/ready naming the missing pool, and the admin key.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "router/cluster/node_registry.h"
#include "tests/router/cluster/cluster_http_fixture.h"
#include "tests/router/cluster/fake_node.h"
#include "tests/router/fake_text_codec.h"
#include "tests/router/test_http_client.h"

namespace tandem::router::cluster {
namespace {

using nlohmann::json;
using router::testing::HttpResult;
using testing::FakeNode;

constexpr char kAdminKey[] = "cluster-admin-key-0123456789";

// The registry over real connections (registration needs one), on a fake clock.
class RegistryStatusTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ClusterConfig config;
    config.control_address = "127.0.0.1:0";
    config.cluster_token = testing::kToken;
    auto engine = ClusterClient::Start(loop_, config);
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    engine_ = std::move(*engine);
  }
  void TearDown() override { engine_->Stop(); }

  std::shared_ptr<net::RpcConnection> Connect() {
    net::RpcClientConfig client_config;
    client_config.rpc.cluster_token = testing::kToken;
    auto client = net::RpcClient::Create(loop_, client_config, {});
    TANDEM_CHECK(client.ok());
    auto conn = (*client)->Connect(engine_->control_address());
    TANDEM_CHECK(conn.ok());
    clients_.push_back(std::move(*client));
    return *conn;
  }
  static proto::RegisterRequest Registration(proto::NodeRole role, const std::string& name, int port) {
    proto::RegisterRequest reg;
    reg.set_role(role);
    reg.set_node_name(name);
    reg.set_address("127.0.0.1:" + std::to_string(port));
    reg.mutable_capacity()->set_num_gpu_blocks(64);
    reg.mutable_capacity()->set_num_host_blocks(128);
    reg.set_build_version("9.8.7");
    reg.set_protocol_version(1);
    return reg;
  }

  // Destroyed bottom-up: the registry lets go of its connections before the loop they run on goes.
  net::EventLoop loop_{1};
  std::unique_ptr<ClusterClient> engine_;
  std::vector<std::unique_ptr<net::RpcClient>> clients_;
  FakeClock clock_;
  NodeRegistry registry_{clock_, 100, /*dead_after_ms=*/1000};
};

TEST_F(RegistryStatusTest, StatesFollowHeartbeatsDrainsAndDeath) {
  auto conn = Connect();
  auto reply = registry_.Register(conn, Registration(proto::NODE_ROLE_DECODE, "d1", 7101));
  ASSERT_TRUE(reply.ok());
  const NodeId id = reply->node_id();
  std::vector<NodeStatus> nodes = registry_.Statuses();
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(nodes[0].id, id);
  EXPECT_EQ(nodes[0].name, "d1");
  EXPECT_EQ(nodes[0].role, "decode");
  EXPECT_EQ(nodes[0].address, "127.0.0.1:7101");
  EXPECT_EQ(nodes[0].state, NodeState::kStarting);
  EXPECT_EQ(nodes[0].version, "9.8.7");
  EXPECT_EQ(nodes[0].protocol_version, 1u);
  EXPECT_EQ(nodes[0].kv_gpu_total_blocks, 64) << "the registered capacity until a heartbeat";
  EXPECT_EQ(nodes[0].kv_host_total_blocks, 128);
  EXPECT_EQ(nodes[0].kv_gpu_used_blocks, 0);
  EXPECT_EQ(nodes[0].last_heartbeat_age_ms, -1);

  clock_.Advance(30'000'000);
  proto::Heartbeat hb;
  hb.set_node_id(id);
  hb.mutable_load()->set_num_running(2);
  hb.mutable_load()->set_num_waiting(1);
  hb.mutable_load()->set_num_reservations(3);
  proto::TierUsage* gpu = hb.mutable_load()->add_tiers();
  gpu->set_tier(proto::KV_TIER_GPU);
  gpu->set_free_blocks(50);
  gpu->set_total_blocks(64);
  proto::TierUsage* host = hb.mutable_load()->add_tiers();
  host->set_tier(proto::KV_TIER_HOST);
  host->set_free_blocks(120);
  host->set_total_blocks(128);
  registry_.OnHeartbeat(conn.get(), hb);
  registry_.AddInflight(id, 4, 0);
  clock_.Advance(20'000'000);
  nodes = registry_.Statuses();
  EXPECT_EQ(nodes[0].state, NodeState::kReady);
  EXPECT_EQ(nodes[0].running, 2);
  EXPECT_EQ(nodes[0].waiting, 1);
  EXPECT_EQ(nodes[0].reservations, 3);
  EXPECT_EQ(nodes[0].router_requests, 4);
  EXPECT_EQ(nodes[0].kv_gpu_used_blocks, 14);
  EXPECT_EQ(nodes[0].kv_host_used_blocks, 8);
  EXPECT_EQ(nodes[0].last_heartbeat_age_ms, 20);
  EXPECT_EQ(nodes[0].registered_age_ms, 50);

  // An operator's drain holds whatever the heartbeats say, and placement passes it over.
  EXPECT_TRUE(registry_.RequestDrain(id));
  EXPECT_FALSE(registry_.RequestDrain(id)) << "already draining";
  EXPECT_FALSE(registry_.RequestDrain(id + 100)) << "unknown id";
  EXPECT_EQ(registry_.OnHeartbeat(conn.get(), hb), 0u) << "no second start of the drain";
  EXPECT_EQ(registry_.Statuses()[0].state, NodeState::kDraining);
  EXPECT_FALSE(PickDecode(registry_.Views()).has_value());
  EXPECT_FALSE(registry_.HasDecodeNode());

  // It leaves: dead, with why, kept after the live nodes.
  auto other = Connect();
  ASSERT_TRUE(registry_.Register(other, Registration(proto::NODE_ROLE_PREFILL, "p", 7201)).ok());
  ASSERT_TRUE(registry_.OnConnectionClosed(conn.get(), "connection closed: peer gone").has_value());
  clock_.Advance(5'000'000);
  nodes = registry_.Statuses();
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes[0].name, "p");
  EXPECT_EQ(nodes[0].role, "prefill");
  EXPECT_EQ(nodes[1].name, "d1");
  EXPECT_EQ(nodes[1].state, NodeState::kDead);
  EXPECT_EQ(nodes[1].dead_reason, "connection closed: peer gone (while draining)");
  EXPECT_EQ(nodes[1].dead_age_ms, 5);
  EXPECT_EQ(nodes[1].kv_gpu_used_blocks, 14) << "as it was when it died";

  // Silence kills too, and says so.
  clock_.Advance(1'001'000'000);
  ASSERT_EQ(registry_.SweepExpired().size(), 1u);
  nodes = registry_.Statuses();
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes[0].name, "p") << "most recent death first";
  EXPECT_EQ(nodes[0].state, NodeState::kDead);
  EXPECT_EQ(nodes[0].dead_reason, "silent for 1000 ms");
}

TEST_F(RegistryStatusTest, KeepsOnlyTheMostRecentDeadNodes) {
  auto conn = Connect();
  for (int i = 0; i < static_cast<int>(kMaxDeadNodes) + 8; ++i) {
    ASSERT_TRUE(registry_.Register(conn, Registration(proto::NODE_ROLE_DECODE, "n" + std::to_string(i), 7000)).ok());
    ASSERT_TRUE(registry_.OnConnectionClosed(conn.get()).has_value());
  }
  const std::vector<NodeStatus> nodes = registry_.Statuses();
  ASSERT_EQ(nodes.size(), kMaxDeadNodes);
  EXPECT_EQ(nodes.front().name, "n" + std::to_string(kMaxDeadNodes + 7));
  EXPECT_EQ(nodes.back().name, "n8");
}

TEST_F(RegistryStatusTest, FindsANodeByIdNameOrAddress) {
  auto a = Connect();
  auto b = Connect();
  auto c = Connect();
  const NodeId d1 = registry_.Register(a, Registration(proto::NODE_ROLE_DECODE, "d1", 7101))->node_id();
  const NodeId twin1 = registry_.Register(b, Registration(proto::NODE_ROLE_DECODE, "twin", 7102))->node_id();
  const NodeId twin2 = registry_.Register(c, Registration(proto::NODE_ROLE_PREFILL, "twin", 7201))->node_id();
  EXPECT_EQ(*registry_.Resolve("d1"), d1);
  EXPECT_EQ(*registry_.Resolve(std::to_string(twin2)), twin2);
  EXPECT_EQ(*registry_.Resolve("127.0.0.1:7102"), twin1);
  const Status shared = registry_.Resolve("twin").status();
  EXPECT_EQ(shared.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(shared.message().find("2 live nodes are named 'twin' (ids " + std::to_string(twin1) + ", " +
                                  std::to_string(twin2) + ")"),
            std::string::npos)
      << shared.ToString();
  EXPECT_EQ(registry_.Resolve("nobody").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(registry_.Resolve("999").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(registry_.Resolve("").status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(registry_.OnConnectionClosed(a.get()).has_value());
  EXPECT_EQ(registry_.Resolve("d1").status().code(), StatusCode::kNotFound) << "a dead node is not drained";
}

class ClusterAdminHttpTest : public testing::ClusterHttpFixture {
 protected:
  HttpResult Admin(const std::string& method, const std::string& target, const std::string& key = kAdminKey) {
    router::testing::Headers headers;
    if (!key.empty()) headers.emplace_back("Authorization", "Bearer " + key);
    return router::testing::Send(port_, method, target, "", headers);
  }
  json Nodes() { return Admin("GET", "/admin/nodes").Json()["nodes"]; }
  json NodeNamed(const std::string& name) {
    for (const json& node : Nodes()) {
      if (node["name"] == name) return node;
    }
    return json();
  }
};

TEST_F(ClusterAdminHttpTest, OffWithoutAnAdminKeyAndNeverAnApiKey) {
  Start();
  EXPECT_EQ(Admin("GET", "/admin/nodes").status, 403);
  EXPECT_EQ(Admin("GET", "/admin/ready", "").status, 403);
}

TEST_F(ClusterAdminHttpTest, ListsDrainsAndSaysWhichPoolIsMissing) {
  Start({}, 100, kAdminKey);
  FakeNode& d0 = AddNode(proto::NODE_ROLE_DECODE, "d0");
  FakeNode& d1 = AddNode(proto::NODE_ROLE_DECODE, "d1");
  FakeNode& p0 = AddPrefill(d1, "p0");
  d1.SetScript({{router::testing::kWordBase, router::testing::kEos}});
  EXPECT_EQ(Admin("GET", "/admin/nodes", "").status, 401);
  EXPECT_EQ(Admin("GET", "/admin/nodes", "wrong-admin-key-0123456789").status, 401);
  ASSERT_TRUE(d0.WaitFor([&] { return NodeNamed("p0")["state"] == "ready"; })) << Nodes();
  ASSERT_EQ(Nodes().size(), 3u);
  EXPECT_EQ(NodeNamed("d0")["role"], "decode");
  EXPECT_EQ(NodeNamed("p0")["role"], "prefill");
  EXPECT_EQ(NodeNamed("d1")["address"], d1.address());
  EXPECT_EQ(Admin("GET", "/admin/ready").status, 200);

  // Drained: placement stops at once, and the node hears of it.
  HttpResult drained = Admin("POST", "/admin/nodes/d0/drain");
  ASSERT_EQ(drained.status, 202) << drained.body;
  EXPECT_EQ(drained.Json()["node"]["state"], "draining");
  ASSERT_TRUE(d0.WaitFor([&] { return d0.drains().size() == 1; }));
  EXPECT_EQ(d0.drains()[0].reason(), "operator request");
  const size_t d0_reserves = d0.reserves().size();
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(router::testing::Post(port_, "/v1/completions", {{"prompt", "x"}, {"max_tokens", 2}}).status, 200);
  }
  EXPECT_EQ(d0.reserves().size(), d0_reserves) << "new work went to the drained node";
  EXPECT_EQ(d1.reserves().size(), 4u);
  EXPECT_EQ(NodeNamed("d0")["state"], "draining");
  EXPECT_EQ(Admin("POST", "/admin/nodes/nobody/drain").status, 404);
  EXPECT_EQ(Admin("POST", "/admin/nodes/" + std::to_string(d1.node_id() + 100) + "/drain").status, 404);

  // It leaves: dead, with why; the pools still serve.
  d0.Kill();
  ASSERT_TRUE(d1.WaitFor([&] { return NodeNamed("d0")["state"] == "dead"; })) << Nodes();
  EXPECT_NE(NodeNamed("d0")["dead_reason"].get<std::string>().find("(while draining)"), std::string::npos);
  EXPECT_EQ(Admin("GET", "/admin/ready").status, 200);

  // No prefill node: the cluster serves (decode prefills locally) but is not ready as configured.
  p0.Kill();
  ASSERT_TRUE(d1.WaitFor([&] { return Admin("GET", "/admin/ready").status == 503; }));
  HttpResult ready = Admin("GET", "/admin/ready");
  EXPECT_EQ(ready.Json()["missing"], json({"prefill"})) << ready.body;
  EXPECT_EQ(ready.Json()["serving"], true);
  EXPECT_EQ(router::testing::Send(port_, "GET", "/health/ready", "").status, 200);
  d1.Kill();
  ASSERT_TRUE(d1.WaitFor([&] { return Admin("GET", "/admin/ready").Json()["missing"].size() == 2; }));
  EXPECT_EQ(Admin("GET", "/admin/ready").Json()["message"], "no ready decode node; no ready prefill node");
}

}  // namespace
}  // namespace tandem::router::cluster
