// ConnectionImpl, opening half: accept/connect, TLS handshake, and the Hello
// exchange that authenticates a peer. See connection_impl.h.
#include <boost/asio/connect.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>

#include "common/base/logging.h"
#include "common/net/connection_impl.h"
#include "common/proto/messages.h"

namespace tandem::net::internal {
namespace {

bool IsIpLiteral(const std::string& host) {
  boost::system::error_code ec;
  asio::ip::make_address(host, ec);
  return !ec;
}

}  // namespace

void ConnectionImpl::StartServer() {
  asio::post(strand_, [self = shared_from_this()] {
    boost::system::error_code ec;
    auto endpoint = self->socket().remote_endpoint(ec);
    {
      std::lock_guard<std::mutex> lock(self->info_mu_);
      self->remote_address_ = ec ? "?" : FormatHostPort({endpoint.address().to_string(), endpoint.port()});
    }
    self->remote_host_ = ec ? "?" : endpoint.address().to_string();
    self->open_timer_.expires_after(std::chrono::milliseconds(self->options_.rpc.hello_timeout_ms));
    self->open_timer_.async_wait([self](const boost::system::error_code& ec) {
      if (!ec && !self->authenticated_) {
        self->DoClose(DeadlineExceededError("no Hello within hello_timeout_ms"));
      }
    });
    if (!self->tls_) {
      self->StartRead();
      return;
    }
    self->tls_->async_handshake(asio::ssl::stream_base::server, [self](const boost::system::error_code& ec) {
      if (ec) {
        self->DoClose(UnavailableError("TLS handshake failed: " + ec.message()));
        return;
      }
      self->StartRead();
    });
  });
}

void ConnectionImpl::StartClient(const HostPort& peer, int64_t timeout_ms, OpenCallback on_open) {
  asio::post(strand_, [self = shared_from_this(), peer, timeout_ms, on_open = std::move(on_open)] {
    self->on_open_ = std::move(on_open);
    {
      std::lock_guard<std::mutex> lock(self->info_mu_);
      self->remote_address_ = FormatHostPort(peer);
    }
    self->open_timer_.expires_after(std::chrono::milliseconds(timeout_ms));
    self->open_timer_.async_wait([self](const boost::system::error_code& ec) {
      if (!ec && !self->authenticated_) {
        self->DoClose(DeadlineExceededError("connect to " + self->remote_address() + " timed out"));
      }
    });
    self->resolver_.async_resolve(
        peer.host, std::to_string(peer.port),
        [self, peer](const boost::system::error_code& ec, tcp::resolver::results_type results) {
          if (self->closed_) return;
          if (ec) {
            self->DoClose(UnavailableError("resolve " + peer.host + ": " + ec.message()));
            return;
          }
          asio::async_connect(
              self->socket(), results, [self, peer](const boost::system::error_code& ec, const tcp::endpoint&) {
                if (self->closed_) return;
                if (ec) {
                  self->DoClose(UnavailableError("connect to " + FormatHostPort(peer) + ": " + ec.message()));
                  return;
                }
                self->AfterConnect(peer);
              });
        });
  });
}

void ConnectionImpl::AfterConnect(const HostPort& peer) {
  boost::system::error_code ignored;
  socket().set_option(tcp::no_delay(true), ignored);
  if (!tls_) {
    StartRead();
    SendHello();
    return;
  }
  const std::string& name = options_.rpc.tls.server_name.empty() ? peer.host : options_.rpc.tls.server_name;
  if (!IsIpLiteral(name)) SSL_set_tlsext_host_name(tls_->native_handle(), name.c_str());
  tls_->set_verify_callback(asio::ssl::host_name_verification(name));
  tls_->async_handshake(asio::ssl::stream_base::client,
                        [self = shared_from_this()](const boost::system::error_code& ec) {
                          if (self->closed_) return;
                          if (ec) {
                            self->DoClose(UnavailableError("TLS handshake failed: " + ec.message()));
                            return;
                          }
                          self->StartRead();
                          self->SendHello();
                        });
}

void ConnectionImpl::SendHello() {
  proto::Hello hello;
  hello.set_protocol_version(proto::kProtocolVersion);
  hello.set_cluster_token(options_.rpc.cluster_token);
  hello.set_peer_name(options_.rpc.peer_name);
  uint64_t id = next_correlation_id_++;
  auto frame = Encode(FrameKind::kRequest, id, hello);
  if (!frame.ok()) {
    DoClose(frame.status());
    return;
  }
  PendingCall call;
  call.on_reply = [self = shared_from_this()](StatusOr<MessagePtr> reply) {
    if (!reply.ok()) {
      self->DoClose(reply.status().WithContext("Hello refused"));
      return;
    }
    if (proto::TypeOf(**reply) != proto::MESSAGE_TYPE_HELLO_REPLY) {
      self->DoClose(UnavailableError("peer answered Hello with " + (*reply)->GetTypeName()));
      return;
    }
    {
      std::lock_guard<std::mutex> lock(self->info_mu_);
      self->peer_name_ = static_cast<const proto::HelloReply&>(**reply).peer_name().substr(0, 256);
    }
    self->MarkOpen();
  };
  pending_.emplace(id, std::move(call));
  queued_bytes_ += frame->size();
  PushWrite(std::move(*frame));
}

void ConnectionImpl::MarkOpen() {
  authenticated_ = true;
  decoder_.set_max_payload_bytes(options_.rpc.max_frame_bytes);
  open_timer_.cancel();
  ArmKeepalive();
  if (on_open_) {
    OpenCallback callback = std::move(on_open_);
    on_open_ = nullptr;
    callback(Status::Ok());
  }
  if (options_.handlers.on_open) options_.handlers.on_open(shared_from_this());
}

void ConnectionImpl::RefuseHello(uint64_t correlation_id, const Status& status) {
  int64_t suppressed = 0;
  if (!options_.refusal_log || options_.refusal_log->Allow(remote_host_ + "|" + status.ToString(), &suppressed)) {
    TANDEM_LOG_WARN("refused control connection from {}: {}{}", remote_host_, status.ToString(),
                    SuppressedNote(suppressed));
  }
  Reject(correlation_id, status);
}

void ConnectionImpl::HandleHello(const Frame& frame) {
  if (frame.header.kind != FrameKind::kRequest || frame.header.type != proto::MESSAGE_TYPE_HELLO) {
    RefuseHello(0, PermissionDeniedError("expected Hello first"));
    return;
  }
  auto parsed = proto::ParseMessage(proto::MESSAGE_TYPE_HELLO, frame.payload, options_.rpc.max_frame_bytes);
  if (!parsed.ok()) {
    RefuseHello(frame.header.correlation_id, parsed.status());
    return;
  }
  const auto& hello = static_cast<const proto::Hello&>(**parsed);
  // Check the token before anything else, so a peer without it learns nothing.
  if (!expected_token_.Matches(hello.cluster_token())) {
    RefuseHello(frame.header.correlation_id, PermissionDeniedError("wrong cluster token"));
    return;
  }
  if (hello.protocol_version() != proto::kProtocolVersion) {
    RefuseHello(frame.header.correlation_id,
                FailedPreconditionError("protocol version " + std::to_string(hello.protocol_version()) +
                                        " is not supported (this peer speaks " +
                                        std::to_string(proto::kProtocolVersion) + ")"));
    return;
  }
  {
    std::lock_guard<std::mutex> lock(info_mu_);
    peer_name_ = hello.peer_name().substr(0, 256);
  }
  proto::HelloReply reply;
  reply.set_protocol_version(proto::kProtocolVersion);
  reply.set_peer_name(options_.rpc.peer_name);
  auto encoded = Encode(FrameKind::kReply, frame.header.correlation_id, reply);
  if (!encoded.ok()) {
    DoClose(encoded.status());
    return;
  }
  queued_bytes_ += encoded->size();
  PushWrite(std::move(*encoded));
  MarkOpen();
}

}  // namespace tandem::net::internal
