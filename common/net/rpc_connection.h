// RpcConnection: one authenticated, multiplexed control connection to a peer.
//
// Both ends are equal once the Hello is done: either side may send requests
// (Call, answered by exactly one reply or a deadline) and one-way messages
// (Send: Tokens, Heartbeat, KvDone). Writes are queued and go out in call
// order. Created by RpcServer (accepted) or RpcClient (dialed).
//
// Thread rule: every public method is thread-safe. Callbacks (RpcHandlers,
// reply callbacks) run on the EventLoop's I/O threads, one at a time per
// connection (a strand), and must not block. CallAndWait blocks and must not
// be called on an I/O thread. Lifetime: shared_ptr; async work holds a
// reference until the connection is closed.
#pragma once

#include <google/protobuf/message.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/base/status.h"

namespace tandem::net {

class RpcConnection;
using MessagePtr = std::unique_ptr<google::protobuf::Message>;

// Answers one incoming request. Copyable; the first Reply/Fail wins, later
// ones are ignored. If every copy is destroyed unanswered, the peer gets an
// Internal error, so a request is never left hanging. Thread-safe.
class Responder {
 public:
  struct State;
  explicit Responder(std::shared_ptr<State> state) : state_(std::move(state)) {}
  // Sends `reply` (a control-protocol message). No-op once answered or closed.
  void Reply(const google::protobuf::Message& reply) const;
  // Sends an Error reply carrying `status` (must not be OK).
  void Fail(const Status& status) const;

 private:
  std::shared_ptr<State> state_;
};

// What a connection does with traffic from its peer. Every member is optional;
// none runs before the peer's Hello checked out.
struct RpcHandlers {
  // A request; answer through the responder (now or later, from any thread).
  // Unset: requests get Unimplemented.
  std::function<void(const std::shared_ptr<RpcConnection>&, MessagePtr, Responder)> on_request;
  // A one-way message (never a Ping: keepalives are handled inside).
  std::function<void(const std::shared_ptr<RpcConnection>&, MessagePtr)> on_message;
  // The connection is authenticated and ready (after Hello).
  std::function<void(const std::shared_ptr<RpcConnection>&)> on_open;
  // Called once when an opened connection closes: peer EOF/reset, idle
  // timeout, garbled frame, or local Close(). Pending calls fail right after it.
  std::function<void(const std::shared_ptr<RpcConnection>&, const Status&)> on_close;
};

class RpcConnection {
 public:
  // The reply, or an error: the peer's Error reply as its Status,
  // DeadlineExceeded, or Unavailable when the connection closed first.
  using ReplyCallback = std::function<void(StatusOr<MessagePtr>)>;

  virtual ~RpcConnection() = default;

  // Sends a request. on_reply runs exactly once on an I/O thread. timeout_ms <= 0
  // uses the configured default. Errors before sending (closed, too large,
  // write queue full) are delivered through on_reply too.
  virtual void Call(const google::protobuf::Message& request, int64_t timeout_ms, ReplyCallback on_reply) = 0;

  // Call + wait. REQUIRES: not on an I/O thread.
  StatusOr<MessagePtr> CallAndWait(const google::protobuf::Message& request, int64_t timeout_ms);

  // Typed CallAndWait: Internal when the peer replied with another class.
  template <typename ReplyT>
  StatusOr<ReplyT> CallAndWaitFor(const google::protobuf::Message& request, int64_t timeout_ms) {
    TANDEM_ASSIGN_OR_RETURN(MessagePtr reply, CallAndWait(request, timeout_ms));
    if (reply->GetDescriptor() != ReplyT::descriptor()) {
      return InternalError("unexpected reply " + reply->GetTypeName());
    }
    return std::move(static_cast<ReplyT&>(*reply));
  }

  // Queues a one-way message. Unavailable when closed; ResourceExhausted when
  // the write queue is full; InvalidArgument when not a control message or too large.
  virtual Status Send(const google::protobuf::Message& message) = 0;

  // Closes the connection; on_close gets `reason` (must not be OK). Idempotent.
  virtual void Close(const Status& reason) = 0;

  // True until the connection closed (or failed to open).
  virtual bool is_open() const = 0;
  // "ip:port" of the peer.
  virtual std::string remote_address() const = 0;
  // The peer's name from its Hello / HelloReply ("" before that).
  virtual std::string peer_name() const = 0;
  // True on an I/O thread of the EventLoop this connection runs on.
  virtual bool OnIoThread() const = 0;
};

}  // namespace tandem::net
