// Router-assigned seeds and cache-aware decode placement: placement over
// prefix hits (pure), the registry's cache view (reset, deltas, sequence gaps)
// on a fake clock, and both through the HTTP server with fake nodes.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/kv_cache/block_hash.h"
#include "common/metrics/metrics_registry.h"
#include "router/cluster/cluster_client.h"
#include "router/cluster/node_registry.h"
#include "router/cluster/placement.h"
#include "router/cluster/tenant_salt.h"
#include "router/http_server.h"
#include "tests/router/cluster/cluster_http_fixture.h"
#include "tests/router/cluster/fake_node.h"
#include "tests/router/fake_text_codec.h"
#include "tests/router/test_http_client.h"

namespace tandem::router::cluster {
namespace {

using router::testing::HttpResult;
using router::testing::kBos;
using router::testing::kEos;
using router::testing::kFakeVocab;
using router::testing::kWordBase;
using testing::FakeNode;
using testing::kFakeBlockSize;

NodeView Decode(uint32_t id, int64_t free_blocks, int running, int64_t hit) {
  NodeView v;
  v.node_id = id;
  v.role = proto::NODE_ROLE_DECODE;
  v.free_gpu_blocks = free_blocks;
  v.num_running = running;
  v.prefix_hit_blocks = hit;
  return v;
}

TEST(CachePlacementTest, PrefixHitWinsUnlessFullOrOverloaded) {
  // Equal free blocks and load: the node holding the prefix wins (despite its higher id).
  EXPECT_EQ(PickDecode({Decode(1, 100, 0, 0), Decode(2, 100, 0, 3)}), 2u);
  // The longer prefix wins.
  EXPECT_EQ(PickDecode({Decode(1, 100, 0, 2), Decode(2, 100, 0, 5)}), 2u);
  // A hit is worth its blocks: 95 + 4 < 100.
  EXPECT_EQ(PickDecode({Decode(1, 100, 0, 0), Decode(2, 95, 0, 4)}), 1u);
  EXPECT_EQ(PickDecode({Decode(1, 100, 0, 0), Decode(2, 98, 0, 4)}), 2u);
  // Full: (0 + 3) / 1 loses to 100.
  EXPECT_EQ(PickDecode({Decode(1, 100, 0, 0), Decode(2, 0, 0, 3)}), 1u);
  // Overloaded: (100 + 10) / (1 + 4) = 22 loses to 100 / 1.
  EXPECT_EQ(PickDecode({Decode(1, 100, 0, 0), Decode(2, 100, 4, 10)}), 1u);
}

std::string Bytes(const kv_cache::BlockHash& h) {
  return std::string(reinterpret_cast<const char*>(h.bytes.data()), h.bytes.size());
}

// Hashes of the full blocks of `tokens` as the fake nodes would compute them.
std::vector<kv_cache::BlockHash> Chain(const std::vector<TokenId>& tokens, const std::string& salt) {
  std::vector<kv_cache::BlockHash> hashes;
  kv_cache::ExtendBlockHashes(salt, "tiny", kFakeBlockSize, tokens, &hashes);
  return hashes;
}

proto::CacheReport Report(bool reset, const std::vector<kv_cache::BlockHash>& stored,
                          const std::vector<kv_cache::BlockHash>& removed = {}) {
  proto::CacheReport r;
  r.set_reset(reset);
  for (const auto& h : stored) r.add_stored_hashes(Bytes(h));
  for (const auto& h : removed) r.add_removed_hashes(Bytes(h));
  return r;
}

class CacheRegistryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ClusterConfig config;
    config.control_address = "127.0.0.1:0";
    config.cluster_token = testing::kToken;
    auto engine = ClusterClient::Start(loop_, config);
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    engine_ = std::move(*engine);
    net::RpcClientConfig client_config;
    client_config.rpc.cluster_token = testing::kToken;
    auto client = net::RpcClient::Create(loop_, client_config, {});
    ASSERT_TRUE(client.ok());
    client_ = std::move(*client);
    auto conn = client_->Connect(engine_->control_address());
    ASSERT_TRUE(conn.ok());
    conn_ = *conn;
    proto::RegisterRequest reg;
    reg.set_role(proto::NODE_ROLE_DECODE);
    reg.set_address("127.0.0.1:9");
    reg.set_model_id("tiny");
    reg.mutable_kv_layout()->set_block_size(kFakeBlockSize);
    reg.mutable_capacity()->set_num_gpu_blocks(40);
    ASSERT_TRUE(registry_.Register(conn_, reg).ok());
    for (int i = 0; i < 20; ++i) prompt_.push_back(100 + i);  // 5 full blocks
    chain_ = Chain(prompt_, salt_);
  }
  void TearDown() override { engine_->Stop(); }

  void Beat(const proto::CacheReport* report) {
    proto::Heartbeat hb;
    hb.set_sequence(++sequence_);
    if (report) *hb.mutable_cache() = *report;
    registry_.OnHeartbeat(conn_.get(), hb);
  }
  int64_t Hit() { return registry_.ViewsFor(prompt_, salt_)[0].prefix_hit_blocks; }
  int64_t Known() { return registry_.Views()[0].cached_blocks; }

  net::EventLoop loop_{1};
  std::unique_ptr<ClusterClient> engine_;
  std::unique_ptr<net::RpcClient> client_;
  std::shared_ptr<net::RpcConnection> conn_;
  FakeClock clock_;
  NodeRegistry registry_{clock_, 100, /*dead_after_ms=*/300};
  std::string salt_ = TenantSalt("acme");
  std::vector<TokenId> prompt_;
  std::vector<kv_cache::BlockHash> chain_;
  uint64_t sequence_ = 40;  // a node's sequence does not restart at registration
};

TEST_F(CacheRegistryTest, ResetThenDeltasGiveTheLongestPrefix) {
  // Deltas before the first full report are not trusted.
  proto::CacheReport early = Report(false, {chain_[0]});
  Beat(&early);
  EXPECT_EQ(Known(), 0);
  proto::CacheReport full = Report(true, {chain_[0], chain_[1], chain_[3]});
  Beat(&full);
  EXPECT_EQ(Known(), 3);
  EXPECT_EQ(Hit(), 2);  // block 2 missing: the prefix stops there
  proto::CacheReport delta = Report(false, {chain_[2]}, {chain_[0]});
  Beat(&delta);
  EXPECT_EQ(Hit(), 0);  // block 0 gone
  proto::CacheReport back = Report(false, {chain_[0], chain_[4]});
  Beat(&back);
  EXPECT_EQ(Hit(), 5);
  Beat(nullptr);  // no report: no change
  EXPECT_EQ(Hit(), 5);
  // Other tenants' prompts hash differently.
  EXPECT_EQ(registry_.ViewsFor(prompt_, TenantSalt("other"))[0].prefix_hit_blocks, 0);
  // A reset replaces everything.
  proto::CacheReport replaced = Report(true, {chain_[0]});
  Beat(&replaced);
  EXPECT_EQ(Hit(), 1);
  EXPECT_EQ(Known(), 1);
  // Malformed hashes are ignored.
  proto::CacheReport bad;
  bad.add_stored_hashes("short");
  Beat(&bad);
  EXPECT_EQ(Known(), 1);
}

TEST_F(CacheRegistryTest, SequenceGapDropsTheViewUntilTheNextReset) {
  proto::CacheReport full = Report(true, {chain_[0], chain_[1]});
  Beat(&full);
  EXPECT_EQ(Hit(), 2);
  ++sequence_;  // one heartbeat lost
  proto::CacheReport delta = Report(false, {chain_[2]});
  Beat(&delta);
  EXPECT_EQ(Hit(), 0);
  EXPECT_EQ(Known(), 0);
  Beat(&delta);  // still no reset: deltas are ignored
  EXPECT_EQ(Known(), 0);
  proto::CacheReport again = Report(true, {chain_[0], chain_[1], chain_[2]});
  Beat(&again);
  EXPECT_EQ(Hit(), 3);
}

// ---- through the HTTP server ----

class CacheHttpTest : public testing::ClusterHttpFixture {
 protected:
  void SetUp() override { Start({}, /*heartbeat_interval_ms=*/50); }

  // The fake tokenizer's encoding of `text`: BOS, then one token per byte.
  static std::vector<TokenId> PromptTokens(const std::string& text) {
    std::vector<TokenId> prompt = {kBos};
    for (char c : text) prompt.push_back(static_cast<unsigned char>(c));
    return prompt;
  }

  // Waits until the router's view of `node` for (prompt, salt) satisfies `pred`.
  template <typename Pred>
  bool WaitForView(FakeNode& node, const std::vector<TokenId>& prompt, const std::string& salt, Pred pred) {
    return node.WaitFor([&] {
      for (const NodeView& v : engine_->registry().ViewsFor(prompt, salt)) {
        if (v.node_id == node.node_id() && pred(v)) return true;
      }
      return false;
    });
  }
};

// (request id -> seed) as Reserve reached decode and Prefill reached prefill.
std::map<uint64_t, uint64_t> ReserveSeeds(FakeNode& d) {
  std::map<uint64_t, uint64_t> out;
  for (const auto& r : d.reserves()) {
    EXPECT_TRUE(r.sampling().has_seed()) << "request " << r.request_id();
    out[r.request_id()] = r.sampling().seed();
  }
  return out;
}
std::map<uint64_t, uint64_t> PrefillSeeds(FakeNode& p) {
  std::map<uint64_t, uint64_t> out;
  for (const auto& r : p.prefills()) {
    EXPECT_TRUE(r.sampling().has_seed()) << "request " << r.request_id();
    out[r.request_id()] = r.sampling().seed();
  }
  return out;
}

TEST_F(CacheHttpTest, RouterPicksOneSeedPerChoiceForPrefillAndDecode) {
  FakeNode& d = AddNode(proto::NODE_ROLE_DECODE, "d0");
  FakeNode& p = AddNode(proto::NODE_ROLE_PREFILL, "p0");
  p.on_prefill = [&d](const proto::PrefillRequest& req) { d.StartStream(req.request_id(), req.epoch()); };
  d.SetScript({{kWordBase, kEos}});
  // No seed, temperature > 0, n = 3: three distinct seeds, each the same at prefill and decode.
  HttpResult r = router::testing::Post(port_, "/v1/completions", {{"prompt", "hello"}, {"n", 3}, {"temperature", 0.8}});
  ASSERT_EQ(r.status, 200) << r.body;
  std::map<uint64_t, uint64_t> at_decode = ReserveSeeds(d);
  ASSERT_EQ(at_decode.size(), 3u);
  EXPECT_EQ(PrefillSeeds(p), at_decode);
  std::set<uint64_t> distinct;
  for (const auto& [id, seed] : at_decode) distinct.insert(seed);
  EXPECT_EQ(distinct.size(), 3u);

  // An explicit seed: choice i uses seed + i, at both nodes.
  r = router::testing::Post(port_, "/v1/completions",
                            {{"prompt", "hello"}, {"n", 2}, {"temperature", 0.8}, {"seed", 42}});
  ASSERT_EQ(r.status, 200) << r.body;
  std::map<uint64_t, uint64_t> all = ReserveSeeds(d);
  EXPECT_EQ(PrefillSeeds(p), all);
  std::multiset<uint64_t> explicit_seeds;
  for (const auto& [id, seed] : all) {
    if (at_decode.count(id) == 0) explicit_seeds.insert(seed);
  }
  EXPECT_EQ(explicit_seeds, (std::multiset<uint64_t>{42, 43}));

  // Greedy without a seed needs none.
  r = router::testing::Post(port_, "/v1/completions", {{"prompt", "hello"}, {"temperature", 0}});
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(d.reserves().size(), 6u);
  EXPECT_FALSE(d.reserves().back().sampling().has_seed());
}

TEST_F(CacheHttpTest, DecodeWithTheReportedPrefixWinsUnlessFull) {
  FakeNode& d0 = AddNode(proto::NODE_ROLE_DECODE, "d0");
  FakeNode& d1 = AddNode(proto::NODE_ROLE_DECODE, "d1");
  d0.SetScript({{kWordBase, kEos}});
  d1.SetScript({{kWordBase, kEos}});
  const std::string text = "hello world again";  // BOS + 17 characters: 4 full blocks
  const std::vector<TokenId> prompt = PromptTokens(text);
  // Without reports the tie goes to the lower id (d0).
  HttpResult r = router::testing::Post(port_, "/v1/completions", {{"prompt", text}});
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(d0.prefills().size(), 1u);
  const std::string used_salt = d0.prefills()[0].tenant_salt();
  const std::vector<kv_cache::BlockHash> chain = Chain(prompt, used_salt);
  ASSERT_EQ(chain.size(), 4u);

  // d1 reports the first three blocks of the prompt (as a node's first full report).
  d1.SetCacheReport(Report(true, {chain[0], chain[1], chain[2]}));
  ASSERT_TRUE(WaitForView(d1, prompt, used_salt, [](const NodeView& v) { return v.prefix_hit_blocks == 3; }));
  r = router::testing::Post(port_, "/v1/completions", {{"prompt", text}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(d1.prefills().size(), 1u);
  EXPECT_EQ(d0.prefills().size(), 1u);
  // The router's /metrics shows what it knows per node (the timer thread refreshes the
  // gauge every tick, so it may lag the view by one).
  HttpResult m;
  const std::string series = "tandem_router_node_cached_blocks{node=\"d1\"} 3";
  EXPECT_TRUE(d1.WaitFor([&] {
    m = router::testing::Send(port_, "GET", "/metrics", "");
    return m.body.find(series) != std::string::npos;
  })) << m.body;

  // d1 nearly full: d0 wins again despite the hit.
  d1.SetLoad(0, 0, /*free_blocks=*/1, 0);
  ASSERT_TRUE(WaitForView(d1, prompt, used_salt, [](const NodeView& v) { return v.free_gpu_blocks == 1; }));
  r = router::testing::Post(port_, "/v1/completions", {{"prompt", text}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(d1.prefills().size(), 1u);
  EXPECT_EQ(d0.prefills().size(), 2u);
}

// A prefill node that reported the prompt's prefix gets the prompt although its id is
// higher (ties go to the lower id); the router counts only the rest as queued there.
TEST_F(CacheHttpTest, PrefillWithTheReportedPrefixWins) {
  FakeNode& d = AddNode(proto::NODE_ROLE_DECODE, "d0");
  FakeNode& p0 = AddNode(proto::NODE_ROLE_PREFILL, "p0");
  FakeNode& p1 = AddNode(proto::NODE_ROLE_PREFILL, "p1");
  for (FakeNode* p : {&p0, &p1}) {
    p->on_prefill = [&d](const proto::PrefillRequest& req) { d.StartStream(req.request_id(), req.epoch()); };
  }
  d.SetScript({{kWordBase, kEos}});
  const std::string text = "hello world again";  // BOS + 17 characters: 4 full blocks
  const std::vector<TokenId> prompt = PromptTokens(text);
  HttpResult r = router::testing::Post(port_, "/v1/completions", {{"prompt", text}});
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(p0.prefills().size(), 1u) << "without reports the tie goes to the lower id";
  const std::vector<kv_cache::BlockHash> chain = Chain(prompt, p0.prefills()[0].tenant_salt());

  p1.SetCacheReport(Report(true, {chain[0], chain[1]}));
  ASSERT_TRUE(WaitForView(p1, prompt, p0.prefills()[0].tenant_salt(),
                          [](const NodeView& v) { return v.prefix_hit_tokens == 2 * kFakeBlockSize; }));
  r = router::testing::Post(port_, "/v1/completions", {{"prompt", text}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(p1.prefills().size(), 1u);
  EXPECT_EQ(p0.prefills().size(), 1u);
}

}  // namespace
}  // namespace tandem::router::cluster
