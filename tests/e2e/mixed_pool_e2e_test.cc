// Issue 22 item 2: a mixed pool behind one router in disaggregated mode, on the real
// processes: a P/D pair (tandem-prefill + tandem-decode) beside a colocated replica
// (tandem-decode --role colocated). Under a closed loop of concurrent greedy streams both
// decode-serving nodes take work; the decode node's requests come through the prefill
// node (KV handoff), the colocated node prefills its own; every stream carries the
// single-process reference text.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "common/tokenizer/tokenizer.h"
#include "tests/e2e/local_cluster.h"
#include "tests/e2e/reference_engine.h"
#include "tests/e2e/stream_load.h"

namespace tandem::e2e {
namespace {

using nlohmann::json;

constexpr int kStreams = 16;
constexpr int kMaxTokens = 24;
constexpr int kPrompts = 8;

TEST(MixedPoolE2eTest, ColocatedReplicaAndPdPairServeSideBySide) {
  const std::string root = ::testing::TempDir() + "/tandem-mixed-pool-" + std::to_string(getpid());
  std::filesystem::create_directories(root);
  ASSERT_TRUE(MakeTinyModel(root + "/tiny"));
  auto tokenizer = tokenizer::Tokenizer::FromFile(root + "/tiny/tokenizer.json");
  ASSERT_TRUE(tokenizer.ok());
  std::vector<std::vector<TokenId>> prompts;
  std::vector<std::string> texts;
  for (int p = 0; p < kPrompts; ++p) {
    std::vector<TokenId> prompt(12 + p);
    for (size_t j = 0; j < prompt.size(); ++j) prompt[j] = 50 + (p * 17 + static_cast<int>(j) * 5) % 180;
    prompts.push_back(prompt);
    texts.push_back(*(*tokenizer)->Decode(ReferenceTokens(root + "/tiny", prompt, kMaxTokens), true));
  }
  {
    LocalCluster cluster(root);
    cluster.StartRouter();
    cluster.StartNode("prefill", "prefill", {});
    cluster.StartNode("decode", "decode", {});
    cluster.StartNode("colocated", "decode", {"--role", "colocated"});
    ASSERT_TRUE(cluster.WaitReady(std::chrono::seconds(60))) << cluster.Logs();
    const auto registered = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (cluster.Metric("router", "tandem_router_nodes", "role=\"decode\"") < 2 &&
           std::chrono::steady_clock::now() < registered) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ASSERT_EQ(cluster.Metric("router", "tandem_router_nodes", "role=\"decode\""), 2) << cluster.Logs();

    StreamLoad load(
        cluster.http_port(), kStreams,
        [&](int i) {
          return json{{"model", "tiny"},          {"prompt", prompts[i % kPrompts]},
                      {"max_tokens", kMaxTokens}, {"temperature", 0},
                      {"ignore_eos", true},       {"stream", true}};
        },
        [&](int i) { return texts[i % kPrompts]; });
    load.Start();
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    auto both_served = [&] {
      return cluster.Metric("decode", "tandem_request_decode_time_seconds_count") >= 10 &&
             cluster.Metric("colocated", "tandem_request_decode_time_seconds_count") >= 10;
    };
    while (!both_served() && std::chrono::steady_clock::now() < end) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    load.Stop(std::chrono::seconds(60));
    StreamLoad::Result r = load.result();
    std::string failures;
    for (const std::string& f : r.failures) failures += "\n  " + f;
    EXPECT_EQ(r.failed, 0) << r.failed << " of " << load.sent() << " failed" << failures;
    ASSERT_TRUE(both_served()) << "decode " << cluster.Metric("decode", "tandem_request_decode_time_seconds_count")
                               << ", colocated " << cluster.Metric("colocated", "tandem_request_decode_time_seconds_count")
                               << cluster.Logs();
    // The decode node's requests were handed off (a prompt it holds whole in its prefix cache
    // runs there locally instead, as on any decode node).
    EXPECT_GT(cluster.Metric("decode", "tandem_kv_handoff_wait_seconds_count"), 0);
    EXPECT_GT(cluster.Metric("prefill", "tandem_kv_transfer_bytes_total"), 0);
    // The colocated node computed every prompt it served and never reserved for one.
    EXPECT_GE(cluster.Metric("colocated", "tandem_request_prefill_time_seconds_count"),
              cluster.Metric("colocated", "tandem_request_decode_time_seconds_count"));
    EXPECT_EQ(cluster.Metric("colocated", "tandem_kv_handoff_wait_seconds_count"), 0);
    std::printf("mixed pool: %d streams served (decode %.0f, colocated %.0f)\n", r.served,
                cluster.Metric("decode", "tandem_request_decode_time_seconds_count"),
                cluster.Metric("colocated", "tandem_request_decode_time_seconds_count"));
  }
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace tandem::e2e
