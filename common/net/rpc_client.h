// RpcClient: dials control peers and keeps one multiplexed connection per
// peer address. Connect returns the open connection to an address, dialing
// (resolve, TCP, TLS, Hello) only when there is none.
//
// Thread rule: thread-safe. Connect blocks and must not run on an I/O thread;
// AsyncConnect's callback runs on an I/O thread. Handlers: see rpc_connection.h.
// Lifetime: destroy before the EventLoop; destruction closes every connection.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "common/base/status.h"
#include "common/net/event_loop.h"
#include "common/net/rpc_config.h"
#include "common/net/rpc_connection.h"

namespace tandem::net {

class RpcClient {
 public:
  using ConnectCallback = std::function<void(StatusOr<std::shared_ptr<RpcConnection>>)>;

  // Validates config and loads TLS files (InvalidArgument on failure).
  // `handlers` serve traffic the peers send on connections this client dials.
  static StatusOr<std::unique_ptr<RpcClient>> Create(EventLoop& loop, RpcClientConfig config, RpcHandlers handlers);
  ~RpcClient();
  RpcClient(const RpcClient&) = delete;
  RpcClient& operator=(const RpcClient&) = delete;

  // The open connection to `address` ("host:port"), dialing it when needed.
  // Errors: InvalidArgument (address), Unavailable (refused, TLS failure,
  // closed), DeadlineExceeded (connect_timeout_ms), PermissionDenied (token).
  StatusOr<std::shared_ptr<RpcConnection>> Connect(const std::string& address);
  // Same, without blocking; concurrent callers for one address share one dial.
  void AsyncConnect(const std::string& address, ConnectCallback on_done);

  // Closes every connection (on_close gets Cancelled). The client stays usable.
  void CloseAll();

  struct Impl;

 private:
  explicit RpcClient(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<Impl> impl_;
};

}  // namespace tandem::net
