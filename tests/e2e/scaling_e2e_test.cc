// Issue 25 item 5: scaling without loss, on the real cluster (router, prefill and
// decode processes, the shipped node configs, heartbeats every 200 ms) under a
// closed loop of greedy streams: a decode and a prefill node added mid-load take
// work within a heartbeat or two of registering; every decode node is rolled
// (SIGTERM drain, restart) one by one; the router is drained by SIGTERM and
// restarted. Every stream carries exactly the single-process greedy text (a
// refusal while the router is down or draining is retried, as an SDK client
// does), and every node ends with no request, KV block, reservation or
// landing/staging block held.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tests/e2e/greedy_streams.h"
#include "tests/e2e/local_cluster.h"

namespace tandem::e2e {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kStreams = 200;   // clients in the closed loop
constexpr int kMaxTokens = 40;  // per stream
constexpr int kPrompts = 16;    // distinct prompts (8..23 tokens), references computed once

double Since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

class ScalingE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = ::testing::TempDir() + "/tandem-scaling-" + std::to_string(getpid());
    std::filesystem::create_directories(root_);
    ASSERT_TRUE(MakeTinyModel(root_ + "/tiny"));
    std::optional<GreedyStreams> streams = GreedyStreams::Make(root_ + "/tiny", kPrompts, kMaxTokens, 11, 5);
    ASSERT_TRUE(streams.has_value());
    streams_ = std::move(*streams);
    cluster_ = std::make_unique<LocalCluster>(root_);
  }
  void TearDown() override {
    cluster_.reset();
    std::filesystem::remove_all(root_);
  }

  // The router, then nodes by name and role; waits until all are ready and registered.
  void StartCluster(const std::vector<std::pair<std::string, std::string>>& nodes) {
    cluster_->StartRouter();
    int decodes = 0, prefills = 0;
    for (const auto& [name, role] : nodes) {
      cluster_->StartNode(name, role, {});
      nodes_.push_back(name);
      (role == "decode" ? decodes : prefills)++;
    }
    ASSERT_TRUE(cluster_->WaitReady(std::chrono::seconds(60))) << cluster_->Logs();
    ASSERT_TRUE(WaitForNodes("decode", decodes)) << cluster_->Logs();
    ASSERT_TRUE(WaitForNodes("prefill", prefills)) << cluster_->Logs();
  }

  std::unique_ptr<StreamLoad> MakeLoad(bool retry_refused = false) {
    return streams_.Load(cluster_->http_port(), kStreams, retry_refused);
  }

  static bool WaitFor(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
    const auto end = Clock::now() + timeout;
    while (Clock::now() < end) {
      if (done()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return done();
  }
  bool WaitForNodes(const std::string& role, int n) {
    return WaitFor([&] { return cluster_->Metric("router", "tandem_router_nodes", "role=\"" + role + "\"") == n; },
                   std::chrono::seconds(30));
  }
  // `node` (a decode node) runs streams of the load.
  bool Decoding(const std::string& node) {
    return WaitFor([&] { return cluster_->Metric(node, "tandem_num_requests_running") > 0; }, std::chrono::seconds(20));
  }
  // `node` (a prefill node) has computed a prompt's first token.
  bool Prefilled(const std::string& node) {
    return WaitFor([&] { return cluster_->Metric(node, "tandem_generation_tokens_total") > 0; },
                   std::chrono::seconds(20));
  }
  // Stops the load and expects every request it sent to have been served.
  StreamLoad::Result ExpectNoneFailed(StreamLoad& load) {
    load.Stop(std::chrono::seconds(120));
    StreamLoad::Result r = load.result();
    std::string failures;
    for (const std::string& f : r.failures) failures += "\n  " + f;
    EXPECT_EQ(r.failed, 0) << r.failed << " of " << load.sent() << " failed" << failures;
    EXPECT_GT(r.served, kStreams);
    EXPECT_EQ(cluster_->KvDirt(nodes_, std::chrono::seconds(5)), "") << cluster_->Logs();
    return r;
  }

  std::string root_;
  std::unique_ptr<LocalCluster> cluster_;
  std::vector<std::string> nodes_;  // every node started, by name
  GreedyStreams streams_;
};

TEST_F(ScalingE2eTest, AddedDecodeAndPrefillNodesTakeWorkWithinAHeartbeat) {
  ASSERT_NO_FATAL_FAILURE(StartCluster({{"p1", "prefill"}, {"d1", "decode"}}));
  std::unique_ptr<StreamLoad> load = MakeLoad();
  load->Start();
  ASSERT_TRUE(Decoding("d1")) << cluster_->Logs();
  const auto launched = Clock::now();
  cluster_->StartNode("d2", "decode", {});
  cluster_->StartNode("p2", "prefill", {});
  nodes_.insert(nodes_.end(), {"d2", "p2"});
  ASSERT_TRUE(WaitForNodes("decode", 2)) << cluster_->Logs();
  const auto decode_registered = Clock::now();
  ASSERT_TRUE(Decoding("d2")) << "the added decode node took no work" << cluster_->Logs();
  const double decode_took = Since(decode_registered);
  ASSERT_TRUE(WaitForNodes("prefill", 2)) << cluster_->Logs();
  const auto prefill_registered = Clock::now();
  ASSERT_TRUE(Prefilled("p2")) << "the added prefill node took no work" << cluster_->Logs();
  const double prefill_took = Since(prefill_registered);
  // A heartbeat is 200 ms; the first placement may wait for one (the node's load
  // and KV are unknown until then). 2 s leaves room for a loaded CI machine.
  EXPECT_LT(decode_took, 2.0);
  EXPECT_LT(prefill_took, 2.0);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // both pools at two nodes
  StreamLoad::Result r = ExpectNoneFailed(*load);
  std::printf(
      "added nodes: launched -> registered %.2f s; work taken after registering: decode %.3f s, prefill %.3f s; "
      "%d streams served\n",
      std::chrono::duration<double>(decode_registered - launched).count(), decode_took, prefill_took, r.served);
}

TEST_F(ScalingE2eTest, RollingRestartOfEveryDecodeNodeLosesNoRequest) {
  ASSERT_NO_FATAL_FAILURE(StartCluster({{"p1", "prefill"}, {"d1", "decode"}, {"d2", "decode"}}));
  std::unique_ptr<StreamLoad> load = MakeLoad();
  load->Start();
  ASSERT_TRUE(Decoding("d1") && Decoding("d2")) << cluster_->Logs();
  const auto start = Clock::now();
  for (const std::string node : {"d1", "d2"}) {
    const auto drain = Clock::now();
    cluster_->procs().Signal(node, SIGTERM);
    EXPECT_EQ(cluster_->procs().Wait(node, std::chrono::seconds(60)), 0) << node << " drain exit status";
    const double drained = Since(drain);
    cluster_->StartNode(node, "decode", {});
    ASSERT_TRUE(WaitForNodes("decode", 2)) << cluster_->Logs();
    ASSERT_TRUE(Decoding(node)) << node << " took no work after its restart" << cluster_->Logs();
    std::printf("rolled %s: drained in %.2f s, serving again %.2f s after SIGTERM\n", node.c_str(), drained,
                Since(drain));
  }
  StreamLoad::Result r = ExpectNoneFailed(*load);
  std::printf("rolling restart of 2 decode nodes: %.1f s, %d streams served\n", Since(start), r.served);
}

TEST_F(ScalingE2eTest, RouterDrainedAndRestartedUnderLoadLosesNoRequest) {
  ASSERT_NO_FATAL_FAILURE(StartCluster({{"p1", "prefill"}, {"d1", "decode"}}));
  std::unique_ptr<StreamLoad> load = MakeLoad(/*retry_refused=*/true);
  load->Start();
  ASSERT_TRUE(Decoding("d1")) << cluster_->Logs();
  const auto drain = Clock::now();
  cluster_->procs().Signal("router", SIGTERM);
  // The streams it runs finish; then it stops (exit 0) and the nodes see it go.
  EXPECT_EQ(cluster_->procs().Wait("router", std::chrono::seconds(60)), 0) << "router drain exit status";
  const double drained = Since(drain);
  const int served_before = load->result().served;
  cluster_->StartRouter();
  ASSERT_TRUE(WaitForNodes("decode", 1)) << cluster_->Logs();
  ASSERT_TRUE(WaitForNodes("prefill", 1)) << cluster_->Logs();
  const double back = Since(drain);
  ASSERT_TRUE(WaitFor([&] { return load->result().served > served_before + kStreams; }, std::chrono::seconds(60)))
      << "no streams served after the restart" << cluster_->Logs();
  StreamLoad::Result r = ExpectNoneFailed(*load);
  EXPECT_GT(r.refused, 0) << "nothing was refused: the restart was not under load";
  std::printf(
      "router drained in %.2f s, serving again (both pools registered) %.2f s after SIGTERM; %d streams "
      "served, %d refusals retried\n",
      drained, back, r.served, r.refused);
}

}  // namespace
}  // namespace tandem::e2e
