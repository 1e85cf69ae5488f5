// Test fixture: an HttpServer on a free loopback port with a FakeBackend and
// FakeTextCodec behind it (model "tiny", context 64 tokens, vocabulary 300).
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <memory>

#include "router/http_server.h"
#include "tests/router/fake_backend.h"
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
    deps.backend = &backend_;
    deps.codec = &codec_;
    deps.model = {"tiny", kContext, kFakeVocab, 1700000000};
    deps.is_ready = [this] { return ready_.load(); };
    deps.metrics_text = [] { return std::string("# TYPE tandem_test_up gauge\ntandem_test_up 1\n"); };
    server_ = std::make_unique<HttpServer>(std::move(config), std::move(deps));
    ASSERT_TRUE(server_->Start().ok());
    port_ = server_->port();
  }

  void TearDown() override {
    backend_.Shutdown();
    if (server_) server_->Stop();
  }

  FakeBackend backend_;
  FakeTextCodec codec_;
  std::atomic<bool> ready_{true};
  std::unique_ptr<HttpServer> server_;
  uint16_t port_ = 0;
};

}  // namespace tandem::router::testing
