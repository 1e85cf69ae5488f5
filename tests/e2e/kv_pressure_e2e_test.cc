// RELIABILITY.md L6 on the real cluster with the shipped configs (deploy/*.yaml:
// 512 device + 256 host KV blocks of 16 tokens per decode node, 64 sequences):
// streams of 1,500 tokens that together need several times the KV pool all
// complete — the decode nodes swap to the host tier, then recompute — and none
// fails mid-stream. tandem-bench-serving is the client (the reproducer).
// Pressure is shown by the decode nodes' preemption counter and by the host
// tier holding swapped blocks while the load runs. And L5: a request no KV pool
// can hold is a 400 at admission.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/e2e/local_cluster.h"

namespace tandem::e2e {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kInputLen = 64;
constexpr int kOutputLen = 1500;

struct LoadResult {
  int completed = 0;
  int failed = 0;
  double seconds = 0;
  std::string output;  // the client's report and its first failures
  // Per decode node: the most host-tier blocks referenced at once (swapped KV) while the load ran.
  std::map<std::string, double> max_host_blocks;
};

class KvPressureE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = ::testing::TempDir() + "/tandem-kv-pressure-" + std::to_string(getpid());
    std::filesystem::create_directories(root_);
    ASSERT_TRUE(MakeTinyModel(root_ + "/tiny"));
    cluster_ = std::make_unique<LocalCluster>(root_);
  }
  void TearDown() override {
    cluster_.reset();
    std::filesystem::remove_all(root_);
  }

  // Router, one prefill node and the decode nodes `decodes`, all with deploy/*.yaml.
  void StartCluster(const std::vector<std::string>& decodes) {
    cluster_->StartRouter();
    cluster_->StartNode("prefill", "prefill", {});
    for (const std::string& name : decodes) cluster_->StartNode(name, "decode", {});
    ASSERT_TRUE(cluster_->WaitReady(std::chrono::seconds(30))) << cluster_->Logs();
    const auto end = Clock::now() + std::chrono::seconds(10);
    while (cluster_->Metric("router", "tandem_router_nodes", "role=\"decode\"") < decodes.size() &&
           Clock::now() < end) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ASSERT_EQ(cluster_->Metric("router", "tandem_router_nodes", "role=\"decode\""), decodes.size());
  }

  // `prompts` streams of kInputLen + kOutputLen tokens, `concurrency` at a time,
  // while the host tier of every decode node is watched.
  LoadResult RunLoad(int prompts, int concurrency, const std::vector<std::string>& decodes) {
    const std::string json_out = root_ + "/bench.json";
    const std::string log = root_ + "/bench.log";
    const std::string command =
        BinaryDir() + "/tools/bench_serving/tandem-bench-serving --port " + std::to_string(cluster_->http_port()) +
        " --model tiny --concurrency " + std::to_string(concurrency) + " --num-prompts " + std::to_string(prompts) +
        " --input-len " + std::to_string(kInputLen) + " --output-len " + std::to_string(kOutputLen) +
        " --max-output-len " + std::to_string(kOutputLen) + " --json-out " + json_out + " > " + log + " 2>&1";
    LoadResult result;
    std::atomic<bool> done{false};
    const auto start = Clock::now();
    std::thread client([&] {
      std::system(command.c_str());
      done = true;
    });
    while (!done) {
      for (const std::string& name : decodes) {
        double host = cluster_->Metric(name, "tandem_kv_blocks_referenced", "tier=\"host\"");
        result.max_host_blocks[name] = std::max(result.max_host_blocks[name], host);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    client.join();
    result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    std::ifstream in(log);
    result.output.assign(std::istreambuf_iterator<char>(in), {});
    nlohmann::json report = nlohmann::json::parse(std::ifstream(json_out), nullptr, /*allow_exceptions=*/false);
    if (report.is_object()) {
      result.completed = report.value("completed", 0);
      result.failed = report.value("failed", -1);
    }
    return result;
  }

  std::string KvDirt(const std::vector<std::string>& nodes) { return cluster_->KvDirt(nodes, std::chrono::seconds(5)); }

  // Every stream completes, every decode node preempted and swapped, and all ends KV clean.
  void ExpectServedUnderPressure(int prompts, int concurrency, const std::vector<std::string>& decodes) {
    LoadResult r = RunLoad(prompts, concurrency, decodes);
    std::printf("%d x %d-token streams, %d at a time, %zu decode node(s): %d completed, %d failed in %.1f s\n", prompts,
                kOutputLen, concurrency, decodes.size(), r.completed, r.failed, r.seconds);
    EXPECT_EQ(r.failed, 0) << r.output << cluster_->Logs();
    EXPECT_EQ(r.completed, prompts) << r.output;
    for (const std::string& name : decodes) {
      const double preemptions = cluster_->Metric(name, "tandem_num_preemptions_total");
      std::printf("  %s: %.0f preemptions, at most %.0f host blocks held by swapped sequences\n", name.c_str(),
                  preemptions, r.max_host_blocks[name]);
      EXPECT_GT(preemptions, 0) << name << ": the load must put the KV pool under pressure";
      EXPECT_GT(r.max_host_blocks[name], 0) << name << ": preemption must swap to the host tier first";
    }
    std::vector<std::string> nodes = decodes;
    nodes.push_back("prefill");
    EXPECT_EQ(KvDirt(nodes), "");
  }

  std::string root_;
  std::unique_ptr<LocalCluster> cluster_;
};

// L5: a request whose prompt + max_tokens no decode node's KV pool can hold is
// refused at admission with a 400 saying so, streamed or not, never queued; one
// token less fits exactly (the last generated token needs no KV) and is served.
TEST_F(KvPressureE2eTest, RequestBeyondTheKvPoolIsA400) {
  cluster_->StartRouter();
  cluster_->StartNode("prefill", "prefill", {});
  cluster_->StartNode("decode", "decode", {"--kv-num-device-blocks", "64"});  // 1,024 tokens
  ASSERT_TRUE(cluster_->WaitReady(std::chrono::seconds(30))) << cluster_->Logs();
  std::vector<int> prompt(64, 65);
  for (bool stream : {false, true}) {
    // 64 + 962 tokens: 1,025 need KV.
    nlohmann::json body = {{"model", "tiny"}, {"prompt", prompt}, {"max_tokens", 962}, {"stream", stream}};
    router::testing::HttpResult r = router::testing::Post(cluster_->http_port(), "/v1/completions", body);
    EXPECT_EQ(r.status, 400) << "stream=" << stream << ": " << r.body;
    const nlohmann::json error = r.Json().value("error", nlohmann::json::object());
    EXPECT_EQ(error.value("type", ""), "invalid_request_error") << r.body;
    EXPECT_NE(error.value("message", "").find("can never fit"), std::string::npos) << r.body;
  }
  EXPECT_EQ(cluster_->Metric("decode", "tandem_num_requests_running"), 0);
  EXPECT_EQ(cluster_->Metric("decode", "tandem_num_requests_waiting"), 0);
  nlohmann::json fits = {{"model", "tiny"}, {"prompt", prompt}, {"max_tokens", 961}, {"ignore_eos", true}};
  router::testing::HttpResult served = router::testing::Post(cluster_->http_port(), "/v1/completions", fits);
  EXPECT_EQ(served.status, 200) << served.body;
  EXPECT_EQ(served.Json()["usage"].value("completion_tokens", 0), 961) << served.body;
  EXPECT_EQ(KvDirt({"decode", "prefill"}), "");
}

TEST_F(KvPressureE2eTest, HundredLongStreamsOnOneDecodeNodeAllComplete) {
  StartCluster({"decode"});
  ExpectServedUnderPressure(/*prompts=*/100, /*concurrency=*/100, {"decode"});
}

TEST_F(KvPressureE2eTest, TwoHundredLongStreamsOnTwoDecodeNodesAllComplete) {
  StartCluster({"d1", "d2"});
  ExpectServedUnderPressure(/*prompts=*/200, /*concurrency=*/200, {"d1", "d2"});
}

}  // namespace
}  // namespace tandem::e2e
