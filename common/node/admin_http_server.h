// AdminHttpServer: a tiny HTTP/1.1 listener for a node's GET /metrics,
// /health/live and /health/ready (Boost.Beast, one I/O thread, one request
// per connection, 5 s read timeout, 8 KiB header cap). Anything else is 404;
// methods other than GET/HEAD are 405.
//
// Thread rule: Start/Stop from the owning thread; the handler runs on the
// server's I/O thread and must be thread-safe and quick.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "common/base/status.h"

namespace tandem::node {

struct HttpReply {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

class AdminHttpServer {
 public:
  // path -> reply (only GET/HEAD reach it).
  using Handler = std::function<HttpReply(const std::string& path)>;

  // Binds `address` ("host:port", port 0 = any) and starts serving.
  static StatusOr<std::unique_ptr<AdminHttpServer>> Start(const std::string& address, Handler handler);
  ~AdminHttpServer();  // Stop()
  void Stop();
  uint16_t port() const { return port_; }
  std::string address() const;

  struct Impl;

 private:
  AdminHttpServer() = default;
  std::shared_ptr<Impl> impl_;
  std::thread thread_;
  uint16_t port_ = 0;
};

}  // namespace tandem::node
