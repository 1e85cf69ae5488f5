#include "common/net/rpc_server.h"

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/post.hpp>
#include <mutex>
#include <vector>

#include "common/base/logging.h"
#include "common/net/connection_impl.h"
#include "common/net/tls_context.h"

namespace tandem::net {

using internal::ConnectionImpl;
using internal::tcp;
namespace asio = boost::asio;

struct RpcServer::Impl : std::enable_shared_from_this<RpcServer::Impl> {
  Impl(EventLoop& loop, RpcServerConfig config, RpcHandlers handlers)
      : loop(loop),
        config(std::move(config)),
        handlers(std::move(handlers)),
        strand(asio::make_strand(loop.context())),
        acceptor(strand) {}

  void Accept();
  size_t LiveConnections();  // REQUIRES: mu held

  EventLoop& loop;
  RpcServerConfig config;
  RpcHandlers handlers;
  std::shared_ptr<asio::ssl::context> tls;
  std::shared_ptr<LogLimiter> refusal_log = std::make_shared<LogLimiter>();  // refused Hellos
  internal::Strand strand;
  tcp::acceptor acceptor;  // strand
  uint16_t port = 0;
  std::string address;
  mutable std::mutex mu;
  bool stopped = false;                                    // guarded by mu
  std::vector<std::weak_ptr<ConnectionImpl>> connections;  // guarded by mu
};

size_t RpcServer::Impl::LiveConnections() {
  std::erase_if(connections, [](const std::weak_ptr<ConnectionImpl>& weak) {
    auto conn = weak.lock();
    return conn == nullptr || !conn->is_open();
  });
  return connections.size();
}

void RpcServer::Impl::Accept() {
  ConnectionImpl::Options options;
  options.side = ConnectionImpl::Side::kServer;
  options.rpc = config.rpc;
  options.tls = tls;
  options.handlers = handlers;
  options.refusal_log = refusal_log;
  auto conn = std::make_shared<ConnectionImpl>(loop.context(), std::move(options));
  acceptor.async_accept(conn->socket(), asio::bind_executor(strand, [self = shared_from_this(),
                                                                     conn](const boost::system::error_code& ec) {
                          {
                            std::lock_guard<std::mutex> lock(self->mu);
                            if (self->stopped) return;
                            if (!ec) {
                              if (self->LiveConnections() >= static_cast<size_t>(self->config.max_connections)) {
                                TANDEM_LOG_WARN("control server at max_connections; dropping a new connection");
                                boost::system::error_code ignored;
                                conn->socket().close(ignored);
                              } else {
                                self->connections.push_back(conn);
                                boost::system::error_code ignored;
                                conn->socket().set_option(tcp::no_delay(true), ignored);
                                conn->StartServer();
                              }
                            } else if (ec == asio::error::operation_aborted) {
                              return;
                            } else {
                              TANDEM_LOG_WARN("accept failed: {}", ec.message());
                            }
                          }
                          self->Accept();
                        }));
}

StatusOr<std::unique_ptr<RpcServer>> RpcServer::Start(EventLoop& loop, RpcServerConfig config, RpcHandlers handlers) {
  TANDEM_RETURN_IF_ERROR(config.Validate());
  TANDEM_ASSIGN_OR_RETURN(HostPort listen, ParseHostPort(config.listen_address));
  boost::system::error_code ec;
  asio::ip::address ip = asio::ip::make_address(listen.host == "localhost" ? "127.0.0.1" : listen.host, ec);
  if (ec) {
    return InvalidArgumentError("listen_address host must be an IP literal or localhost: " + listen.host);
  }
  auto impl = std::make_shared<Impl>(loop, std::move(config), std::move(handlers));
  if (impl->config.rpc.tls.enabled) {
    TANDEM_ASSIGN_OR_RETURN(impl->tls, internal::MakeServerTlsContext(impl->config.rpc.tls));
  }
  tcp::endpoint endpoint(ip, listen.port);
  tcp::acceptor& acceptor = impl->acceptor;
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(impl->config.backlog, ec);
  if (ec) {
    return UnavailableError("cannot listen on " + impl->config.listen_address + ": " + ec.message());
  }
  impl->port = acceptor.local_endpoint(ec).port();
  impl->address = FormatHostPort({ip.to_string(), impl->port});
  asio::post(impl->strand, [impl] { impl->Accept(); });
  TANDEM_LOG_INFO("control server listening on {}{}", impl->address, impl->tls ? " (TLS)" : "");
  return std::unique_ptr<RpcServer>(new RpcServer(impl));
}

RpcServer::~RpcServer() { Stop(); }

void RpcServer::Stop() {
  std::vector<std::weak_ptr<ConnectionImpl>> connections;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->stopped) return;
    impl_->stopped = true;
    connections.swap(impl_->connections);
  }
  asio::post(impl_->strand, [impl = impl_] {
    boost::system::error_code ignored;
    impl->acceptor.close(ignored);
  });
  for (auto& weak : connections) {
    if (auto conn = weak.lock()) conn->Close(CancelledError("server stopped"));
  }
}

uint16_t RpcServer::port() const { return impl_->port; }
std::string RpcServer::address() const { return impl_->address; }

size_t RpcServer::num_connections() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->LiveConnections();
}

}  // namespace tandem::net
