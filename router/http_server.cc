#include "router/http_server.h"

#include <boost/asio/strand.hpp>

#include <chrono>

#include "common/base/logging.h"
#include "router/http_session.h"

namespace tandem::router {

namespace net = boost::asio;
using tcp = boost::asio::ip::tcp;

HttpServer::HttpServer(RouterConfig config, RouterDeps deps)
    : context_(std::make_unique<RouterContext>(std::move(config), std::move(deps))),
      acceptor_(net::make_strand(io_context_)) {}  // a strand: accept handlers and Stop's close never race

HttpServer::~HttpServer() { Stop(); }

Status HttpServer::Start() {
  const RouterConfig& config = context_->config;
  TANDEM_RETURN_IF_ERROR(config.Validate());
  if (context_->deps.engine == nullptr || context_->deps.codec == nullptr) {
    return InvalidArgumentError("HttpServer needs an engine and a text codec");
  }
  if (context_->deps.model.max_context_tokens < 2 || context_->deps.model.vocab_size < 1) {
    return InvalidArgumentError("HttpServer: served model needs a context and a vocabulary");
  }
  boost::system::error_code ec;
  const net::ip::address address = net::ip::make_address(config.listen_host, ec);
  if (ec) return InvalidArgumentError("listen_host '" + config.listen_host + "' is not an IP address");
  const tcp::endpoint endpoint(address, static_cast<uint16_t>(config.listen_port));  // Validate: 0..65535
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return UnavailableError("cannot listen on " + config.listen_host + ":" + std::to_string(config.listen_port) + ": " +
                            ec.message());
  }
  port_ = acceptor_.local_endpoint(ec).port();
  if (context_->keys.open()) {
    TANDEM_LOG_WARN("no API keys configured: the API on {}:{} is open to every client", config.listen_host, port_);
  } else {
    TANDEM_LOG_INFO("{} API key(s) configured", config.api_keys.size());
  }
  DoAccept();
  started_ = true;
  for (int32_t i = 0; i < config.num_io_threads; ++i) {
    threads_.emplace_back([this] { io_context_.run(); });
  }
  TANDEM_LOG_INFO("router listening on {}:{}", config.listen_host, port_);
  return Status::Ok();
}

void HttpServer::DoAccept() {
  acceptor_.async_accept(net::make_strand(io_context_), [this](boost::system::error_code ec, tcp::socket socket) {
    if (!ec) {
      auto session = std::make_shared<HttpSession>(std::move(socket), context_.get());
      {
        std::lock_guard<std::mutex> lock(sessions_mu_);
        std::erase_if(sessions_, [](const auto& w) { return w.expired(); });
        sessions_.push_back(session);
      }
      session->Start();
    }
    if (acceptor_.is_open()) DoAccept();
  });
}

bool HttpServer::Drain(std::chrono::milliseconds timeout, const std::function<bool()>& give_up) {
  context_->draining.store(true);
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (context_->admission.running() > 0 || context_->admission.queued() > 0) {
    if (std::chrono::steady_clock::now() >= end || (give_up && give_up())) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

void HttpServer::Stop() {
  if (!started_) return;
  started_ = false;
  net::post(acceptor_.get_executor(), [this] {
    boost::system::error_code ec;
    acceptor_.close(ec);
  });
  std::vector<std::weak_ptr<HttpSession>> sessions;
  {
    std::lock_guard<std::mutex> lock(sessions_mu_);
    sessions.swap(sessions_);
  }
  for (const auto& weak : sessions) {
    if (auto session = weak.lock()) session->Shutdown();
  }
  // Let the closes run so calls cancel their engine requests and free themselves.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  for (const auto& weak : sessions) {
    while (!weak.expired() && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  io_context_.stop();
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

}  // namespace tandem::router
