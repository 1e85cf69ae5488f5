// HttpServer: the router's OpenAI-compatible HTTP front door.
//
// Owns an Asio io_context run by a small fixed pool of threads, the listening
// socket, and the RouterContext shared by all connections. Routes:
//   POST /v1/completions, POST /v1/chat/completions, GET /v1/models,
//   GET /v1/models/{id}, POST /tokenize, POST /detokenize, GET /version  (API key)
//   GET /health/live, GET /health/ready, GET /metrics                    (open)
//   GET /admin/nodes, POST /admin/nodes/{node}/drain, GET /admin/ready   (admin key)
// Thread rule: Start/Stop/port from one controlling thread.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "router/router_context.h"

namespace tandem::router {

class HttpSession;

class HttpServer {
 public:
  HttpServer(RouterConfig config, RouterDeps deps);
  ~HttpServer();  // Stop()s
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Validates config and deps, binds, listens and starts the I/O threads.
  // InvalidArgument for bad config, Unavailable when the address cannot be bound.
  Status Start();
  // Graceful first half of a stop: /health/ready turns 503 ("draining"), new
  // inference requests get 503 with Retry-After, and the requests already
  // admitted or queued run to their end. Returns true once none is left, false
  // when `timeout` passes or `give_up()` (polled every 50 ms) says so first.
  // Stop() follows either way.
  bool Drain(std::chrono::milliseconds timeout, const std::function<bool()>& give_up);
  // Stops accepting, closes open connections (cancelling their requests at
  // the engine), waits up to 2 s for them to wind down, stops the I/O
  // threads. The engine must have stopped calling back before the
  // HttpServer is destroyed.
  void Stop();
  // The bound port (useful with listen_port 0). REQUIRES: Start() succeeded.
  uint16_t port() const { return port_; }
  RouterContext& context() { return *context_; }

 private:
  void DoAccept();

  std::unique_ptr<RouterContext> context_;
  boost::asio::io_context io_context_;
  boost::asio::ip::tcp::acceptor acceptor_;
  std::vector<std::thread> threads_;
  std::mutex sessions_mu_;
  std::vector<std::weak_ptr<HttpSession>> sessions_;  // guarded by sessions_mu_
  uint16_t port_ = 0;
  bool started_ = false;
};

}  // namespace tandem::router
