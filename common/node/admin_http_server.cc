#include "common/node/admin_http_server.h"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>

#include "common/base/logging.h"

namespace tandem::node {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

// Handlers hold a plain Impl*: the I/O thread is joined before Impl dies, and
// ~io_context then destroys any handler still pending (no shared_ptr cycle).
struct AdminHttpServer::Impl {
  asio::io_context io;
  tcp::acceptor acceptor{io};
  Handler handler;
  std::string host;

  void Accept() {
    acceptor.async_accept([self = this](beast::error_code ec, tcp::socket socket) {
      if (ec) return;  // closed
      std::make_shared<Session>(self, std::move(socket))->Read();
      self->Accept();
    });
  }

  struct Session : std::enable_shared_from_this<Session> {
    Session(Impl* impl, tcp::socket socket) : impl(impl), stream(std::move(socket)) {}
    Impl* impl;
    beast::tcp_stream stream;
    beast::flat_buffer buffer;
    http::request_parser<http::empty_body> parser;
    http::response<http::string_body> response;

    void Read() {
      parser.header_limit(8 * 1024);
      parser.body_limit(0);
      stream.expires_after(std::chrono::seconds(5));
      http::async_read(stream, buffer, parser,
                       [self = shared_from_this()](beast::error_code ec, size_t) { self->OnRead(ec); });
    }
    void OnRead(beast::error_code ec) {
      if (ec) {
        beast::error_code ignored;
        stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
        return;
      }
      const auto& req = parser.get();
      HttpReply reply;
      if (req.method() != http::verb::get && req.method() != http::verb::head) {
        reply = HttpReply{405, "text/plain; charset=utf-8", "method not allowed\n"};
      } else {
        std::string path(req.target());
        size_t q = path.find('?');
        if (q != std::string::npos) path.resize(q);
        reply = impl->handler(path);
      }
      response.version(11);
      response.result(static_cast<http::status>(reply.status));
      response.set(http::field::content_type, reply.content_type);
      response.set(http::field::connection, "close");
      if (req.method() != http::verb::head) response.body() = std::move(reply.body);
      response.prepare_payload();
      stream.expires_after(std::chrono::seconds(5));
      http::async_write(stream, response, [self = shared_from_this()](beast::error_code, size_t) {
        beast::error_code ignored;
        self->stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
      });
    }
  };
};

StatusOr<std::unique_ptr<AdminHttpServer>> AdminHttpServer::Start(const std::string& address, Handler handler) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0)
    return InvalidArgumentError("http address must be host:port: " + address);
  std::string host = address.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  int port = 0;
  try {
    port = std::stoi(address.substr(colon + 1));
  } catch (...) {
    return InvalidArgumentError("bad http port: " + address);
  }
  if (port < 0 || port > 65535) return InvalidArgumentError("bad http port: " + address);
  std::unique_ptr<AdminHttpServer> server(new AdminHttpServer());
  auto impl = std::make_shared<Impl>();
  impl->handler = std::move(handler);
  impl->host = host;
  beast::error_code ec;
  asio::ip::address ip = asio::ip::make_address(host, ec);
  if (ec) return InvalidArgumentError("http host must be an IP address: " + host);
  tcp::endpoint endpoint(ip, static_cast<uint16_t>(port));
  impl->acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) impl->acceptor.bind(endpoint, ec);
  if (!ec) impl->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return UnavailableError("http listen on " + address + ": " + ec.message());
  server->port_ = impl->acceptor.local_endpoint().port();
  impl->Accept();
  server->impl_ = impl;
  server->thread_ = std::thread([impl = impl.get()] {
    try {
      impl->io.run();
    } catch (const std::exception& e) {
      TANDEM_LOG_ERROR("admin http server: {}", e.what());
    }
  });
  return server;
}

AdminHttpServer::~AdminHttpServer() { Stop(); }

void AdminHttpServer::Stop() {
  if (!impl_) return;
  asio::post(impl_->io, [impl = impl_.get()] {
    beast::error_code ignored;
    impl->acceptor.close(ignored);
    impl->io.stop();
  });
  if (thread_.joinable()) thread_.join();
  impl_.reset();
}

std::string AdminHttpServer::address() const {
  return (impl_ ? impl_->host : std::string("127.0.0.1")) + ":" + std::to_string(port_);
}

}  // namespace tandem::node
