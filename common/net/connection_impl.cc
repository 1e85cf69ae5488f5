// ConnectionImpl, running half: reads, writes, dispatch, calls, keepalive, close.
#include "common/net/connection_impl.h"

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>

#include "common/base/logging.h"
#include "common/proto/messages.h"

namespace tandem::net::internal {
namespace {

constexpr int64_t kFlushBeforeCloseMs = 1000;
// Payload cap until the Hello exchange is done: Hello and HelloReply are tiny,
// and an unauthenticated peer must not make us buffer max_frame_bytes.
constexpr uint32_t kMaxHelloPayloadBytes = 16 * 1024;

}  // namespace

ConnectionImpl::ConnectionImpl(asio::io_context& io, Options options)
    : io_(io),
      strand_(asio::make_strand(io)),
      options_(std::move(options)),
      expected_token_(options_.rpc.cluster_token),
      resolver_(strand_),
      decoder_(std::min(options_.rpc.max_frame_bytes, kMaxHelloPayloadBytes)),
      keepalive_timer_(strand_),
      open_timer_(strand_) {
  if (options_.tls) {
    tls_ = std::make_unique<asio::ssl::stream<tcp::socket>>(strand_, *options_.tls);
  } else {
    plain_ = std::make_unique<tcp::socket>(strand_);
  }
  last_received_ = last_sent_ = Clock::now();
}

tcp::socket& ConnectionImpl::socket() { return tls_ ? tls_->next_layer() : *plain_; }

std::string ConnectionImpl::remote_address() const {
  std::lock_guard<std::mutex> lock(info_mu_);
  return remote_address_;
}

std::string ConnectionImpl::peer_name() const {
  std::lock_guard<std::mutex> lock(info_mu_);
  return peer_name_;
}

StatusOr<std::string> ConnectionImpl::Encode(FrameKind kind, uint64_t correlation_id,
                                             const google::protobuf::Message& message) {
  return EncodeFrame(kind, correlation_id, message, options_.rpc.max_frame_bytes);
}

Status ConnectionImpl::Enqueue(std::string frame) {
  if (!open_.load()) return UnavailableError("connection to " + remote_address() + " is closed");
  uint64_t queued = queued_bytes_.fetch_add(frame.size()) + frame.size();
  if (queued > options_.rpc.max_queued_write_bytes) {
    queued_bytes_ -= frame.size();
    return ResourceExhaustedError("write queue to " + remote_address() + " is full");
  }
  asio::post(strand_,
             [self = shared_from_this(), frame = std::move(frame)]() mutable { self->PushWrite(std::move(frame)); });
  return Status::Ok();
}

void ConnectionImpl::PushWrite(std::string frame) {
  if (closed_) {
    queued_bytes_ -= frame.size();
    return;
  }
  write_queue_.push_back(std::move(frame));
  if (!writing_) StartWrite();
}

void ConnectionImpl::StartWrite() {
  writing_ = true;
  auto on_written = [self = shared_from_this()](const boost::system::error_code& ec, size_t) {
    self->writing_ = false;
    if (self->closed_) return;
    if (ec) {
      self->DoClose(UnavailableError("write failed: " + ec.message()));
      return;
    }
    self->queued_bytes_ -= self->write_queue_.front().size();
    self->write_queue_.pop_front();
    self->last_sent_ = Clock::now();
    if (!self->write_queue_.empty()) {
      self->StartWrite();
    } else if (self->close_after_flush_) {
      self->DoClose(self->close_reason_);
    }
  };
  asio::const_buffer buffer(write_queue_.front().data(), write_queue_.front().size());
  if (tls_) {
    asio::async_write(*tls_, buffer, std::move(on_written));
  } else {
    asio::async_write(*plain_, buffer, std::move(on_written));
  }
}

void ConnectionImpl::StartRead() {
  if (closed_ || reading_stopped_) return;
  auto on_read = [self = shared_from_this()](const boost::system::error_code& ec, size_t bytes) {
    self->OnRead(ec, bytes);
  };
  if (tls_) {
    tls_->async_read_some(asio::buffer(read_buffer_), std::move(on_read));
  } else {
    plain_->async_read_some(asio::buffer(read_buffer_), std::move(on_read));
  }
}

void ConnectionImpl::OnRead(const boost::system::error_code& ec, size_t bytes) {
  if (closed_ || reading_stopped_) return;
  if (ec) {
    bool eof = ec == asio::error::eof || ec == asio::ssl::error::stream_truncated;
    DoClose(UnavailableError(eof ? "peer closed the connection" : "read failed: " + ec.message()));
    return;
  }
  last_received_ = Clock::now();
  decoder_.Append(read_buffer_.data(), bytes);
  while (!closed_ && !reading_stopped_) {
    auto next = decoder_.Next();
    if (!next.ok()) {
      if (!authenticated_ && options_.side == Side::kServer) {
        RefuseHello(0, next.status());  // rate-limited: anyone can dial the control port
        return;
      }
      TANDEM_LOG_WARN("garbled frame from {}: {}", remote_address(), next.status().ToString());
      Reject(0, next.status());
      return;
    }
    if (!next->has_value()) break;
    Dispatch(std::move(**next));
  }
  StartRead();
}

void ConnectionImpl::Dispatch(Frame frame) {
  if (!authenticated_) {
    if (options_.side == Side::kServer) {
      HandleHello(frame);
    } else if (frame.header.kind == FrameKind::kReply) {
      HandleReply(frame);
    } else {
      DoClose(UnavailableError("peer sent " + proto::MessageTypeName(frame.header.type) + " before answering Hello"));
    }
    return;
  }
  switch (frame.header.kind) {
    case FrameKind::kReply: HandleReply(frame); return;
    case FrameKind::kRequest: HandleRequest(frame); return;
    case FrameKind::kOneWay: HandleOneWay(frame); return;
  }
}

void ConnectionImpl::HandleReply(const Frame& frame) {
  auto it = pending_.find(frame.header.correlation_id);
  if (it == pending_.end()) return;  // late reply after its deadline: drop
  PendingCall call = std::move(it->second);
  pending_.erase(it);
  if (call.timer) call.timer->cancel();
  auto parsed = proto::ParseMessage(static_cast<proto::MessageType>(frame.header.type), frame.payload,
                                    options_.rpc.max_frame_bytes);
  if (!parsed.ok()) {
    call.on_reply(parsed.status());
    DoClose(parsed.status().WithContext("garbled reply"));
    return;
  }
  if (frame.header.type == proto::MESSAGE_TYPE_ERROR) {
    Status status = proto::FromErrorInfo(static_cast<const proto::Error&>(**parsed).error());
    call.on_reply(status.ok() ? InternalError("peer sent an Error reply without a code") : status);
    return;
  }
  call.on_reply(std::move(*parsed));
}

void ConnectionImpl::HandleRequest(const Frame& frame) {
  auto parsed = proto::ParseMessage(static_cast<proto::MessageType>(frame.header.type), frame.payload,
                                    options_.rpc.max_frame_bytes);
  if (!parsed.ok()) {
    Reject(frame.header.correlation_id, parsed.status());
    return;
  }
  auto state = std::make_shared<Responder::State>();
  state->connection = shared_from_this();
  state->correlation_id = frame.header.correlation_id;
  Responder responder(state);
  if (frame.header.type == proto::MESSAGE_TYPE_HELLO) {
    responder.Fail(FailedPreconditionError("Hello was already done"));
  } else if (!options_.handlers.on_request) {
    responder.Fail(UnimplementedError("no request handler here"));
  } else {
    options_.handlers.on_request(shared_from_this(), std::move(*parsed), std::move(responder));
  }
}

void ConnectionImpl::HandleOneWay(const Frame& frame) {
  if (frame.header.type == proto::MESSAGE_TYPE_PING) return;
  auto parsed = proto::ParseMessage(static_cast<proto::MessageType>(frame.header.type), frame.payload,
                                    options_.rpc.max_frame_bytes);
  if (!parsed.ok()) {
    Reject(0, parsed.status());
    return;
  }
  if (options_.handlers.on_message) options_.handlers.on_message(shared_from_this(), std::move(*parsed));
}

void ConnectionImpl::Reject(uint64_t correlation_id, const Status& status) {
  proto::Error error;
  *error.mutable_error() = proto::ToErrorInfo(status);
  auto encoded = Encode(correlation_id != 0 ? FrameKind::kReply : FrameKind::kOneWay, correlation_id, error);
  if (encoded.ok()) {
    queued_bytes_ += encoded->size();
    PushWrite(std::move(*encoded));
  }
  CloseAfterFlush(status);
}

void ConnectionImpl::CloseAfterFlush(const Status& reason) {
  reading_stopped_ = true;
  open_.store(false);
  if (!writing_ && write_queue_.empty()) {
    DoClose(reason);
    return;
  }
  close_after_flush_ = true;
  close_reason_ = reason;
  open_timer_.expires_after(std::chrono::milliseconds(kFlushBeforeCloseMs));
  open_timer_.async_wait([self = shared_from_this(), reason](const boost::system::error_code& ec) {
    if (!ec) self->DoClose(reason);
  });
}

void ConnectionImpl::ArmKeepalive() {
  const RpcConfig& rpc = options_.rpc;
  if (rpc.keepalive_interval_ms <= 0 && rpc.idle_timeout_ms <= 0) return;
  int64_t tick_ms = rpc.keepalive_interval_ms > 0 ? rpc.keepalive_interval_ms : rpc.idle_timeout_ms;
  if (rpc.idle_timeout_ms > 0) tick_ms = std::min(tick_ms, std::max<int64_t>(rpc.idle_timeout_ms / 4, 1));
  keepalive_timer_.expires_after(std::chrono::milliseconds(tick_ms));
  keepalive_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
    if (!ec) self->OnKeepalive();
  });
}

void ConnectionImpl::OnKeepalive() {
  if (closed_ || close_after_flush_) return;
  const RpcConfig& rpc = options_.rpc;
  auto now = Clock::now();
  auto since = [now](Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(now - t).count();
  };
  if (rpc.idle_timeout_ms > 0 && since(last_received_) > rpc.idle_timeout_ms) {
    DoClose(UnavailableError("peer " + remote_address() + " silent for over " + std::to_string(rpc.idle_timeout_ms) +
                             " ms"));
    return;
  }
  if (rpc.keepalive_interval_ms > 0 && !writing_ && since(last_sent_) >= rpc.keepalive_interval_ms) {
    auto ping = Encode(FrameKind::kOneWay, 0, proto::Ping());
    if (ping.ok()) {
      queued_bytes_ += ping->size();
      PushWrite(std::move(*ping));
    }
  }
  ArmKeepalive();
}

void ConnectionImpl::Call(const google::protobuf::Message& request, int64_t timeout_ms, ReplyCallback on_reply) {
  if (timeout_ms <= 0) timeout_ms = options_.default_call_timeout_ms;
  uint64_t id = next_correlation_id_++;
  auto encoded = Encode(FrameKind::kRequest, id, request);
  Status status = encoded.ok() ? Status::Ok() : encoded.status();
  if (status.ok() && !open_.load()) status = UnavailableError("connection to " + remote_address() + " is closed");
  if (status.ok()) {
    uint64_t queued = queued_bytes_.fetch_add(encoded->size()) + encoded->size();
    if (queued > options_.rpc.max_queued_write_bytes) {
      queued_bytes_ -= encoded->size();
      status = ResourceExhaustedError("write queue to " + remote_address() + " is full");
    }
  }
  if (!status.ok()) {
    asio::post(strand_, [on_reply = std::move(on_reply), status] { on_reply(status); });
    return;
  }
  asio::post(strand_, [self = shared_from_this(), id, timeout_ms, frame = std::move(*encoded),
                       on_reply = std::move(on_reply)]() mutable {
    if (self->closed_ || self->close_after_flush_) {
      self->queued_bytes_ -= frame.size();
      on_reply(UnavailableError("connection to " + self->remote_address() + " is closed"));
      return;
    }
    PendingCall call;
    call.on_reply = std::move(on_reply);
    call.timer = std::make_unique<asio::steady_timer>(self->strand_);
    call.timer->expires_after(std::chrono::milliseconds(timeout_ms));
    call.timer->async_wait([self, id, timeout_ms](const boost::system::error_code& ec) {
      if (ec) return;
      auto it = self->pending_.find(id);
      if (it == self->pending_.end()) return;
      ReplyCallback callback = std::move(it->second.on_reply);
      self->pending_.erase(it);
      callback(DeadlineExceededError("no reply within " + std::to_string(timeout_ms) + " ms"));
    });
    self->pending_.emplace(id, std::move(call));
    self->PushWrite(std::move(frame));
  });
}

Status ConnectionImpl::Send(const google::protobuf::Message& message) {
  TANDEM_ASSIGN_OR_RETURN(std::string frame, Encode(FrameKind::kOneWay, 0, message));
  return Enqueue(std::move(frame));
}

void ConnectionImpl::SendReply(uint64_t correlation_id, const google::protobuf::Message& reply) {
  auto frame = Encode(FrameKind::kReply, correlation_id, reply);
  Status status = frame.ok() ? Enqueue(std::move(*frame)) : frame.status();
  if (!status.ok() && open_.load()) {
    TANDEM_LOG_WARN("cannot reply to {}: {}", remote_address(), status.ToString());
    Close(status);
  }
}

void ConnectionImpl::Close(const Status& reason) {
  asio::post(strand_, [self = shared_from_this(), reason] { self->DoClose(reason); });
}

void ConnectionImpl::DoClose(const Status& reason) {
  if (closed_) return;
  closed_ = true;
  open_.store(false);
  keepalive_timer_.cancel();
  open_timer_.cancel();
  resolver_.cancel();
  boost::system::error_code ignored;
  socket().shutdown(tcp::socket::shutdown_both, ignored);
  socket().close(ignored);
  if (on_open_) {
    OpenCallback callback = std::move(on_open_);
    on_open_ = nullptr;
    callback(reason);
  }
  // on_close before the pending calls fail: the owner first learns that the peer is gone
  // (the router moves that node's requests elsewhere), so a call's failure is not taken
  // for an answer of a live peer.
  if (authenticated_ && options_.handlers.on_close) options_.handlers.on_close(shared_from_this(), reason);
  Status closed = UnavailableError("connection to " + remote_address() + " closed: " + reason.ToString());
  auto pending = std::move(pending_);
  pending_.clear();
  for (auto& [id, call] : pending) {
    if (call.timer) call.timer->cancel();
    call.on_reply(closed);
  }
}

}  // namespace tandem::net::internal
