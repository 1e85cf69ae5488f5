// The tandem-router binary as a process: deploy/router.yaml + flag overrides,
// a model directory holding the tests' tiny byte-level tokenizer, a fake
// decode node registering on the control port, one completion through it,
// /metrics, and a clean exit on SIGTERM.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "tests/common/tokenizer/tiny_tokenizers.h"
#include "tests/router/cluster/fake_node.h"
#include "tests/router/test_http_client.h"

namespace tandem::router::cluster {
namespace {

using nlohmann::json;

class RouterProcess {
 public:
  explicit RouterProcess(std::vector<std::string> args) {
    int out[2];
    TANDEM_CHECK(pipe(out) == 0);
    pid_ = fork();
    TANDEM_CHECK(pid_ >= 0);
    if (pid_ == 0) {
      dup2(out[1], 1);
      close(out[0]);
      close(out[1]);
      std::vector<char*> argv;
      std::string bin = TANDEM_ROUTER_BINARY;
      argv.push_back(bin.data());
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(bin.c_str(), argv.data());
      _exit(127);
    }
    close(out[1]);
    out_ = fdopen(out[0], "r");
    char line[4096];
    while ((http_.empty() || control_.empty()) && fgets(line, sizeof(line), out_)) {
      std::string s(line);
      if (s.rfind("http_address=", 0) == 0) http_ = s.substr(13, s.size() - 14);
      if (s.rfind("control_address=", 0) == 0) control_ = s.substr(16, s.size() - 17);
    }
    // Keep draining stdout so logging never blocks the router.
    drain_ = std::thread([this] {
      char buf[4096];
      while (fgets(buf, sizeof(buf), out_)) {
      }
    });
  }
  ~RouterProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (drain_.joinable()) drain_.join();
    if (out_) fclose(out_);
  }
  // SIGTERM, then the exit status (-1 if it did not exit within timeout_ms).
  int Terminate(int timeout_ms) {
    kill(pid_, SIGTERM);
    for (int waited = 0; waited < timeout_ms; waited += 10) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return -1;
  }
  uint16_t http_port() const { return static_cast<uint16_t>(std::stoi(http_.substr(http_.rfind(':') + 1))); }
  const std::string& control() const { return control_; }

 private:
  pid_t pid_ = -1;
  FILE* out_ = nullptr;
  std::thread drain_;
  std::string http_, control_;
};

TEST(RouterBinaryTest, ServesThroughAFakeDecodeNodeAndExitsOnSigterm) {
  const std::string dir = ::testing::TempDir() + "/router_binary_model_" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/tokenizer.json") << tokenizer::test_data::TinyByteLevelJson();
  const std::string source = std::getenv("TANDEM_SOURCE_DIR") ? std::getenv("TANDEM_SOURCE_DIR") : ".";
  RouterProcess router({"--config", source + "/deploy/router.yaml", "--model-dir", dir, "--max-model-len", "128",
                        "--listen-port", "0", "--control-address", "127.0.0.1:0", "--cluster-token", testing::kToken,
                        "--log-level", "warn"});
  ASSERT_FALSE(router.control().empty());
  const uint16_t port = router.http_port();
  EXPECT_EQ(router::testing::Send(port, "GET", "/health/ready", "").status, 503);

  net::EventLoop loop(1);
  {
    testing::FakeNode decode(loop, router.control(), proto::NODE_ROLE_DECODE, "d0");
    decode.SetScript({{'o', 'k'}, proto::FINISH_REASON_LENGTH, 0});
    EXPECT_EQ(router::testing::Send(port, "GET", "/health/ready", "").status, 200);
    router::testing::HttpResult r =
        router::testing::Post(port, "/v1/completions", {{"prompt", "hello"}, {"max_tokens", 2}});
    ASSERT_EQ(r.status, 200) << r.body;
    json body = r.Json();
    EXPECT_EQ(body["model"], std::filesystem::path(dir).filename().string());
    EXPECT_EQ(body["choices"][0]["text"], "ok");
    EXPECT_EQ(body["usage"]["prompt_tokens"], 4);
    // No prefill node: the local path, with the tokenizer's ids for "<|begin|>hello"
    // (derived by hand in tokenizer_text_codec_test.cc).
    ASSERT_EQ(decode.prefills().size(), 1u);
    const proto::PrefillRequest prefill = decode.prefills()[0];
    const auto& ids = prefill.token_ids();
    EXPECT_EQ(std::vector<int32_t>(ids.begin(), ids.end()), (std::vector<int32_t>{303, 257, 259, 111}));
    r = router::testing::Send(port, "GET", "/metrics", "");
    EXPECT_NE(r.body.find("tandem_router_nodes{role=\"decode\"} 1"), std::string::npos) << r.body;
    EXPECT_NE(r.body.find("tandem_e2e_request_latency_seconds_count{model_name=\"" +
                          std::filesystem::path(dir).filename().string() + "\"} 1"),
              std::string::npos)
        << r.body;
  }
  EXPECT_EQ(router.Terminate(10000), 0);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tandem::router::cluster
