// RpcServer: accepts control connections on one address. Each accepted peer
// must send a Hello with the cluster token first (within hello_timeout_ms);
// a peer that fails gets one Error frame and a close, and no handler runs.
//
// Thread rule: thread-safe. Handlers run on the EventLoop's I/O threads (see
// rpc_connection.h). Lifetime: destroy (or Stop) before the EventLoop.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/base/status.h"
#include "common/net/event_loop.h"
#include "common/net/rpc_config.h"
#include "common/net/rpc_connection.h"

namespace tandem::net {

class RpcServer {
 public:
  // Validates config, loads TLS files, binds and starts accepting. Errors:
  // InvalidArgument (config, TLS files), Unavailable (bind/listen failed).
  static StatusOr<std::unique_ptr<RpcServer>> Start(EventLoop& loop, RpcServerConfig config, RpcHandlers handlers);
  ~RpcServer();  // Stop()
  RpcServer(const RpcServer&) = delete;
  RpcServer& operator=(const RpcServer&) = delete;

  // Stops accepting and closes every connection (their on_close gets
  // Cancelled). Idempotent; safe from any thread.
  void Stop();

  // The bound port (the real one when listen_address asked for port 0).
  uint16_t port() const;
  // "host:port" actually listened on.
  std::string address() const;
  // Connections currently accepted (authenticated or not).
  size_t num_connections() const;

  struct Impl;

 private:
  explicit RpcServer(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<Impl> impl_;
};

}  // namespace tandem::net
