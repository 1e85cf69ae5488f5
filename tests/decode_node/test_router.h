// TestRouter: a router stand-in for node tests, built from RpcServer. Nodes
// register with it; the test sends Reserve/Prefill/Cancel/Release to them
// over their registered connections and collects their Tokens entries.
// Thread rule: thread-safe (handlers on I/O threads, the test thread waits).
#pragma once

#include <gtest/gtest.h>

#include <boost/asio.hpp>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/net/event_loop.h"
#include "common/net/rpc_server.h"
#include "common/proto/messages.h"

namespace tandem::testing {

inline constexpr char kTestToken[] = "node-test-cluster-token-0123456789";

struct RequestOutcome {
  std::vector<TokenId> tokens;
  bool finished = false;
  int terminal_entries = 0;
  proto::FinishReason reason = proto::FINISH_REASON_NONE;
  Status error;
  int num_cached_tokens = 0;
};

class TestRouter {
 public:
  explicit TestRouter(net::EventLoop& loop) {
    net::RpcServerConfig config;
    config.rpc.cluster_token = kTestToken;
    config.rpc.peer_name = "test-router";
    net::RpcHandlers handlers;
    handlers.on_request = [this](const std::shared_ptr<net::RpcConnection>& conn, net::MessagePtr m, net::Responder r) {
      if (const auto* reg = proto::MessageAs<proto::RegisterRequest>(*m)) {
        proto::RegisterReply reply;
        std::lock_guard<std::mutex> lock(mu_);
        reply.set_node_id(++next_node_id_);
        reply.set_heartbeat_interval_ms(100);
        nodes_[reg->role()] = conn;
        registrations_[reg->role()]++;
        last_register_[reg->role()] = *reg;
        r.Reply(reply);
        cv_.notify_all();
      } else {
        r.Fail(UnimplementedError("test router"));
      }
    };
    handlers.on_message = [this](const std::shared_ptr<net::RpcConnection>&, net::MessagePtr m) {
      if (const auto* tokens = proto::MessageAs<proto::Tokens>(*m)) {
        std::lock_guard<std::mutex> lock(mu_);
        for (const proto::TokenEntry& e : tokens->entries()) {
          auto fenced = epochs_.find(e.request_id());
          if (fenced != epochs_.end() && fenced->second != e.epoch()) continue;  // another epoch: ignored
          RequestOutcome& o = outcomes_[e.request_id()];
          o.tokens.insert(o.tokens.end(), e.token_ids().begin(), e.token_ids().end());
          if (e.finish_reason() != proto::FINISH_REASON_NONE) {
            o.finished = true;
            o.terminal_entries++;
            o.reason = e.finish_reason();
            o.error = proto::FromErrorInfo(e.error());
            o.num_cached_tokens = e.num_cached_tokens();
          }
        }
        cv_.notify_all();
      } else if (const auto* heartbeat = proto::MessageAs<proto::Heartbeat>(*m)) {
        std::lock_guard<std::mutex> lock(mu_);
        ++heartbeats_;
        if (heartbeat->draining()) ++draining_heartbeats_;
        cv_.notify_all();
      }
    };
    auto server = net::RpcServer::Start(loop, config, std::move(handlers));
    TANDEM_CHECK(server.ok()) << server.status().ToString();
    server_ = std::move(*server);
  }
  ~TestRouter() { server_->Stop(); }

  std::string address() const { return server_->address(); }

  // Waits until `role` registered at least `count` times.
  bool WaitRegistered(proto::NodeRole role, int count = 1, int timeout_ms = 10000) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return registrations_[role] >= count; });
  }
  std::shared_ptr<net::RpcConnection> node(proto::NodeRole role) {
    std::lock_guard<std::mutex> lock(mu_);
    return nodes_[role];
  }
  proto::RegisterRequest last_register(proto::NodeRole role) {
    std::lock_guard<std::mutex> lock(mu_);
    return last_register_[role];
  }
  // Waits for the request's terminal entry.
  RequestOutcome Wait(uint64_t id, int timeout_ms = 30000) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return outcomes_[id].finished; });
    return outcomes_[id];
  }
  // Waits until the request has at least n tokens (or finished).
  void WaitTokens(uint64_t id, size_t n, int timeout_ms = 30000) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                 [&] { return outcomes_[id].tokens.size() >= n || outcomes_[id].finished; });
  }
  RequestOutcome Get(uint64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    return outcomes_[id];
  }
  // From now on only entries of this epoch count for the request (as the router does).
  void ExpectEpoch(uint64_t id, uint32_t epoch) {
    std::lock_guard<std::mutex> lock(mu_);
    epochs_[id] = epoch;
  }
  // Waits until a heartbeat said draining.
  bool WaitDrainingHeartbeat(int timeout_ms = 5000) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return draining_heartbeats_ > 0; });
  }
  // Closes every node connection (a router crash as the nodes see it).
  void DropConnections() {
    std::map<proto::NodeRole, std::shared_ptr<net::RpcConnection>> nodes;
    {
      std::lock_guard<std::mutex> lock(mu_);
      nodes = nodes_;
    }
    for (auto& [role, conn] : nodes) {
      if (conn) conn->Close(UnavailableError("test router drops the connection"));
    }
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  uint32_t next_node_id_ = 0;
  std::map<proto::NodeRole, std::shared_ptr<net::RpcConnection>> nodes_;
  std::map<proto::NodeRole, int> registrations_;
  std::map<proto::NodeRole, proto::RegisterRequest> last_register_;
  std::map<uint64_t, RequestOutcome> outcomes_;
  std::map<uint64_t, uint32_t> epochs_;
  int heartbeats_ = 0;
  int draining_heartbeats_ = 0;
  std::unique_ptr<net::RpcServer> server_;
};

// GET http://address/path; returns {status, body} or status -1 on failure.
inline std::pair<int, std::string> HttpGet(const std::string& address, const std::string& path) {
  namespace asio = boost::asio;
  try {
    size_t colon = address.rfind(':');
    asio::io_context io;
    asio::ip::tcp::socket socket(io);
    socket.connect({asio::ip::make_address(address.substr(0, colon)),
                    static_cast<uint16_t>(std::stoi(address.substr(colon + 1)))});
    std::string request = "GET " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    asio::write(socket, asio::buffer(request));
    std::string response;
    boost::system::error_code ec;
    char buf[4096];
    while (true) {
      size_t n = socket.read_some(asio::buffer(buf), ec);
      response.append(buf, n);
      if (ec) break;
    }
    int status = std::stoi(response.substr(9, 3));
    size_t body = response.find("\r\n\r\n");
    return {status, body == std::string::npos ? "" : response.substr(body + 4)};
  } catch (...) {
    return {-1, ""};
  }
}

// The value of an unlabelled (or exactly labelled) series in a Prometheus text body; -1 if absent.
inline double MetricValue(const std::string& body, const std::string& series) {
  size_t pos = 0;
  while ((pos = body.find(series + " ", pos)) != std::string::npos) {
    if (pos == 0 || body[pos - 1] == '\n') {
      size_t end = body.find('\n', pos);
      return std::stod(body.substr(pos + series.size() + 1, end - pos - series.size() - 1));
    }
    pos += series.size();
  }
  return -1;
}

}  // namespace tandem::testing
