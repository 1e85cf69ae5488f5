// A real ClusterClient behind the real HTTP server on loopback, with fake nodes
// (FakeNode) registering on its control port: the fixture of the router cluster
// tests that go through HTTP.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "common/metrics/metrics_registry.h"
#include "router/cluster/cluster_client.h"
#include "router/cluster/node_admin.h"
#include "router/http_server.h"
#include "tests/router/cluster/fake_node.h"
#include "tests/router/fake_text_codec.h"

namespace tandem::router::cluster::testing {

class ClusterHttpFixture : public ::testing::Test {
 protected:
  // Starts the engine (control port and heartbeat period set here) and the HTTP server
  // (with the admin API behind `admin_key`; "" = off).
  void Start(ClusterConfig config = {}, int heartbeat_interval_ms = 100, std::string admin_key = "") {
    config.control_address = "127.0.0.1:0";
    config.cluster_token = kToken;
    config.heartbeat_interval_ms = heartbeat_interval_ms;
    auto engine = ClusterClient::Start(loop_, config, &registry_);
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    engine_ = std::move(*engine);
    admin_ = std::make_unique<NodeAdmin>(*engine_);
    RouterConfig rc;
    rc.listen_port = 0;
    rc.admin_key = std::move(admin_key);
    RouterDeps deps;
    deps.engine = engine_.get();
    deps.codec = &codec_;
    deps.model = {"tiny", 64, router::testing::kFakeVocab, 1700000000, {router::testing::kEos}};
    deps.is_ready = [this] { return engine_->Ready(); };
    deps.metrics_text = [this] { return registry_.RenderText(); };
    deps.metrics = &registry_;
    deps.admin = admin_.get();
    server_ = std::make_unique<HttpServer>(rc, std::move(deps));
    ASSERT_TRUE(server_->Start().ok());
    port_ = server_->port();
  }
  void TearDown() override {
    if (server_) server_->Stop();
    if (engine_) engine_->Stop();
    nodes_.clear();
    server_.reset();
    admin_.reset();
    engine_.reset();
  }
  FakeNode& AddNode(proto::NodeRole role, const std::string& name, int64_t free_blocks = 100) {
    nodes_.push_back(std::make_unique<FakeNode>(loop_, engine_->control_address(), role, name, free_blocks));
    return *nodes_.back();
  }
  // A prefill node that "transfers" to `decode` and lets it stream.
  FakeNode& AddPrefill(FakeNode& decode, const std::string& name = "p0") {
    FakeNode& p = AddNode(proto::NODE_ROLE_PREFILL, name);
    p.on_prefill = [&decode](const proto::PrefillRequest& req) { decode.StartStream(req.request_id(), req.epoch()); };
    return p;
  }

  net::EventLoop loop_{2};
  metrics::MetricsRegistry registry_;
  router::testing::FakeTextCodec codec_;
  std::unique_ptr<ClusterClient> engine_;
  std::unique_ptr<NodeAdmin> admin_;
  std::unique_ptr<HttpServer> server_;
  std::vector<std::unique_ptr<FakeNode>> nodes_;
  uint16_t port_ = 0;
};

}  // namespace tandem::router::cluster::testing
