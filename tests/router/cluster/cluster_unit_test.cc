// Unit tests of the router's cluster parts without the HTTP server: placement
// (pure), the registry's liveness rules on a fake clock, config parsing, and
// the tenant salt against precomputed SHA-256 values.
#include <gtest/gtest.h>

#include "common/net/event_loop.h"
#include "router/cluster/cluster_client.h"
#include "router/cluster/cluster_config.h"
#include "router/cluster/node_messages.h"
#include "router/cluster/node_registry.h"
#include "router/cluster/placement.h"
#include "router/cluster/tenant_salt.h"
#include "tests/router/cluster/fake_node.h"

namespace tandem::router::cluster {
namespace {

using config::FromYaml;

NodeView Decode(uint32_t id, int64_t free_blocks, int running, int waiting) {
  NodeView v;
  v.node_id = id;
  v.role = proto::NODE_ROLE_DECODE;
  v.free_gpu_blocks = free_blocks;
  v.num_running = running;
  v.num_waiting = waiting;
  return v;
}

NodeView Prefill(uint32_t id, int64_t queued) {
  NodeView v;
  v.node_id = id;
  v.role = proto::NODE_ROLE_PREFILL;
  v.queued_prefill_tokens = queued;
  return v;
}

TEST(PlacementTest, DecodeByFreeBlocksAndLoad) {
  // Equal load: more free blocks wins.
  EXPECT_EQ(PickDecode({Decode(1, 10, 0, 0), Decode(2, 50, 0, 0)}), 2u);
  // Equal blocks: less load wins (running + waiting both count).
  EXPECT_EQ(PickDecode({Decode(1, 50, 1, 3), Decode(2, 50, 2, 0)}), 2u);
  // 100 free / (1 + 4) = 20 beats 30 / (1 + 0) = 30? No: 30 > 20, so node 2.
  EXPECT_EQ(PickDecode({Decode(1, 100, 4, 0), Decode(2, 30, 0, 0)}), 2u);
  EXPECT_EQ(PickDecode({Decode(1, 100, 1, 0), Decode(2, 30, 0, 0)}), 1u);  // 50 > 30
  // Router-side in-flight count counts when heartbeats lag behind.
  NodeView busy = Decode(1, 50, 0, 0);
  busy.router_inflight = 5;
  EXPECT_EQ(PickDecode({busy, Decode(2, 20, 0, 0)}), 2u);  // 50/6 < 20
  // Ties go to the lower id.
  EXPECT_EQ(PickDecode({Decode(7, 10, 0, 0), Decode(3, 10, 0, 0)}), 3u);
}

TEST(PlacementTest, SkipsDrainingDeadAndWrongRoles) {
  NodeView draining = Decode(1, 1000, 0, 0);
  draining.draining = true;
  NodeView dead = Decode(2, 1000, 0, 0);
  dead.alive = false;
  EXPECT_EQ(PickDecode({draining, dead, Decode(3, 1, 9, 9), Prefill(4, 0)}), 3u);
  EXPECT_FALSE(PickDecode({draining, dead, Prefill(4, 0)}).has_value());
  NodeView colocated = Decode(5, 1, 0, 0);
  colocated.role = proto::NODE_ROLE_COLOCATED;
  EXPECT_EQ(PickDecode({colocated}), 5u);
  EXPECT_FALSE(PickPrefill({colocated, Decode(1, 5, 0, 0)}, 10).has_value());
}

TEST(PlacementTest, AnAvoidedNodeIsDecodesLastResortAndNeverPrefills) {
  NodeView slow = Decode(1, 1000, 0, 0);
  slow.avoided = true;
  EXPECT_EQ(PickDecode({slow, Decode(2, 10, 5, 5)}), 2u);
  EXPECT_EQ(PickDecode({slow}), 1u);  // the only decode node: busy is not dead
  NodeView draining = Decode(3, 1000, 0, 0);
  draining.draining = true;
  EXPECT_EQ(PickDecode({draining, slow}), 1u);
  NodeView slow_prefill = Prefill(4, 0);
  slow_prefill.avoided = true;
  EXPECT_FALSE(PickPrefill({slow_prefill}, 64).has_value());
  EXPECT_EQ(PickPrefill({slow_prefill, Prefill(5, 900)}, 64), 5u);
}

TEST(PlacementTest, PrefillByQueuedTokens) {
  EXPECT_EQ(PickPrefill({Prefill(1, 500), Prefill(2, 100), Prefill(3, 300)}, 64), 2u);
  NodeView p2 = Prefill(2, 100);
  p2.router_prefill_tokens = 1000;  // the router just queued a long prompt there
  EXPECT_EQ(PickPrefill({Prefill(1, 500), p2}, 64), 1u);
  NodeView draining = Prefill(3, 0);
  draining.draining = true;
  EXPECT_EQ(PickPrefill({Prefill(1, 500), draining}, 64), 1u);
  EXPECT_EQ(PickPrefill({Prefill(4, 5), Prefill(2, 5)}, 64), 2u);
}

// A prefill node's cached prefix is prompt it does not compute: placement weighs
// queued tokens + the uncached rest of this prompt.
TEST(PlacementTest, PrefillCountsTheCachedPrefixAsWorkSaved) {
  NodeView cached = Prefill(2, 20);
  cached.prefix_hit_tokens = 48;
  EXPECT_EQ(PickPrefill({Prefill(1, 0), cached}, 64), 2u);  // 20 + 16 < 0 + 64
  cached.queued_prefill_tokens = 100;
  EXPECT_EQ(PickPrefill({Prefill(1, 0), cached}, 64), 1u);  // 100 + 16 > 64
  cached.queued_prefill_tokens = 0;
  cached.prefix_hit_tokens = 80;  // a hit longer than the prompt saves the whole prompt, no more
  EXPECT_EQ(UncachedTokens(cached, 64), 0);
  NodeView other = Prefill(1, 0);
  other.router_prefill_tokens = 1;
  EXPECT_EQ(PickPrefill({other, cached}, 64), 2u);
}

// Every message that starts a request on a node carries its class: Reserve, the
// remote prefill, and the local prefill (also a moved request's).
TEST(NodeMessagesTest, EveryRequestMessageCarriesThePriority) {
  GenerateRequest request;
  request.request_id = 3;
  request.prompt_token_ids = {1, 2, 3};
  request.max_tokens = 8;
  const std::vector<TokenId> generated = {4, 5};
  for (PriorityClass priority : {PriorityClass::kInteractive, PriorityClass::kBatch}) {
    request.priority = priority;
    const proto::RequestPriority wire = ToProtoPriority(priority);
    EXPECT_EQ(wire,
              priority == PriorityClass::kBatch ? proto::REQUEST_PRIORITY_BATCH : proto::REQUEST_PRIORITY_INTERACTIVE);
    EXPECT_EQ(MakeReserveRequest(request, 1, "salt", 0).priority(), wire);
    const proto::ReserveReply reservation;
    EXPECT_EQ(MakeRemotePrefillRequest(request, 1, "salt", &reservation, "d:1").priority(), wire);
    EXPECT_EQ(MakeRemotePrefillRequest(request, 1, "salt", nullptr, "d:1").priority(), wire) << "reservation follows";
    EXPECT_EQ(MakeLocalPrefillRequest(request, 1, "salt", {}).priority(), wire);
    EXPECT_EQ(MakeLocalPrefillRequest(request, 2, "salt", generated).priority(), wire) << "a moved request";
  }
}

TEST(NodeMessagesTest, ThePrefillRequestBesideTheReserveHasNoReservation) {
  GenerateRequest request;
  request.request_id = 3;
  request.prompt_token_ids = {1, 2, 3};
  proto::ReserveReply reservation;
  reservation.set_prefix_hit_tokens(16);
  reservation.set_transport_descriptor("target");
  const proto::PrefillRequest with = MakeRemotePrefillRequest(request, 2, "salt", &reservation, "d:1");
  EXPECT_FALSE(with.reservation_follows());
  EXPECT_EQ(with.reservation().transport_descriptor(), "target");
  const proto::PrefillRequest early = MakeRemotePrefillRequest(request, 2, "salt", nullptr, "d:1");
  EXPECT_TRUE(early.reservation_follows());
  EXPECT_FALSE(early.has_reservation());
  EXPECT_EQ(early.decode_address(), "d:1");
  const proto::PrefillTarget target = MakePrefillTarget(3, 2, reservation);
  EXPECT_EQ(target.request_id(), 3u);
  EXPECT_EQ(target.epoch(), 2u);
  EXPECT_EQ(target.reservation().prefix_hit_tokens(), 16);
}

TEST(TenantSaltTest, MatchesSha256Oracle) {
  // Values from: python3 -c "import hashlib; print(hashlib.sha256(b'tandem-tenant:default').hexdigest())"
  EXPECT_EQ(TenantSalt("default"), "42b770fc9a0bb0fce0dc774e999a3336dab4123b3111442207a924513a157820");
  EXPECT_EQ(TenantSalt("acme"), "f5ed51e69493d20eeff01ab41ceea52f03e485e9f7d014f309cadc49c2606317");
  EXPECT_EQ(TenantSalt(""), "0a43fd35390ff5f03378b67cbe39e268419cfc6698dfd9caaa015136e6f24f59");  // anonymous
}

TEST(ClusterConfigTest, ParsesAndValidates) {
  StatusOr<ClusterConfig> config = FromYaml<ClusterConfig>(
      "control_address: 127.0.0.1:7100\ncluster_token: abcdefghijklmnopqrstu\nmode: colocated\n"
      "local_prefill_max_tokens: 64\nheartbeat_interval_ms: 200\n");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->control_address, "127.0.0.1:7100");
  EXPECT_EQ(config->mode, ServingMode::kColocated);
  EXPECT_EQ(config->local_prefill_max_tokens, 64);
  EXPECT_EQ(config->heartbeat_interval_ms, 200);
  EXPECT_EQ(config->node_dead_after_ms, 10000) << "the default: a busy node is not a dead one";
  EXPECT_TRUE(config->Validate().ok());
  config = FromYaml<ClusterConfig>("cluster_token: abcdefghijklmnopqrstu\nnode_dead_after_ms: 1500\n");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->node_dead_after_ms, 1500);
  EXPECT_TRUE(config->Validate().ok());
  config->node_dead_after_ms = 2 * config->heartbeat_interval_ms - 1;  // under two heartbeats
  EXPECT_FALSE(config->Validate().ok());

  EXPECT_FALSE(FromYaml<ClusterConfig>("mode: sideways\n").ok());
  EXPECT_FALSE(FromYaml<ClusterConfig>("control_adress: x:1\n").ok());  // typo = error
  EXPECT_FALSE(FromYaml<ClusterConfig>("heartbeat_interval_ms: [1]\n").ok());
  ClusterConfig c;
  EXPECT_FALSE(c.Validate().ok());  // no token
  c.cluster_token = "short";
  EXPECT_FALSE(c.Validate().ok());
  c.cluster_token = "0123456789abcdef";
  EXPECT_TRUE(c.Validate().ok());
  c.local_prefill_max_tokens = -1;
  EXPECT_FALSE(c.Validate().ok());
}

// The registry over real connections (registration needs one), on a fake clock.
class RegistryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ClusterConfig config;
    config.control_address = "127.0.0.1:0";
    config.cluster_token = testing::kToken;
    config.heartbeat_interval_ms = 100;
    auto engine = ClusterClient::Start(loop_, config);
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    engine_ = std::move(*engine);
  }
  void TearDown() override { engine_->Stop(); }
  net::EventLoop loop_{1};
  std::unique_ptr<ClusterClient> engine_;
};

TEST_F(RegistryTest, HeartbeatTimeoutOnFakeClock) {
  FakeClock clock;
  NodeRegistry registry(clock, 100, /*dead_after_ms=*/300);
  // Registration needs some RpcConnection; any authenticated one will do.
  net::RpcClientConfig client_config;
  client_config.rpc.cluster_token = testing::kToken;
  auto client = net::RpcClient::Create(loop_, client_config, {});
  ASSERT_TRUE(client.ok());
  auto conn = (*client)->Connect(engine_->control_address());
  ASSERT_TRUE(conn.ok());
  proto::RegisterRequest reg;
  reg.set_role(proto::NODE_ROLE_DECODE);
  reg.set_address("127.0.0.1:9");
  reg.mutable_capacity()->set_num_gpu_blocks(40);
  auto reply = registry.Register(*conn, reg);
  ASSERT_TRUE(reply.ok());
  EXPECT_EQ(reply->heartbeat_interval_ms(), 100u);
  EXPECT_TRUE(registry.HasDecodeNode());
  ASSERT_EQ(registry.Views().size(), 1u);
  EXPECT_EQ(registry.Views()[0].free_gpu_blocks, 40);  // capacity until the first heartbeat

  clock.Advance(250'000'000);  // 2.5 intervals: alive
  EXPECT_TRUE(registry.SweepExpired().empty());
  proto::Heartbeat hb;
  hb.set_node_id(reply->node_id());
  hb.mutable_load()->set_num_running(3);
  proto::TierUsage* gpu = hb.mutable_load()->add_tiers();
  gpu->set_tier(proto::KV_TIER_GPU);
  gpu->set_free_blocks(7);
  registry.OnHeartbeat(conn->get(), hb);
  EXPECT_EQ(registry.Views()[0].free_gpu_blocks, 7);
  EXPECT_EQ(registry.Views()[0].num_running, 3);
  clock.Advance(290'000'000);  // 2.9 intervals since the heartbeat: alive
  EXPECT_TRUE(registry.SweepExpired().empty());
  // Tokens count as a sign of life too (a heartbeat may wait behind them).
  registry.MarkSeen(conn->get());
  clock.Advance(290'000'000);
  EXPECT_TRUE(registry.SweepExpired().empty());
  clock.Advance(20'000'000);  // 310 ms of silence: dead
  std::vector<NodeHandle> dead = registry.SweepExpired();
  ASSERT_EQ(dead.size(), 1u);
  EXPECT_EQ(dead[0].node_id, reply->node_id());
  EXPECT_FALSE(registry.HasDecodeNode());
  EXPECT_TRUE(registry.Views().empty());
  // A heartbeat after death does not resurrect it.
  registry.OnHeartbeat(conn->get(), hb);
  EXPECT_FALSE(registry.HasDecodeNode());
}

TEST_F(RegistryTest, DrainingAndClosedNodes) {
  FakeClock clock;
  NodeRegistry registry(clock, 100, /*dead_after_ms=*/300);
  net::RpcClientConfig client_config;
  client_config.rpc.cluster_token = testing::kToken;
  auto client = net::RpcClient::Create(loop_, client_config, {});
  ASSERT_TRUE(client.ok());
  auto conn = (*client)->Connect(engine_->control_address());
  ASSERT_TRUE(conn.ok());
  proto::RegisterRequest reg;
  reg.set_role(proto::NODE_ROLE_PREFILL);
  reg.set_address("127.0.0.1:9");
  ASSERT_TRUE(registry.Register(*conn, reg).ok());
  EXPECT_EQ(registry.Counts().prefill, 1);
  EXPECT_FALSE(registry.HasDecodeNode());
  proto::Heartbeat hb;
  hb.set_draining(true);
  registry.OnHeartbeat(conn->get(), hb);
  EXPECT_EQ(registry.Counts().prefill, 0);
  EXPECT_EQ(registry.Counts().draining, 1);
  EXPECT_FALSE(PickPrefill(registry.Views(), 10).has_value());
  EXPECT_TRUE(registry.OnConnectionClosed(conn->get()).has_value());
  EXPECT_FALSE(registry.OnConnectionClosed(conn->get()).has_value());
  EXPECT_TRUE(registry.Views().empty());
  // Bad registrations are refused.
  reg.set_role(proto::NODE_ROLE_UNSPECIFIED);
  EXPECT_FALSE(registry.Register(*conn, reg).ok());
  reg.set_role(proto::NODE_ROLE_DECODE);
  reg.set_address("");
  EXPECT_FALSE(registry.Register(*conn, reg).ok());
}

// A node that refused work as unavailable or timed out is passed over for a while (it
// counts as draining), whatever its heartbeats say; a heartbeat that says draining is
// reported once, as the start of the drain.
TEST_F(RegistryTest, AnAvoidedNodeIsPassedOverForAWhileButStillCounted) {
  FakeClock clock;
  NodeRegistry registry(clock, 100, /*dead_after_ms=*/10000);
  net::RpcClientConfig client_config;
  client_config.rpc.cluster_token = testing::kToken;
  auto client = net::RpcClient::Create(loop_, client_config, {});
  ASSERT_TRUE(client.ok());
  auto conn = (*client)->Connect(engine_->control_address());
  ASSERT_TRUE(conn.ok());
  proto::RegisterRequest reg;
  reg.set_role(proto::NODE_ROLE_DECODE);
  reg.set_address("127.0.0.1:9");
  auto reply = registry.Register(*conn, reg);
  ASSERT_TRUE(reply.ok());
  const NodeId id = reply->node_id();
  EXPECT_TRUE(registry.Avoid(id, 200));
  EXPECT_FALSE(registry.Avoid(id, 200)) << "already passed over";
  // Busy is not dead: still counted, still ready, and taken when it is the only one.
  EXPECT_TRUE(registry.HasDecodeNode());
  EXPECT_EQ(registry.Counts().draining, 0);
  EXPECT_FALSE(registry.HasOtherDecodeNode(0));
  ASSERT_EQ(registry.Views().size(), 1u);
  EXPECT_TRUE(registry.Views()[0].avoided);
  EXPECT_EQ(PickDecode(registry.Views()), id);
  proto::Heartbeat hb;
  EXPECT_EQ(registry.OnHeartbeat(conn->get(), hb), 0u);
  EXPECT_TRUE(registry.Views()[0].avoided) << "a heartbeat proves life, not an answer";
  clock.Advance(201'000'000);
  EXPECT_FALSE(registry.Views()[0].avoided);
  EXPECT_TRUE(registry.HasOtherDecodeNode(0));
  EXPECT_FALSE(registry.HasOtherDecodeNode(id));
  EXPECT_EQ(PickDecode(registry.Views()), id);
  hb.set_draining(true);
  EXPECT_EQ(registry.OnHeartbeat(conn->get(), hb), id) << "the drain begins";
  EXPECT_EQ(registry.OnHeartbeat(conn->get(), hb), 0u) << "reported once";
  EXPECT_FALSE(registry.HasDecodeNode());
  EXPECT_FALSE(registry.Avoid(id, 200)) << "a draining node took no work anyway";
}

TEST_F(RegistryTest, WrongTokenCannotRegister) {
  net::RpcClientConfig client_config;
  client_config.rpc.cluster_token = "a-different-token-0123456789";
  client_config.connect_timeout_ms = 2000;
  auto client = net::RpcClient::Create(loop_, client_config, {});
  ASSERT_TRUE(client.ok());
  auto conn = (*client)->Connect(engine_->control_address());
  EXPECT_FALSE(conn.ok());
  EXPECT_FALSE(engine_->Ready());
}

// The nodes of one cluster serve one model and exchange KV blocks: a node whose model id or
// KV layout differs from a registered node's is refused with the reason.
TEST_F(RegistryTest, NodesOfOneClusterShareModelAndKvLayout) {
  FakeClock clock;
  NodeRegistry registry(clock, 100, 3);
  net::RpcClientConfig client_config;
  client_config.rpc.cluster_token = testing::kToken;
  std::vector<std::shared_ptr<net::RpcConnection>> conns;
  std::vector<std::unique_ptr<net::RpcClient>> clients;
  for (int i = 0; i < 2; ++i) {  // one client per connection: a client keeps one per address
    auto client = net::RpcClient::Create(loop_, client_config, {});
    ASSERT_TRUE(client.ok());
    auto conn = (*client)->Connect(engine_->control_address());
    ASSERT_TRUE(conn.ok());
    conns.push_back(*conn);
    clients.push_back(std::move(*client));
  }
  auto registration = [](const std::string& model, int block_size) {
    proto::RegisterRequest reg;
    reg.set_role(proto::NODE_ROLE_DECODE);
    reg.set_address("127.0.0.1:9");
    reg.set_node_name("n");
    reg.set_model_id(model);
    proto::KvLayoutInfo* layout = reg.mutable_kv_layout();
    layout->set_layout_version(1);
    layout->set_num_layers(2);
    layout->set_num_kv_heads(2);
    layout->set_head_dim(64);
    layout->set_block_size(block_size);
    return reg;
  };
  ASSERT_TRUE(registry.Register(conns[0], registration("tiny", 16)).ok());
  auto refused = registry.Register(conns[1], registration("other", 16));
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("model 'other' differs from 'tiny'"), std::string::npos)
      << refused.status().ToString();
  refused = registry.Register(conns[1], registration("tiny", 32));
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("KV layout"), std::string::npos) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("block_size: 32"), std::string::npos) << refused.status().ToString();
  EXPECT_EQ(registry.Views().size(), 1u);
  EXPECT_TRUE(registry.Register(conns[1], registration("tiny", 16)).ok());
  EXPECT_EQ(registry.Views().size(), 2u);
  // A node registering again on its connection is compared with the others only.
  ASSERT_TRUE(registry.OnConnectionClosed(conns[1].get()).has_value());
  EXPECT_TRUE(registry.Register(conns[0], registration("other", 32)).ok());
}

}  // namespace
}  // namespace tandem::router::cluster
