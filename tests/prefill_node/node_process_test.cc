// Multi-process (e2e): the real tandem-decode and tandem-prefill binaries,
// driven by the test's router stand-in, KV over UCX tcp on loopback.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <cstdlib>
#include <thread>

#include "tests/common/engine/engine_test_util.h"
#include "tests/decode_node/test_router.h"

namespace tandem {
namespace {

using testing::TestRouter;

// A child process with stdout on a pipe; reads its "key=value" lines.
class NodeProcess {
 public:
  NodeProcess(const std::string& binary, const std::vector<std::string>& args) {
    int fds[2];
    TANDEM_CHECK(pipe(fds) == 0);
    pid_ = fork();
    TANDEM_CHECK(pid_ >= 0);
    if (pid_ == 0) {
      dup2(fds[1], STDOUT_FILENO);
      close(fds[0]);
      close(fds[1]);
      std::vector<char*> argv;
      argv.push_back(const_cast<char*>(binary.c_str()));
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(binary.c_str(), argv.data());
      _exit(127);
    }
    close(fds[1]);
    out_ = fdopen(fds[0], "r");
  }
  ~NodeProcess() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (out_) fclose(out_);
  }
  // The value of the next stdout line "key=value" with this key ("" at EOF).
  std::string ReadValue(const std::string& key) {
    char line[1024];
    while (fgets(line, sizeof(line), out_)) {
      std::string s(line);
      while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
      if (s.rfind(key + "=", 0) == 0) return s.substr(key.size() + 1);
    }
    return "";
  }
  void Signal(int sig) { kill(pid_, sig); }
  // Exit status after waiting up to timeout_ms; -1 on timeout.
  int Wait(int timeout_ms) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        reaped_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1;
  }

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  FILE* out_ = nullptr;
};

std::string Binary(const std::string& rel) {
  const char* dir = std::getenv("TANDEM_BINARY_DIR");
  return std::string(dir ? dir : ".") + "/" + rel;
}

std::vector<std::string> NodeArgs(const std::string& router, const std::string& name) {
  return {"--router-address",
          router,
          "--cluster-token",
          testing::kTestToken,
          "--node-name",
          name,
          "--model-dir",
          engine::testing::GoldenDir("llama"),
          "--model-name",
          "golden",
          "--kv-num-device-blocks",
          "96",
          "--heartbeat-interval-ms",
          "100",
          "--transport",
          "ucx",
          "--ucx-transports",
          "tcp",
          "--lease-ms",
          "1500",
          "--late-write-grace-ms",
          "100",
          "--drain-timeout-ms",
          "5000"};
}

proto::ReserveRequest Reserve(uint64_t id, const std::vector<TokenId>& prompt, int max_tokens, uint32_t lease_ms) {
  proto::ReserveRequest r;
  r.set_request_id(id);
  r.set_epoch(1);
  r.set_prompt_len(static_cast<int>(prompt.size()));
  r.set_max_tokens(max_tokens);
  r.mutable_token_ids()->Add(prompt.begin(), prompt.end());
  r.mutable_sampling()->set_ignore_eos(true);
  r.set_tenant_salt("tenant-e2e");
  r.set_lease_ms(lease_ms);
  return r;
}

proto::PrefillRequest Prefill(uint64_t id, const std::vector<TokenId>& prompt, int max_tokens,
                              const proto::ReserveReply& reservation, const std::string& decode_address) {
  proto::PrefillRequest p;
  p.set_request_id(id);
  p.set_epoch(1);
  p.mutable_token_ids()->Add(prompt.begin(), prompt.end());
  p.mutable_sampling()->set_ignore_eos(true);
  p.mutable_sampling()->set_max_tokens(max_tokens);
  *p.mutable_reservation() = reservation;
  p.set_decode_address(decode_address);
  p.set_tenant_salt("tenant-e2e");
  return p;
}

std::vector<TokenId> Prompt(int n, int seed) {
  std::vector<TokenId> p(n);
  for (int i = 0; i < n; ++i) p[i] = static_cast<TokenId>(3 + (i * 53 + seed * 7) % 370);
  return p;
}

double Metric(const std::string& http, const std::string& series) {
  auto got = testing::HttpGet(http, "/metrics");
  return got.first == 200 ? testing::MetricValue(got.second, series) : -2;
}

bool WaitMetricZero(const std::string& http, const std::vector<std::string>& series, int timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    bool all = true;
    for (const auto& s : series) all = all && Metric(http, s) == 0;
    if (all) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

// The KV-clean gauges of a prefill node; a decode node adds its reservations.
const std::vector<std::string> kKvClean = {"tandem_num_requests_running{model_name=\"golden\"}",
                                           "tandem_num_requests_waiting{model_name=\"golden\"}",
                                           "tandem_kv_blocks_referenced{model_name=\"golden\",tier=\"gpu\"}",
                                           "tandem_kv_blocks_referenced{model_name=\"golden\",tier=\"host\"}",
                                           "tandem_kv_transfer_sessions",
                                           "tandem_kv_transfer_blocks_in_use"};
std::vector<std::string> DecodeKvClean() {
  std::vector<std::string> series = kKvClean;
  series.push_back("tandem_kv_reservations_active{model_name=\"golden\"}");
  return series;
}

TEST(NodeProcessTest, DisaggregatedOverUcxThenPrefillKilledThenDecodeDrains) {
  net::EventLoop loop(2);
  TestRouter router(loop);
  NodeProcess decode(Binary("decode_node/tandem-decode"), NodeArgs(router.address(), "decode-e2e"));
  std::string decode_address = decode.ReadValue("control_address");
  std::string decode_http = decode.ReadValue("http_address");
  ASSERT_FALSE(decode_address.empty());
  NodeProcess prefill(Binary("prefill_node/tandem-prefill"), NodeArgs(router.address(), "prefill-e2e"));
  std::string prefill_http = prefill.ReadValue("http_address");
  ASSERT_FALSE(prefill_http.empty());
  ASSERT_TRUE(router.WaitRegistered(proto::NODE_ROLE_DECODE));
  ASSERT_TRUE(router.WaitRegistered(proto::NODE_ROLE_PREFILL));
  EXPECT_EQ(router.last_register(proto::NODE_ROLE_DECODE).kv_transport(), "ucx");
  auto d = router.node(proto::NODE_ROLE_DECODE);
  auto p = router.node(proto::NODE_ROLE_PREFILL);

  // 1. A request through prefill -> UCX -> decode matches a single engine.
  std::vector<TokenId> prompt = Prompt(3 * 16 + 5, 1);
  auto reply = d->CallAndWaitFor<proto::ReserveReply>(Reserve(1, prompt, 5, 5000), 10000);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  ASSERT_TRUE(p->CallAndWaitFor<proto::Ack>(Prefill(1, prompt, 5, *reply, decode_address), 10000).ok());
  testing::RequestOutcome out = router.Wait(1);
  EXPECT_EQ(out.reason, proto::FINISH_REASON_LENGTH) << out.error.ToString();
  auto engine = engine::testing::MakeEngine(engine::testing::SmallConfig(engine::testing::GoldenDir("llama")));
  engine->Submit(engine::testing::Greedy(1, prompt, 5, "tenant-e2e"));
  EXPECT_EQ(out.tokens, engine::testing::RunToCompletion(*engine, 1)[1].tokens);
  EXPECT_TRUE(WaitMetricZero(decode_http, DecodeKvClean(), 5000));
  EXPECT_TRUE(WaitMetricZero(prefill_http, kKvClean, 5000));
  EXPECT_GT(Metric(prefill_http, "tandem_kv_transfer_bytes_total{model_name=\"golden\",direction=\"sent\"}"), 0);
  EXPECT_GT(Metric(decode_http, "tandem_kv_transfer_bytes_total{model_name=\"golden\",direction=\"received\"}"), 0);
  if (access("/usr/bin/promtool", X_OK) == 0) {
    for (const std::string& http : {decode_http, prefill_http}) {
      auto metrics = testing::HttpGet(http, "/metrics");
      ASSERT_EQ(metrics.first, 200);
      std::string path = ::testing::TempDir() + "/node_metrics.txt";
      std::ofstream(path) << metrics.second;
      std::string cmd = "/usr/bin/promtool check metrics < " + path + " 2>&1";
      FILE* pipe = popen(cmd.c_str(), "r");
      ASSERT_NE(pipe, nullptr);
      std::string output;
      char buf[512];
      while (fgets(buf, sizeof(buf), pipe)) output += buf;
      EXPECT_EQ(pclose(pipe), 0) << "promtool on " << http << ":\n" << output;
    }
  }

  // 2. kill -9 the prefill right after it accepted the job: decode frees the
  //    reservation within the lease and reports a terminal error.
  std::vector<TokenId> long_prompt = Prompt(20 * 16, 2);
  auto reply2 = d->CallAndWaitFor<proto::ReserveReply>(Reserve(2, long_prompt, 5, 1500), 10000);
  ASSERT_TRUE(reply2.ok()) << reply2.status().ToString();
  auto killed_at = std::chrono::steady_clock::now();
  ASSERT_TRUE(p->CallAndWaitFor<proto::Ack>(Prefill(2, long_prompt, 5, *reply2, decode_address), 10000).ok());
  prefill.Signal(SIGKILL);
  EXPECT_EQ(prefill.Wait(5000), 128 + SIGKILL);
  testing::RequestOutcome failed = router.Wait(2, 5000);
  ASSERT_TRUE(failed.finished);
  // The kill may land after the handoff completed; then the request simply finishes.
  std::printf("kill -9 outcome: %s (%s)\n", proto::FinishReason_Name(failed.reason).c_str(),
              failed.error.ToString().c_str());
  if (failed.reason == proto::FINISH_REASON_ERROR) {
    EXPECT_LE(std::chrono::steady_clock::now() - killed_at, std::chrono::milliseconds(1500 + 1000));
  }
  EXPECT_TRUE(WaitMetricZero(decode_http, DecodeKvClean(), 3000));

  // 3. SIGTERM drains the decode node: readiness fails, exit 0.
  EXPECT_EQ(testing::HttpGet(decode_http, "/health/ready").first, 200);
  decode.Signal(SIGTERM);
  EXPECT_EQ(decode.Wait(10000), 0);
}

}  // namespace
}  // namespace tandem
