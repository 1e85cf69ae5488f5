// Helpers for the RPC tests: configs with short timeouts, a waitable counter,
// a server that echoes Reserve requests, and a raw TCP peer.
#pragma once

#include <gtest/gtest.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>

#include "common/net/frame.h"
#include "common/net/rpc_client.h"
#include "common/net/rpc_server.h"
#include "common/proto/messages.h"

namespace tandem::net::testing {

inline constexpr char kToken[] = "test-cluster-token-0123456789";

inline RpcServerConfig ServerConfig() {
  RpcServerConfig config;
  config.listen_address = "127.0.0.1:0";
  config.rpc.cluster_token = kToken;
  config.rpc.peer_name = "server";
  config.rpc.hello_timeout_ms = 1000;
  return config;
}

inline RpcClientConfig ClientConfig(std::string token = kToken) {
  RpcClientConfig config;
  config.rpc.cluster_token = std::move(token);
  config.rpc.peer_name = "client";
  config.connect_timeout_ms = 2000;
  config.default_call_timeout_ms = 2000;
  return config;
}

// Waits until a predicate over guarded state holds, or a timeout.
class Waiter {
 public:
  void Notify(const std::function<void()>& change) {
    std::lock_guard<std::mutex> lock(mu_);
    change();
    cv_.notify_all();
  }
  bool WaitFor(const std::function<bool()>& done, int timeout_ms = 5000) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), done);
  }
  std::mutex& mu() { return mu_; }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
};

// Answers Reserve with a ReserveReply echoing the request id and epoch, with
// prefix_hit_tokens = prompt_len * 2 (so the reply is checkably derived).
inline void EchoReserve(const std::shared_ptr<RpcConnection>&, MessagePtr message, Responder responder) {
  if (proto::TypeOf(*message) != proto::MESSAGE_TYPE_RESERVE) {
    responder.Fail(InvalidArgumentError("only Reserve here"));
    return;
  }
  const auto& request = static_cast<const proto::ReserveRequest&>(*message);
  proto::ReserveReply reply;
  reply.set_request_id(request.request_id());
  reply.set_epoch(request.epoch());
  reply.set_prefix_hit_tokens(request.prompt_len() * 2);
  responder.Reply(reply);
}

inline proto::ReserveRequest MakeReserve(uint64_t request_id, int prompt_len) {
  proto::ReserveRequest request;
  request.set_request_id(request_id);
  request.set_epoch(1);
  request.set_prompt_len(prompt_len);
  return request;
}

// A raw TCP peer: writes bytes, then reads until EOF. Returns what it read.
inline std::string RawExchange(uint16_t port, const std::string& bytes) {
  boost::asio::io_context io;
  boost::asio::ip::tcp::socket socket(io);
  boost::system::error_code ec;
  socket.connect({boost::asio::ip::make_address("127.0.0.1"), port}, ec);
  EXPECT_FALSE(ec) << ec.message();
  boost::asio::write(socket, boost::asio::buffer(bytes), ec);
  std::string received;
  char buffer[4096];
  while (true) {
    size_t n = socket.read_some(boost::asio::buffer(buffer), ec);
    received.append(buffer, n);
    if (ec) break;
  }
  return received;
}

// Decodes the single Error frame a refused peer gets.
inline Status ErrorIn(const std::string& received) {
  FrameDecoder decoder(1 << 20);
  decoder.Append(received.data(), received.size());
  auto frame = decoder.Next();
  if (!frame.ok() || !frame->has_value()) return InternalError("no frame");
  EXPECT_EQ((**frame).header.type, proto::MESSAGE_TYPE_ERROR);
  auto error = proto::ParseMessage(proto::MESSAGE_TYPE_ERROR, (**frame).payload, 1 << 20);
  if (!error.ok()) return error.status();
  auto next = decoder.Next();
  EXPECT_TRUE(next.ok() && !next->has_value()) << "more than one frame sent to a refused peer";
  return proto::FromErrorInfo(static_cast<const proto::Error&>(**error).error());
}

}  // namespace tandem::net::testing
