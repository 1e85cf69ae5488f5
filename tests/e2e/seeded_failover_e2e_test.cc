// RELIABILITY.md F10 on the real cluster (router, one prefill and two decode
// processes on loopback): seeded streams sampled at temperature 1, with one decode
// node killed (SIGKILL) while it generates some of them, end with exactly the text
// of the same streams without the fault. The router moves each stream of the dead
// node to the other one with its tokens so far; the draws there continue at the
// same output positions (docs/protocol.md, "Sampling seeds").
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "common/base/ids.h"
#include "tests/e2e/local_cluster.h"

namespace tandem::e2e {
namespace {

namespace http = tandem::router::testing;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr int kStreams = 6;
constexpr int kStreamTokens = 600;

bool WaitFor(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  const auto end = Clock::now() + timeout;
  while (Clock::now() < end) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

struct Streamed {
  int status = 0;
  std::string text;
  bool error = false;          // an error event came
  int completion_tokens = -1;  // from the final usage chunk
};

Streamed Parse(const http::HttpResult& r) {
  Streamed s;
  s.status = r.status;
  for (const std::string& event : http::SseEvents(r.body)) {
    json chunk = json::parse(event, nullptr, false);
    if (chunk.is_discarded()) continue;
    if (chunk.contains("error")) s.error = true;
    if (chunk.contains("usage") && chunk["usage"].is_object()) {
      s.completion_tokens = chunk["usage"]["completion_tokens"];
    }
    for (const auto& c : chunk.value("choices", json::array())) s.text += c.value("text", "");
  }
  return s;
}

class SeededFailoverE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = ::testing::TempDir() + "/tandem-seeded-" + std::to_string(getpid());
    std::filesystem::create_directories(root_);
    ASSERT_TRUE(MakeTinyModel(root_ + "/tiny"));
    cluster_ = std::make_unique<LocalCluster>(root_);
    cluster_->StartRouter();
    cluster_->StartNode("prefill", "prefill", {});
    cluster_->StartNode("d1", "decode", {});
    cluster_->StartNode("d2", "decode", {});
    ASSERT_TRUE(cluster_->WaitReady(std::chrono::seconds(30))) << cluster_->Logs();
    ASSERT_TRUE(WaitFor([&] { return cluster_->Metric("router", "tandem_router_nodes", "role=\"decode\"") == 2; },
                        std::chrono::seconds(10)));
  }
  void TearDown() override {
    cluster_.reset();
    std::filesystem::remove_all(root_);
  }

  // kStreams seeded streams at temperature 1, each on its own thread.
  std::vector<std::future<http::HttpResult>> StartStreams() {
    std::vector<std::future<http::HttpResult>> streams;
    for (int i = 0; i < kStreams; ++i) {
      std::vector<TokenId> prompt(16);
      for (int j = 0; j < 16; ++j) prompt[j] = 40 + (j * 11 + i * 29) % 200;
      json body = {{"model", "tiny"},
                   {"prompt", prompt},
                   {"max_tokens", kStreamTokens},
                   {"temperature", 1.0},
                   {"seed", 1000 + i},
                   {"ignore_eos", true},
                   {"stream", true},
                   {"stream_options", {{"include_usage", true}}}};
      const uint16_t port = cluster_->http_port();
      streams.push_back(
          std::async(std::launch::async, [port, body] { return http::Post(port, "/v1/completions", body); }));
    }
    return streams;
  }

  static std::vector<Streamed> Collect(std::vector<std::future<http::HttpResult>>& streams) {
    std::vector<Streamed> out;
    for (auto& s : streams) {
      EXPECT_EQ(s.wait_for(std::chrono::seconds(120)), std::future_status::ready) << "stream hangs";
      out.push_back(Parse(s.get()));
    }
    return out;
  }

  std::string root_;
  std::unique_ptr<LocalCluster> cluster_;
};

TEST_F(SeededFailoverE2eTest, KilledDecodeNodeLeavesSeededTextsUnchanged) {
  std::vector<std::future<http::HttpResult>> first = StartStreams();
  const std::vector<Streamed> expected = Collect(first);
  for (int i = 0; i < kStreams; ++i) {
    ASSERT_EQ(expected[i].status, 200) << cluster_->Logs();
    ASSERT_FALSE(expected[i].error) << "stream " << i;
    ASSERT_EQ(expected[i].completion_tokens, kStreamTokens) << "stream " << i;
  }

  // Again, killing a decode node once it runs streams and has generated some of their tokens.
  const double generated_before = cluster_->Metric("d1", "tandem_generation_tokens_total") +
                                  cluster_->Metric("d2", "tandem_generation_tokens_total");
  std::vector<std::future<http::HttpResult>> second = StartStreams();
  std::string victim;
  double running_at_kill = 0;
  ASSERT_TRUE(WaitFor(
      [&] {
        for (const char* name : {"d1", "d2"}) {
          running_at_kill = cluster_->Metric(name, "tandem_num_requests_running");
          const double generated = cluster_->Metric("d1", "tandem_generation_tokens_total") +
                                   cluster_->Metric("d2", "tandem_generation_tokens_total") - generated_before;
          if (running_at_kill >= 1 && generated >= kStreams * 20) {
            victim = name;
            return true;
          }
        }
        return false;
      },
      std::chrono::seconds(20)))
      << cluster_->Logs();
  cluster_->procs().Signal(victim, SIGKILL);
  const auto killed = Clock::now();
  const std::vector<Streamed> faulted = Collect(second);
  const double seconds = std::chrono::duration<double>(Clock::now() - killed).count();
  for (int i = 0; i < kStreams; ++i) {
    EXPECT_EQ(faulted[i].status, 200) << "stream " << i;
    EXPECT_FALSE(faulted[i].error) << "stream " << i;
    EXPECT_EQ(faulted[i].completion_tokens, kStreamTokens) << "stream " << i;
    EXPECT_EQ(faulted[i].text, expected[i].text) << "stream " << i << " changed after the kill of " << victim;
  }
  std::printf("killed %s with %.0f streams running on it; the rest took %.2f s\n", victim.c_str(), running_at_kill,
              seconds);
}

}  // namespace
}  // namespace tandem::e2e
