// Test fixture: an HttpServer on a free loopback port with a FakeEngineClient and
// FakeTextCodec behind it (model "tiny", context 64 tokens, vocabulary 300, EOS kEos).
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <memory>

#include "common/metrics/metrics_registry.h"
#include "router/http_server.h"
#include "tests/router/fake_engine_client.h"
#include "tests/router/fake_text_codec.h"
#include "tests/router/test_http_client.h"

namespace tandem::router::testing {

inline constexpr int32_t kContext = 64;

class RouterFixture : public ::testing::Test {
 protected:
  static RouterConfig TestConfig() {
    RouterConfig config;
    config.listen_port = 0;
    config.num_io_threads = 2;
    config.max_body_bytes = 64 << 10;
    return config;
  }

  void StartServer(RouterConfig config = TestConfig()) {
    RouterDeps deps;
    deps.engine = &engine_;
    deps.codec = &codec_;
    deps.model = {"tiny", context_tokens_, kFakeVocab, 1700000000, {kEos}};
    deps.model.tool_call_format = tool_call_format_;
    deps.is_ready = [this] { return ready_.load(); };
    deps.metrics_text = [this] { return registry_.RenderText(); };
    deps.metrics = &registry_;
    server_ = std::make_unique<HttpServer>(std::move(config), std::move(deps));
    ASSERT_TRUE(server_->Start().ok());
    port_ = server_->port();
  }

  void TearDown() override {
    engine_.Shutdown();
    if (server_) server_->Stop();
  }

  // The value of one series in /metrics ("name" or "name{labels}"); -1 if absent.
  double MetricValue(const std::string& series) {
    const std::string text = Send(port_, "GET", "/metrics").body;
    const std::string key = "\n" + series + " ";
    const size_t pos = ("\n" + text).find(key);
    if (pos == std::string::npos) return -1;
    return std::stod(text.substr(pos + key.size() - 1));
  }

  metrics::MetricsRegistry registry_;
  FakeEngineClient engine_;
  FakeTextCodec codec_;
  std::atomic<bool> ready_{true};
  ToolCallFormat tool_call_format_ = ToolCallFormat::kHermes;  // set before StartServer()
  int32_t context_tokens_ = kContext;                           // set before StartServer()
  std::unique_ptr<HttpServer> server_;
  uint16_t port_ = 0;
};

}  // namespace tandem::router::testing
