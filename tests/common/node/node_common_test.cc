// Unit tests of common/node: config (incl. the deploy/ examples), the host
// block arena, the poll thread, the admin HTTP server and the router link.
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/node/admin_http_server.h"
#include "common/node/cancel_tombstones.h"
#include "common/node/drain_signal.h"
#include "common/node/host_block_arena.h"
#include "common/node/node_config.h"
#include "common/node/node_protocol.h"
#include "common/node/poll_thread.h"
#include "common/node/router_link.h"
#include "tests/decode_node/test_router.h"

namespace tandem::node {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string SourceDir() {
  const char* root = std::getenv("TANDEM_SOURCE_DIR");
  return root ? root : ".";
}

// Writes `text` to a file of the test's temp folder; returns its path.
std::string WriteTokenFile(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/node_token_" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

TEST(NodeConfigTest, DeployExamplesParseAndValidate) {
  for (const char* name : {"decode", "prefill"}) {
    SCOPED_TRACE(name);
    NodeConfig config;
    config::ConfigBinder binder;
    config.Bind(binder);
    std::string text = ReadFile(SourceDir() + "/deploy/" + name + ".yaml");
    ASSERT_FALSE(text.empty());
    ASSERT_TRUE(binder.ApplyYaml(text, name).ok());
    EXPECT_EQ(config.role, name);
    EXPECT_EQ(config.engine.block_size, 16);
    EXPECT_EQ(config.transport, "ucx");
    // The shipped files keep no token: they name the installed token file.
    EXPECT_EQ(config.cluster_token, "");
    EXPECT_EQ(config.cluster_token_file, "/etc/tandem/cluster-token");
    EXPECT_EQ(config.Validate().code(), StatusCode::kInvalidArgument) << "validated without a token";
    config.cluster_token_file = WriteTokenFile(std::string("deploy-") + name, "deploy-token-0123456789\n");
    ASSERT_TRUE(config.ResolveClusterToken().ok());
    EXPECT_EQ(config.cluster_token, "deploy-token-0123456789");
    EXPECT_TRUE(config.Validate().ok()) << config.Validate().ToString();
  }
}

TEST(NodeConfigTest, KubernetesConfigsParseAndValidate) {
  // The ConfigMap files of deploy/k8s: every key known, values valid (the pod
  // passes the token as --cluster-token-file, the advertise address as a flag).
  for (const char* path : {"base/config/prefill.yaml", "base/config/decode.yaml", "overlays/gpu/config/prefill.yaml",
                           "overlays/gpu/config/decode.yaml"}) {
    SCOPED_TRACE(path);
    NodeConfig config;
    config::ConfigBinder binder;
    config.Bind(binder);
    std::string text = ReadFile(SourceDir() + "/deploy/k8s/" + path);
    ASSERT_FALSE(text.empty());
    Status parsed = binder.ApplyYaml(text, path);
    ASSERT_TRUE(parsed.ok()) << parsed.ToString();
    const std::string file = path;
    const std::string role = file.substr(file.rfind('/') + 1, file.rfind('.') - file.rfind('/') - 1);
    EXPECT_EQ(config.role, role);
    EXPECT_EQ(config.router_address, "tandem-router-control:7000");
    EXPECT_EQ(config.engine.backend, file.find("gpu") != std::string::npos ? "cuda" : "cpu");
    config.cluster_token = "k8s-secret-token-0123456789";
    EXPECT_TRUE(config.Validate().ok()) << config.Validate().ToString();
  }
}

TEST(NodeConfigTest, ClusterTokenFileIsReadWhenTheTokenIsEmpty) {
  NodeConfig c;
  EXPECT_EQ(c.ResolveClusterToken().code(), StatusCode::kInvalidArgument) << "neither token nor file";
  c.cluster_token_file = WriteTokenFile("crlf", "file-token-0123456789 \r\n");
  ASSERT_TRUE(c.ResolveClusterToken().ok());
  EXPECT_EQ(c.cluster_token, "file-token-0123456789");  // trailing whitespace stripped
  c.cluster_token = "flag-token-0123456789";            // the token wins over the file
  ASSERT_TRUE(c.ResolveClusterToken().ok());
  EXPECT_EQ(c.cluster_token, "flag-token-0123456789");

  NodeConfig missing;
  missing.cluster_token_file = ::testing::TempDir() + "/no-such-token-file";
  Status s = missing.ResolveClusterToken();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.ToString().find("no-such-token-file"), std::string::npos) << s.ToString();
  NodeConfig short_token;
  short_token.cluster_token_file = WriteTokenFile("short", "short-secret\n");
  s = short_token.ResolveClusterToken();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.ToString().find("short-secret"), std::string::npos) << "the token leaked: " << s.ToString();
  NodeConfig huge;
  huge.cluster_token_file = WriteTokenFile("huge", std::string(5000, 'x'));
  EXPECT_EQ(huge.ResolveClusterToken().code(), StatusCode::kInvalidArgument);
}

TEST(NodeConfigTest, RejectsBadValues) {
  auto valid = [] {
    NodeConfig c;
    c.role = "decode";
    c.cluster_token = "0123456789abcdef0123";
    c.engine.model_dir = "/m";
    return c;
  };
  EXPECT_TRUE(valid().Validate().ok());
  NodeConfig c = valid();
  c.role = "colocated";
  EXPECT_TRUE(c.Validate().ok());
  c.role = "";  // the binary's own role
  EXPECT_TRUE(c.Validate().ok());
  c = valid();
  c.cluster_token = "short";
  EXPECT_EQ(c.Validate().code(), StatusCode::kInvalidArgument);
  c = valid();
  c.transport = "carrier-pigeon";
  EXPECT_EQ(c.Validate().code(), StatusCode::kInvalidArgument);
  c = valid();
  c.role = "router";
  EXPECT_EQ(c.Validate().code(), StatusCode::kInvalidArgument);
  c = valid();
  c.transfer_blocks = 0;
  EXPECT_EQ(c.Validate().code(), StatusCode::kInvalidArgument);
  c = valid();
  c.heartbeat_interval_ms = 0;
  EXPECT_EQ(c.Validate().code(), StatusCode::kInvalidArgument);
  config::ConfigBinder binder;
  c.Bind(binder);
  EXPECT_EQ(binder.ApplyYaml("no_such_key: 1\n", "t").code(), StatusCode::kInvalidArgument);
}

TEST(NodeProtocolTest, SamplingDefaultsAndRanges) {
  proto::SamplingParams s;
  auto p = SamplingFromProto(s, 7);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->top_p, 1.0f);
  EXPECT_EQ(p->repetition_penalty, 1.0f);
  EXPECT_EQ(p->max_tokens, 7);
  EXPECT_FALSE(p->seed.has_value());
  s.set_has_seed(true);
  s.set_seed(42);
  s.set_max_tokens(3);
  p = SamplingFromProto(s, 0);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p->seed, 42u);
  EXPECT_EQ(p->max_tokens, 3);
  // A moved request: min_tokens may count the output already in its prompt.
  s.set_num_output_tokens_in_prompt(4);
  s.set_min_tokens(6);
  p = SamplingFromProto(s, 0);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->num_output_tokens_in_prompt, 4);
  EXPECT_EQ(p->min_tokens, 6);
  s.set_min_tokens(8);
  EXPECT_FALSE(SamplingFromProto(s, 0).ok()) << "min_tokens beyond max_tokens + the moved output";
  s.set_min_tokens(0);
  s.set_num_output_tokens_in_prompt(-1);
  EXPECT_FALSE(SamplingFromProto(s, 0).ok());
  s.set_num_output_tokens_in_prompt(0);
  s.set_temperature(-1);
  EXPECT_FALSE(SamplingFromProto(s, 0).ok());
  google::protobuf::RepeatedField<int32_t> ids;
  EXPECT_FALSE(ValidatePrompt(ids, 100, 50).ok());
  ids.Add(5);
  EXPECT_TRUE(ValidatePrompt(ids, 100, 50).ok());
  ids.Add(100);
  EXPECT_FALSE(ValidatePrompt(ids, 100, 50).ok());
  ids.Set(1, -1);
  EXPECT_FALSE(ValidatePrompt(ids, 100, 50).ok());
  using scheduler::FinishReason;
  EXPECT_EQ(FinishReasonToProto(FinishReason::kStop), proto::FINISH_REASON_STOP);
  EXPECT_EQ(FinishReasonToProto(FinishReason::kLength), proto::FINISH_REASON_LENGTH);
  EXPECT_EQ(FinishReasonToProto(FinishReason::kCancelled), proto::FINISH_REASON_ABORT);
  for (FinishReason r : {FinishReason::kLeaseExpired, FinishReason::kRejected, FinishReason::kAborted}) {
    EXPECT_EQ(FinishReasonToProto(r), proto::FINISH_REASON_ERROR) << scheduler::FinishReasonName(r);
  }
}

// The wire's class reaches the EngineRequest (and so the scheduler); a value this
// node does not know is refused, never guessed.
TEST(NodeProtocolTest, PriorityFromTheWireReachesTheEngineRequest) {
  EXPECT_EQ(PriorityFromProto(proto::REQUEST_PRIORITY_INTERACTIVE).value(), scheduler::Priority::kInteractive);
  EXPECT_EQ(PriorityFromProto(proto::REQUEST_PRIORITY_BATCH).value(), scheduler::Priority::kBatch);
  for (int unknown : {2, -1, 1 << 20}) {
    EXPECT_EQ(PriorityFromProto(static_cast<proto::RequestPriority>(unknown)).status().code(),
              StatusCode::kInvalidArgument)
        << unknown;
  }
  proto::PrefillRequest prefill;  // a message without the field: interactive
  EXPECT_EQ(PriorityFromProto(prefill.priority()).value(), scheduler::Priority::kInteractive);
  google::protobuf::RepeatedField<int32_t> ids;
  ids.Add(5);
  engine::EngineRequest r = MakeEngineRequest(9, ids, "salt", scheduler::Priority::kBatch, runtime::SamplingParams{});
  EXPECT_EQ(r.id, 9u);
  EXPECT_EQ(r.priority, scheduler::Priority::kBatch);
  EXPECT_EQ(r.prompt_tokens, std::vector<TokenId>{5});
}

TEST(HostBlockArenaTest, AllocateFreeAndQuarantine) {
  kv_cache::KvLayout layout;
  layout.num_layers = 2;
  layout.num_kv_heads = 1;
  layout.head_dim = 4;
  layout.block_size = 4;
  layout.num_blocks = 6;
  layout.dtype = DType::kF32;
  FakeClock clock;
  HostBlockArena arena(layout, clock);
  EXPECT_EQ(arena.size_bytes(), 2u * 6 * 2 * 4 * 4 * 4);
  EXPECT_EQ(arena.Block(1, 0) - arena.base(), static_cast<ptrdiff_t>(6 * 2 * 4 * 4 * 4));
  auto a = arena.Allocate(4);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(*a, (std::vector<BlockId>{0, 1, 2, 3}));
  EXPECT_FALSE(arena.Allocate(3).has_value());
  EXPECT_EQ(arena.num_in_use(), 4);
  arena.Quarantine({0, 1}, 100);
  arena.Free({2, 3});
  EXPECT_EQ(arena.num_in_use(), 2);
  EXPECT_EQ(arena.num_quarantined(), 2);
  EXPECT_FALSE(arena.Allocate(5).has_value());
  clock.AdvanceMs(100);
  EXPECT_EQ(arena.num_in_use(), 0);
  EXPECT_TRUE(arena.Allocate(6).has_value());
}

TEST(CancelTombstonesTest, RefusesThatEpochAndOlderUntilTheTtl) {
  CancelTombstones t(/*capacity=*/8, /*ttl=*/1000);
  EXPECT_FALSE(t.Buried(5, 1, 0));
  t.Bury(5, 2, 100);
  EXPECT_TRUE(t.Buried(5, 1, 100));
  EXPECT_TRUE(t.Buried(5, 2, 1100));
  EXPECT_FALSE(t.Buried(5, 3, 100)) << "a newer epoch of the id is not cancelled";
  EXPECT_FALSE(t.Buried(6, 1, 100)) << "another id";
  EXPECT_FALSE(t.Buried(5, 2, 1101)) << "past the ttl";
  t.Bury(5, 1, 200);  // an older epoch cancelled later keeps the newest
  EXPECT_TRUE(t.Buried(5, 2, 200));
  t.Clear();
  EXPECT_FALSE(t.Buried(5, 1, 200));
  EXPECT_EQ(t.size(), 0u);
}

TEST(CancelTombstonesTest, BoundedByCapacityAndTtlOldestFirst) {
  CancelTombstones t(/*capacity=*/4, /*ttl=*/1000);
  for (uint64_t id = 1; id <= 6; ++id) t.Bury(id, 1, static_cast<Nanos>(id));
  EXPECT_EQ(t.size(), 4u);
  EXPECT_FALSE(t.Buried(1, 1, 10));
  EXPECT_FALSE(t.Buried(2, 1, 10));
  EXPECT_TRUE(t.Buried(3, 1, 10));
  EXPECT_TRUE(t.Buried(6, 1, 10));
  // Renewed ids stay: their older queue entries leave without taking them along.
  t.Bury(3, 1, 20);
  t.Bury(3, 1, 21);
  t.Bury(3, 1, 22);
  EXPECT_TRUE(t.Buried(3, 1, 22));
  // A bury past everyone's ttl sweeps them out.
  t.Bury(9, 1, 5000);
  EXPECT_EQ(t.size(), 1u);
  EXPECT_TRUE(t.Buried(9, 1, 5000));
}

TEST(PollThreadTest, RunsPostedWorkInOrderAndPolls) {
  PollThread thread;
  std::atomic<int> polls{0};
  thread.Start([&] { polls++; });
  std::vector<int> seen;
  for (int i = 0; i < 50; ++i) thread.Post([&seen, i] { seen.push_back(i); });
  thread.RunSync([] {});
  ASSERT_EQ(seen.size(), 50u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(seen[i], i);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_GT(polls.load(), 0);
  thread.Stop();
}

// Idle polls every 5 ms; spinning polls back to back (bytes of a progress-driven
// transport move only inside poll).
TEST(PollThreadTest, PaceSetsTheCadence) {
  std::atomic<PollThread::Pace> pace{PollThread::Pace::kIdle};
  std::atomic<int> polls{0};
  PollThread thread;
  thread.Start([&] { polls++; }, [&] { return pace.load(); });
  auto count = [&] {
    const int before = polls.load();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return polls.load() - before;
  };
  EXPECT_LE(count(), 20) << "idle: about one poll per 5 ms";
  pace = PollThread::Pace::kSpin;
  EXPECT_GE(count(), 200) << "spinning";
  pace = PollThread::Pace::kIdle;
  thread.RunSync([] {});  // out of the spin
  EXPECT_LE(count(), 20);
  thread.Stop();
}

TEST(AdminHttpServerTest, ServesGetAndRefusesOthers) {
  auto server = AdminHttpServer::Start("127.0.0.1:0", [](const std::string& path) {
    if (path == "/metrics") return HttpReply{200, "text/plain", "x 1\n"};
    return HttpReply{404, "text/plain", "nf"};
  });
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  std::string addr = (*server)->address();
  auto got = testing::HttpGet(addr, "/metrics?x=1");
  EXPECT_EQ(got.first, 200);
  EXPECT_EQ(got.second, "x 1\n");
  EXPECT_EQ(testing::HttpGet(addr, "/other").first, 404);
  EXPECT_FALSE(AdminHttpServer::Start("nonsense", nullptr).ok());
  EXPECT_FALSE(AdminHttpServer::Start("not-an-ip:80", nullptr).ok());
}

TEST(RouterLinkTest, RegistersHeartbeatsAndReRegistersAfterADrop) {
  net::EventLoop loop(2);
  testing::TestRouter router(loop);
  std::atomic<int> lost{0};
  RouterLinkOptions options;
  options.router_address = router.address();
  options.client.rpc.cluster_token = testing::kTestToken;
  options.reconnect_interval_ms = 50;
  options.make_register = [] {
    proto::RegisterRequest r;
    r.set_role(proto::NODE_ROLE_DECODE);
    r.set_node_name("link-test");
    return r;
  };
  options.on_lost = [&] { lost++; };
  RouterLink link(loop, options);
  EXPECT_EQ(link.Send(proto::Tokens()).code(), StatusCode::kUnavailable);
  ASSERT_TRUE(link.Start().ok());
  ASSERT_TRUE(router.WaitRegistered(proto::NODE_ROLE_DECODE, 1));
  EXPECT_EQ(router.last_register(proto::NODE_ROLE_DECODE).node_name(), "link-test");
  for (int i = 0; i < 100 && !link.registered(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(link.registered());
  EXPECT_GT(link.node_id(), 0u);
  proto::Tokens tokens;
  tokens.add_entries()->set_request_id(77);
  tokens.mutable_entries(0)->set_finish_reason(proto::FINISH_REASON_STOP);
  EXPECT_TRUE(link.Send(tokens).ok());
  EXPECT_TRUE(router.Wait(77, 5000).finished);
  router.DropConnections();
  ASSERT_TRUE(router.WaitRegistered(proto::NODE_ROLE_DECODE, 2));
  EXPECT_EQ(lost.load(), 1);
  link.Stop();
}

// An operator's drain arrives from the router as a Drain request: the link calls on_drain,
// answers Ack, and its heartbeats say draining from then on. Without on_drain it is refused.
TEST(RouterLinkTest, DrainFromTheRouterBeginsTheDrain) {
  net::EventLoop loop(2);
  testing::TestRouter router(loop);
  std::atomic<int> drains{0};
  std::string reason;
  RouterLinkOptions options;
  options.router_address = router.address();
  options.client.rpc.cluster_token = testing::kTestToken;
  options.make_register = [] {
    proto::RegisterRequest r;
    r.set_role(proto::NODE_ROLE_DECODE);
    return r;
  };
  options.on_drain = [&](const std::string& why) {
    reason = why;
    drains++;
  };
  RouterLink link(loop, options);
  ASSERT_TRUE(link.Start().ok());
  ASSERT_TRUE(router.WaitRegistered(proto::NODE_ROLE_DECODE, 1));
  proto::Drain drain;
  drain.set_reason("operator request");
  auto ack = router.node(proto::NODE_ROLE_DECODE)->CallAndWaitFor<proto::Ack>(drain, 3000);
  ASSERT_TRUE(ack.ok()) << ack.status().ToString();
  EXPECT_EQ(drains.load(), 1);
  EXPECT_EQ(reason, "operator request");
  EXPECT_TRUE(router.WaitDrainingHeartbeat());
  link.Stop();

  options.on_drain = nullptr;
  RouterLink plain(loop, options);
  ASSERT_TRUE(plain.Start().ok());
  ASSERT_TRUE(router.WaitRegistered(proto::NODE_ROLE_DECODE, 2));
  auto refused = router.node(proto::NODE_ROLE_DECODE)->CallAndWaitFor<proto::Ack>(drain, 3000);
  EXPECT_EQ(refused.status().code(), StatusCode::kUnimplemented) << refused.status().ToString();
  plain.Stop();
}

// A drain the router asked for ends main's wait without a signal; the node then exits
// once idle, and only a second signal would cut the drain short.
TEST(DrainSignalTest, ADrainAskedByTheRouterEndsTheWaitAndExitsWhenIdle) {
  std::atomic<bool> draining{false};
  std::atomic<int> begun{0};
  std::atomic<int> idle_checks{0};
  std::thread router([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    draining = true;
  });
  const auto start = std::chrono::steady_clock::now();
  const int rc =
      RunUntilDrained([&] { begun++; }, [&] { return ++idle_checks > 3; }, 10'000, [&] { return draining.load(); });
  router.join();
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(begun.load(), 1);
  EXPECT_GT(idle_checks.load(), 3);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(RouterLinkTest, WrongTokenNeverRegisters) {
  net::EventLoop loop(1);
  testing::TestRouter router(loop);
  RouterLinkOptions options;
  options.router_address = router.address();
  options.client.rpc.cluster_token = "a-different-token-0123456789";
  options.reconnect_interval_ms = 20;
  RouterLink link(loop, options);
  ASSERT_TRUE(link.Start().ok());
  EXPECT_FALSE(router.WaitRegistered(proto::NODE_ROLE_UNSPECIFIED, 1, 300));
  EXPECT_FALSE(link.registered());
  link.Stop();
}

}  // namespace
}  // namespace tandem::node
