#include "kv_transfer/kv_receiver.h"

#include <fmt/format.h>

#include <chrono>
#include <utility>

#include "common/base/logging.h"

namespace tandem::kv_transfer {

Status KvReceiverConfig::Validate() const {
  if (model_id.empty()) return InvalidArgumentError("kv receiver: model_id is required");
  TANDEM_RETURN_IF_ERROR(layout.Validate());
  if (layout.num_blocks <= 0) return InvalidArgumentError("kv receiver: landing pool has no blocks");
  if (max_sessions <= 0) return InvalidArgumentError("kv receiver: max_sessions must be > 0");
  if (default_lease_ms == 0 || default_lease_ms > kMaxLeaseMs) {
    return InvalidArgumentError("kv receiver: default_lease_ms out of range");
  }
  if (receive_timeout_ms <= 0) return InvalidArgumentError("kv receiver: receive_timeout_ms must be > 0");
  return Status::Ok();
}

KvReceiver::KvReceiver(const KvReceiverConfig& config, Transport& transport, Clock& clock, ControlSink sink)
    : config_(config),
      transport_(transport),
      clock_(clock),
      sink_(std::move(sink)),
      two_sided_(!transport.Capabilities().one_sided),
      refusal_log_(clock) {
  TANDEM_CHECK_OK(config.Validate());
  TANDEM_CHECK(sink_ != nullptr);
}

KvReceiver::~KvReceiver() {
  while (!sessions_.empty()) {
    End(sessions_.begin()->first, CancelledError("KV receiver shut down"), true);
  }
  for (auto& [token, c] : connections_) transport_.Disconnect(c.peer).IgnoreError();
  connections_.clear();
  // Receives already posted land in the landing memory until they end.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(config_.receive_timeout_ms);
  std::vector<TransferEvent> events;
  while (!receives_.empty() && std::chrono::steady_clock::now() < deadline) {
    transport_.Poll(&events);
    for (const TransferEvent& e : events) receives_.erase(e.id);
    events.clear();
  }
  if (landing_.id != kInvalidHandle) transport_.UnregisterMemory(landing_.id).IgnoreError();
}

Status KvReceiver::RegisterLanding(void* base, MemoryKind kind) {
  if (landing_.id != kInvalidHandle) return FailedPreconditionError("landing memory already registered");
  TANDEM_ASSIGN_OR_RETURN(landing_, transport_.RegisterMemory(base, config_.layout.TotalBytes(), kind));
  return Status::Ok();
}

StatusOr<std::string> KvReceiver::Open(ReceiveParams params) {
  if (landing_.id == kInvalidHandle) return FailedPreconditionError("no landing memory registered");
  if (params.blocks.empty() || params.blocks.size() > kMaxBlocksPerSession) {
    return InvalidArgumentError(fmt::format("bad block count {}", params.blocks.size()));
  }
  for (BlockId b : params.blocks) {
    if (b < 0 || b >= config_.layout.num_blocks) {
      return InvalidArgumentError(fmt::format("landing block {} outside the pool", b));
    }
  }
  uint32_t lease_ms = params.lease_ms == 0 ? config_.default_lease_ms : params.lease_ms;
  if (lease_ms > kMaxLeaseMs) return InvalidArgumentError("lease_ms out of range");
  auto existing = sessions_.find(params.request_id);
  if (existing != sessions_.end()) {
    if (existing->second.epoch >= params.epoch) {
      return AlreadyExistsError(fmt::format("request {} already has a receive session at epoch {}", params.request_id,
                                            existing->second.epoch));
    }
    End(params.request_id, CancelledError(fmt::format("superseded by epoch {}", params.epoch)), true);
  }
  if (sessions_.size() >= static_cast<size_t>(config_.max_sessions)) {
    return ResourceExhaustedError("too many KV receive sessions");
  }
  KvTarget target{.request_id = params.request_id,
                  .epoch = params.epoch,
                  .model_id = config_.model_id,
                  .layout = config_.layout,
                  .worker_address = transport_.WorkerAddress(),
                  .region_descriptor = landing_.descriptor,
                  .region_offset = 0,
                  .blocks = std::move(params.blocks),
                  .lease_ms = lease_ms};
  Session s;
  s.epoch = params.epoch;
  s.opened_at = clock_.NowNanos();
  s.deadline = s.opened_at + MsToNanos(lease_ms);
  s.blocks = target.blocks;
  s.layer_state.assign(config_.layout.num_layers, 0);
  s.on_layer = std::move(params.on_layer);
  s.on_done = std::move(params.on_done);
  sessions_.emplace(params.request_id, std::move(s));
  ++stats_.sessions_opened;
  return EncodeKvTarget(target);
}

void KvReceiver::End(RequestId request_id, const Status& status, bool tell_sender) {
  auto it = sessions_.find(request_id);
  if (it == sessions_.end()) return;
  std::function<void(const Status&)> on_done = std::move(it->second.on_done);
  if (tell_sender && !status.ok()) {
    ControlMessage abort = MakeMessage(MessageType::kAbort, request_id, it->second.epoch);
    abort.status = status;
    sink_(request_id, EncodeControlMessage(abort));
  }
  sessions_.erase(it);
  ++(status.ok() ? stats_.sessions_ok : stats_.sessions_failed);
  if (on_done) on_done(status);
}

void KvReceiver::Cancel(RequestId request_id, const Status& reason) {
  End(request_id, reason.ok() ? CancelledError("cancelled") : reason, true);
}

Status KvReceiver::Apply(Session& s, const ControlMessage& m, bool* finished) {
  switch (m.type) {
    case MessageType::kHello:
      if (s.state != State::kAwaitingHello) return FailedPreconditionError("protocol: second Hello");
      if (Status st = CheckCompatible(config_.model_id, config_.layout, m.model_id, m.layout); !st.ok()) {
        LogHandshakeRefusal(refusal_log_, "kv receiver", m.request_id, st, /*by_peer=*/false);
        return st;
      }
      s.state = State::kReceiving;
      return Status::Ok();
    case MessageType::kLayerDone:
      if (s.state != State::kReceiving) return FailedPreconditionError("protocol: LayerDone before Hello");
      if (m.layer >= s.layer_state.size()) return InvalidArgumentError("protocol: LayerDone layer out of range");
      if (two_sided_) return Status::Ok();  // landed when its receive completed
      if (s.layer_state[m.layer] == 2) return FailedPreconditionError("protocol: layer landed twice");
      Landed(s, m.layer);
      return Status::Ok();
    case MessageType::kKvDone:
      if (s.state != State::kReceiving || m.num_layers != static_cast<uint32_t>(config_.layout.num_layers)) {
        return FailedPreconditionError("protocol: KvDone before Hello or with another layer count");
      }
      for (uint8_t state : s.layer_state) {
        if (state == 0) {
          return FailedPreconditionError(
              fmt::format("protocol: KvDone with {} of {} layers landed", s.layers_landed, config_.layout.num_layers));
        }
      }
      s.kv_done = true;
      *finished = Complete(s);  // two-sided: else once the last receive completes
      return Status::Ok();
    case MessageType::kLayerPosted: return InternalError("LayerPosted is handled per connection");
    case MessageType::kAbort:
      if (IsHandshakeRefusal(m.status)) {
        LogHandshakeRefusal(refusal_log_, "kv receiver", m.request_id, m.status, /*by_peer=*/true);
      }
      return m.status.WithContext("sender aborted");
  }
  return InternalError("unreachable");
}

void KvReceiver::OnControlMessage(std::string_view bytes) {
  StatusOr<ControlMessage> m = DecodeControlMessage(bytes);
  if (!m.ok()) {
    ++stats_.bad_messages;
    TANDEM_LOG_DEBUG("kv receiver: dropping malformed control message: {}", m.status().ToString());
    return;
  }
  if (m->type == MessageType::kLayerPosted) {  // keeps its connection in step, whatever the session
    OnLayerPosted(*m);
    return;
  }
  auto it = sessions_.find(m->request_id);
  if (it == sessions_.end() || it->second.epoch != m->epoch) {
    ++stats_.stale_messages;
    return;
  }
  bool finished = false;
  // on_layer may re-enter (e.g. Cancel); look the session up again afterwards.
  Status st = Apply(it->second, *m, &finished);
  if (!st.ok()) {
    End(m->request_id, st, m->type != MessageType::kAbort);
  } else if (finished) {
    End(m->request_id, Status::Ok(), false);
  }
}

void KvReceiver::Landed(Session& s, uint32_t layer) {
  s.layer_state[layer] = 2;
  ++s.layers_landed;
  ++stats_.layers_landed;
  if (s.on_layer) s.on_layer(static_cast<int>(layer));
}

void KvReceiver::Poll() {
  std::vector<TransferEvent> events;
  transport_.Poll(&events);  // one-sided: the receiver posts nothing, so no events of its own
  for (const TransferEvent& e : events) OnReceiveEvent(e);
  Nanos now = clock_.NowNanos();
  if (two_sided_) ExpireStuckReceives(now);
  std::vector<std::pair<RequestId, Status>> expired;
  for (const auto& [id, s] : sessions_) {
    if (now >= s.deadline) {
      expired.emplace_back(id, DeadlineExceededError(fmt::format(
                                   "KV lease expired after {} ms with {} of {} layers landed",
                                   (now - s.opened_at) / 1'000'000, s.layers_landed, config_.layout.num_layers)));
    }
  }
  for (auto& [id, st] : expired) End(id, st, true);
}

}  // namespace tandem::kv_transfer
