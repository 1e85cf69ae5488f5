// A node's RouterLink against the real ClusterClient: the cache callback is
// asked for a full report on the first heartbeat after registering and every
// full_cache_report_every heartbeats, and what it returns reaches the
// router's per-node view (prefix hits for the prompt it describes).
#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "common/kv_cache/block_hash.h"
#include "common/net/event_loop.h"
#include "common/node/router_link.h"
#include "router/cluster/cluster_client.h"
#include "router/cluster/tenant_salt.h"
#include "tests/router/cluster/fake_node.h"

namespace tandem::router::cluster {
namespace {

std::string Bytes(const kv_cache::BlockHash& h) {
  return std::string(reinterpret_cast<const char*>(h.bytes.data()), h.bytes.size());
}

TEST(RouterLinkCacheTest, FullReportAfterRegisterAndPeriodically) {
  net::EventLoop loop(2);
  ClusterConfig config;
  config.control_address = "127.0.0.1:0";
  config.cluster_token = testing::kToken;
  config.heartbeat_interval_ms = 20;
  auto engine = ClusterClient::Start(loop, config);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();

  std::vector<TokenId> prompt;
  for (int i = 0; i < 12; ++i) prompt.push_back(7 * i + 3);  // 3 blocks of 4
  const std::string salt = TenantSalt("t");
  std::vector<kv_cache::BlockHash> chain;
  kv_cache::ExtendBlockHashes(salt, "tiny", testing::kFakeBlockSize, prompt, &chain);

  std::mutex mu;
  std::vector<bool> asked_full;  // guarded by mu
  node::RouterLinkOptions options;
  options.router_address = (*engine)->control_address();
  options.client.rpc.cluster_token = testing::kToken;
  options.client.rpc.peer_name = "decode-x";
  options.full_cache_report_every = 3;
  options.make_register = [] {
    proto::RegisterRequest r;
    r.set_role(proto::NODE_ROLE_DECODE);
    r.set_address("127.0.0.1:9");
    r.set_node_name("decode-x");
    r.set_model_id("tiny");
    r.mutable_kv_layout()->set_block_size(testing::kFakeBlockSize);
    r.mutable_capacity()->set_num_gpu_blocks(50);
    return r;
  };
  // Full reports hold the first two blocks; deltas in between report nothing.
  options.cache = [&](bool full) -> std::optional<proto::CacheReport> {
    std::lock_guard<std::mutex> lock(mu);
    asked_full.push_back(full);
    if (!full) return std::nullopt;
    proto::CacheReport report;
    report.set_reset(true);
    report.add_stored_hashes(Bytes(chain[0]));
    report.add_stored_hashes(Bytes(chain[1]));
    return report;
  };
  node::RouterLink link(loop, std::move(options));
  ASSERT_TRUE(link.Start().ok());

  auto hit = [&] {
    for (const NodeView& v : (*engine)->registry().ViewsFor(prompt, salt)) {
      if (v.node_id == link.node_id() && link.node_id() != 0) return v.prefix_hit_blocks;
    }
    return int64_t{-1};
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (hit() != 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(hit(), 2);
  EXPECT_EQ((*engine)->registry().ViewsFor(prompt, TenantSalt("other"))[0].prefix_hit_blocks, 0);
  while (true) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (asked_full.size() >= 7 || std::chrono::steady_clock::now() > deadline) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  link.Stop();
  (*engine)->Stop();
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_GE(asked_full.size(), 7u);
  const std::vector<bool> expected = {true, false, false, true, false, false, true};
  EXPECT_EQ(std::vector<bool>(asked_full.begin(), asked_full.begin() + 7), expected);
}

// A node the router refuses keeps the reason (readiness shows it; the link logs it): a wrong
// cluster token at the Hello, and a RegisterRequest the router rejects.
TEST(RouterLinkRefusalTest, TheRouterRefusalReasonIsKept) {
  net::EventLoop loop(2);
  ClusterConfig config;
  config.control_address = "127.0.0.1:0";
  config.cluster_token = testing::kToken;
  auto engine = ClusterClient::Start(loop, config);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  auto refusal_of = [&](const std::string& token, proto::NodeRole role) {
    node::RouterLinkOptions options;
    options.router_address = (*engine)->control_address();
    options.client.rpc.cluster_token = token;
    options.client.rpc.peer_name = "decode-x";
    options.reconnect_interval_ms = 20;
    options.make_register = [role] {
      proto::RegisterRequest r;
      r.set_role(role);
      r.set_address("127.0.0.1:9");
      return r;
    };
    node::RouterLink link(loop, std::move(options));
    EXPECT_TRUE(link.Start().ok());
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (link.last_refusal().empty() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_FALSE(link.registered());
    std::string refusal = link.last_refusal();
    link.Stop();
    return refusal;
  };
  const std::string wrong_token = refusal_of("a-different-token-0123456789", proto::NODE_ROLE_DECODE);
  EXPECT_NE(wrong_token.find("wrong cluster token"), std::string::npos) << wrong_token;
  const std::string bad_role = refusal_of(testing::kToken, proto::NODE_ROLE_UNSPECIFIED);
  EXPECT_NE(bad_role.find("registration refused"), std::string::npos) << bad_role;
  EXPECT_NE(bad_role.find("unknown node role"), std::string::npos) << bad_role;
  EXPECT_FALSE((*engine)->Ready());
  (*engine)->Stop();
}

}  // namespace
}  // namespace tandem::router::cluster
