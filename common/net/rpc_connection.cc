#include "common/net/rpc_connection.h"

#include <future>

#include "common/net/connection_impl.h"
#include "common/proto/messages.h"

namespace tandem::net {

Responder::State::~State() {
  if (answered.exchange(true)) return;
  if (auto conn = connection.lock()) {
    proto::Error error;
    *error.mutable_error() = proto::ToErrorInfo(InternalError("request dropped without a reply"));
    conn->SendReply(correlation_id, error);
  }
}

void Responder::Reply(const google::protobuf::Message& reply) const {
  if (state_->answered.exchange(true)) return;
  if (auto conn = state_->connection.lock()) conn->SendReply(state_->correlation_id, reply);
}

void Responder::Fail(const Status& status) const {
  TANDEM_CHECK(!status.ok()) << "Responder::Fail with an OK status";
  proto::Error error;
  *error.mutable_error() = proto::ToErrorInfo(status);
  Reply(error);
}

StatusOr<MessagePtr> RpcConnection::CallAndWait(const google::protobuf::Message& request, int64_t timeout_ms) {
  TANDEM_CHECK(!OnIoThread()) << "CallAndWait would block an I/O thread";
  auto promise = std::make_shared<std::promise<StatusOr<MessagePtr>>>();
  std::future<StatusOr<MessagePtr>> future = promise->get_future();
  Call(request, timeout_ms, [promise](StatusOr<MessagePtr> reply) { promise->set_value(std::move(reply)); });
  return future.get();
}

}  // namespace tandem::net
