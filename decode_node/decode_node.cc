#include "decode_node/decode_node.h"

#include <chrono>

#include "common/base/logging.h"
#include "common/engine/backend_factory.h"
#include "common/kv_cache/block_runs.h"
#include "common/node/node_protocol.h"
#include "common/proto/messages.h"

namespace tandem::decode_node {

namespace {

using E = DecodeEventKind;

int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

double SecondsSince(Nanos t) { return static_cast<double>(Clock::Real().NowNanos() - t) * 1e-9; }

// Runs of consecutive ids, in order.
void AppendRuns(const std::vector<BlockId>& ids, proto::ReserveReply* reply) {
  for (const kv_cache::BlockRun& run : kv_cache::BlockRuns(ids)) {
    proto::BlockRun* out = reply->add_needed_runs();
    out->set_first_block(run.first_block);
    out->set_num_blocks(run.num_blocks);
  }
}

}  // namespace

StatusOr<std::unique_ptr<DecodeNode>> DecodeNode::Create(DecodeNodeOptions options) {
  std::unique_ptr<DecodeNode> node(new DecodeNode());
  TANDEM_RETURN_IF_ERROR(node->Init(std::move(options)));
  return node;
}

DecodeNode::~DecodeNode() { Stop(); }

Status DecodeNode::Init(DecodeNodeOptions options) {
  config_ = std::move(options.config);
  if (config_.role.empty()) config_.role = "decode";
  if (config_.role != "decode" && config_.role != "colocated") {
    return InvalidArgumentError("tandem-decode runs as role decode or colocated, not " + config_.role);
  }
  TANDEM_RETURN_IF_ERROR(config_.Validate());
  std::unique_ptr<runtime::Backend> backend = std::move(options.backend);
  if (!backend) {
    TANDEM_ASSIGN_OR_RETURN(backend, engine::MakeBackend(config_.engine.backend, config_.engine.device));
  }
  TANDEM_ASSIGN_OR_RETURN(engine_, engine::Engine::Create(config_.engine, std::move(backend)));
  TANDEM_RETURN_IF_ERROR(InitTransfer(options));
  engine_->Start([this](std::vector<engine::EngineOutput>&& outputs) { OnOutputs(std::move(outputs)); });

  node::RoleHooks hooks;
  hooks.role = config_.role == "colocated" ? proto::NODE_ROLE_COLOCATED : proto::NODE_ROLE_DECODE;
  hooks.kv_transport = config_.transport;
  hooks.transport_descriptor = transport_->WorkerAddress();
  hooks.on_request = [this](const std::shared_ptr<net::RpcConnection>& c, net::MessagePtr m, net::Responder r) {
    OnRequest(c, std::move(m), std::move(r));
  };
  hooks.on_message = [this](const std::shared_ptr<net::RpcConnection>& c, net::MessagePtr m) {
    OnMessage(c, std::move(m));
  };
  hooks.on_router_lost = [this] { OnRouterLost(); };
  hooks.on_peer_close = [this](const std::shared_ptr<net::RpcConnection>& conn) { OnPeerClosed(conn); };
  hooks.refresh = [this](node::NodeMetrics& m) { Refresh(m); };
  return host_.Start(config_, engine_.get(), std::move(hooks));
}

void DecodeNode::Stop() {
  if (stopped_) return;
  stopped_ = true;
  host_.Stop();
  if (engine_) engine_->Stop();
  poll_.RunSync([this] {
    receiver_.reset();  // ends open sessions (Cancelled), unregisters the landing memory
    transport_.reset();
    // Uploads still queued read the landing arena: wait for them.
    for (auto& [id, upload] : uploads_) {
      for (auto& fence : upload.fences) {
        while (!fence->Ready()) std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
    }
    uploads_.clear();
    upload_queue_.reset();
  });
  poll_.Stop();
  if (landing_pinned_) engine_->backend().UnpinHostMemory(landing_->base());
  landing_pinned_ = false;
}

DecodeNodeStats DecodeNode::Stats() {
  DecodeNodeStats s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    s.requests = static_cast<int64_t>(requests_.size());
    s.bytes_landed = bytes_landed_;
  }
  s.landing_in_use = landing_ ? landing_->num_in_use() : 0;
  s.sessions = sessions_.load();
  return s;
}

bool DecodeNode::Idle() {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_.empty();
}

void DecodeNode::Refresh(node::NodeMetrics& metrics) {
  metrics.Update(engine_->Counters(), sessions_.load(), landing_ ? landing_->num_in_use() : 0);
}

// ---- requests from the router and prefill nodes ----

void DecodeNode::OnRequest(const std::shared_ptr<net::RpcConnection>& conn, net::MessagePtr message,
                           net::Responder responder) {
  if (const auto* reserve = proto::MessageAs<proto::ReserveRequest>(*message)) {
    return HandleReserve(*reserve, std::move(responder));
  }
  if (const auto* prefill = proto::MessageAs<proto::PrefillRequest>(*message)) {
    return HandleLocalPrefill(*prefill, std::move(responder));
  }
  std::optional<std::pair<uint64_t, Epoch>> cancel = node::CancelTarget(*message);
  if (!cancel) return responder.Fail(UnimplementedError("decode node does not serve " + message->GetTypeName()));
  const auto [id, epoch] = *cancel;
  Retries retries;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (Request* r = requests_.OnCancel(id, epoch, Clock::Real().NowNanos())) {
      // The engine's finish record (cancelled) becomes the ABORT entry.
      HandleLocked(id, *r, {E::kCancel, CancelledError("cancelled by the router")}, &retries);
    }
  }
  node::ReplyAck(responder, id, epoch);
  for (auto& fn : retries) fn();
}

void DecodeNode::OnMessage(const std::shared_ptr<net::RpcConnection>& conn, net::MessagePtr message) {
  if (const auto* control = proto::MessageAs<proto::KvControl>(*message)) {
    HandleKvControl(conn, *control);
  } else if (const auto* done = proto::MessageAs<proto::KvDone>(*message)) {
    HandleKvDone(*done);
  }
}

void DecodeNode::HandleReserve(const proto::ReserveRequest& reserve, net::Responder responder) {
  if (host_.draining()) {
    host_.metrics().reservations_refused->Increment();  // the router placed it before it heard of the drain
    return responder.Fail(UnavailableError("draining"));
  }
  const uint64_t id = reserve.request_id();
  const Epoch epoch = reserve.epoch();
  Status valid = node::ValidateRequestHeader(id, epoch, reserve.tenant_salt());
  if (valid.ok() && reserve.prompt_len() != reserve.token_ids_size()) {
    valid = InvalidArgumentError("prompt_len does not match token_ids");
  }
  if (valid.ok()) {
    valid = node::ValidatePrompt(reserve.token_ids(), engine_->model_config().vocab_size, engine_->max_model_len());
  }
  if (!valid.ok()) return responder.Fail(valid);
  StatusOr<runtime::SamplingParams> sampling = node::SamplingFromProto(reserve.sampling(), reserve.max_tokens());
  if (!sampling.ok()) return responder.Fail(sampling.status());
  StatusOr<scheduler::Priority> priority = node::PriorityFromProto(reserve.priority());
  if (!priority.ok()) return responder.Fail(priority.status());
  Retries retries;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Request* r = nullptr;
    Status refusal;
    switch (requests_.Admit(
        id, epoch, Clock::Real().NowNanos(), [this, reserve, responder] { HandleReserve(reserve, responder); }, &r,
        &refusal)) {
      case node::RequestTable<Request>::Admission::kRefused: return responder.Fail(refusal);
      case node::RequestTable<Request>::Admission::kSuperseding:
        HandleLocked(id, *r, {E::kSuperseded, CancelledError("superseded by epoch " + std::to_string(epoch))},
                     &retries);
        break;
      case node::RequestTable<Request>::Admission::kAdmitted: {
        r->machine = DecodeHandoff::Remote();
        r->responder = responder;
        r->trace_timing = reserve.trace_timing();
        uint32_t lease_ms = reserve.lease_ms() > 0 ? reserve.lease_ms() : static_cast<uint32_t>(config_.lease_ms);
        r->lease_ms = std::min<uint32_t>(lease_ms, 10 * 60 * 1000);
        // Queued under mu_: a Cancel that finds the record queues its engine Cancel after this.
        engine_->Reserve(
            node::MakeEngineRequest(id, reserve.token_ids(), reserve.tenant_salt(), *priority, std::move(*sampling)),
            r->lease_ms, [this, id, epoch](StatusOr<scheduler::Reservation> reservation) {
              OnReserved(id, epoch, std::move(reservation));
            });
        break;
      }
    }
  }
  for (auto& fn : retries) fn();
}

void DecodeNode::OnReserved(uint64_t id, Epoch epoch, StatusOr<scheduler::Reservation> reservation) {
  // Engine thread.
  node::NodeMetrics& m = host_.metrics();
  (reservation.ok() ? m.reservations_granted : m.reservations_refused)->Increment();
  Retries retries;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Request* r = requests_.Find(id, epoch);
    if (r == nullptr) {
      if (reservation.ok()) engine_->Cancel(id);  // nobody waits for it
      return;
    }
    if (!reservation.ok()) {
      HandleLocked(id, *r, {E::kReserveFailed, reservation.status()}, &retries);
    } else {
      r->device_blocks.assign(reservation->block_table.begin() + reservation->first_block_to_fill,
                              reservation->block_table.end());
      r->reply.set_request_id(id);
      r->reply.set_epoch(epoch);
      r->reply.set_prefix_hit_tokens(reservation->first_block_to_fill * engine_->device_kv().layout().block_size);
      r->reply.set_lease_deadline_ms(WallMs() + r->lease_ms);
      r->reply.set_decode_node_id(host_.node_id());
      r->reserved_at = Clock::Real().NowNanos();
      // Whole prompt cached: the router releases it and prefills here instead.
      HandleLocked(id, *r, {r->device_blocks.empty() ? E::kReservedCached : E::kReserved, Status::Ok()}, &retries);
    }
  }
  for (auto& fn : retries) fn();
}

void DecodeNode::HandleLocalPrefill(const proto::PrefillRequest& prefill, net::Responder responder) {
  if (host_.draining()) return responder.Fail(UnavailableError("draining"));
  const uint64_t id = prefill.request_id();
  const Epoch epoch = prefill.epoch();
  Status valid = node::ValidateRequestHeader(id, epoch, prefill.tenant_salt());
  if (valid.ok() && prefill.has_reservation() && prefill.reservation().needed_runs_size() > 0) {
    valid = InvalidArgumentError("a decode node prefills locally only (empty reservation)");
  }
  if (valid.ok()) {
    valid = node::ValidatePrompt(prefill.token_ids(), engine_->model_config().vocab_size, engine_->max_model_len());
  }
  if (!valid.ok()) return responder.Fail(valid);
  StatusOr<runtime::SamplingParams> sampling = node::SamplingFromProto(prefill.sampling(), 0);
  if (!sampling.ok()) return responder.Fail(sampling.status());
  StatusOr<scheduler::Priority> priority = node::PriorityFromProto(prefill.priority());
  if (!priority.ok()) return responder.Fail(priority.status());
  Retries retries;
  bool admitted = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Request* r = nullptr;
    Status refusal;
    switch (requests_.Admit(
        id, epoch, Clock::Real().NowNanos(), [this, prefill, responder] { HandleLocalPrefill(prefill, responder); }, &r,
        &refusal)) {
      case node::RequestTable<Request>::Admission::kRefused: return responder.Fail(refusal);
      case node::RequestTable<Request>::Admission::kSuperseding:
        HandleLocked(id, *r, {E::kSuperseded, CancelledError("superseded by epoch " + std::to_string(epoch))},
                     &retries);
        break;
      case node::RequestTable<Request>::Admission::kAdmitted:
        admitted = true;
        r->machine = DecodeHandoff::Local();
        r->trace_timing = prefill.trace_timing();
        // Queued under mu_: a Cancel that finds the record queues its engine Cancel after this.
        engine_->Submit(
            node::MakeEngineRequest(id, prefill.token_ids(), prefill.tenant_salt(), *priority, std::move(*sampling)));
        break;
    }
  }
  for (auto& fn : retries) fn();
  if (admitted) node::ReplyAck(responder, id, epoch);
}

void DecodeNode::HandleKvDone(const proto::KvDone& done) {
  const uint64_t id = done.request_id();
  Status status = proto::FromErrorInfo(done.status());
  if (status.ok() && (done.first_token() < 0 || done.first_token() >= engine_->model_config().vocab_size)) {
    status = InvalidArgumentError("first_token out of range");
  }
  Retries retries;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Request* r = requests_.Find(id, done.epoch());
    if (r == nullptr) return;
    if (status.ok()) {
      r->first_token = done.first_token();
      r->first_token_logprobs = node::LogprobsFromProto(done.first_token_logprobs());
      r->prompt_logprobs.clear();
      for (const proto::TokenLogprobs& p : done.prompt_logprobs()) r->prompt_logprobs.push_back(node::LogprobsFromProto(p));
      r->prefill_times = done.stage_times();
      r->bytes = done.bytes_sent();
    }
    HandleLocked(id, *r, {status.ok() ? E::kKvDone : E::kKvDoneFailed, status}, &retries);
  }
  for (auto& fn : retries) fn();
}

void DecodeNode::HandleKvControl(const std::shared_ptr<net::RpcConnection>& conn, const proto::KvControl& control) {
  if (control.payload().size() > (1u << 20)) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Request* r = requests_.Find(control.request_id(), control.epoch());
    if (r == nullptr) return;
    r->peer = conn;
  }
  poll_.Post([this, payload = control.payload()] { receiver_->OnControlMessage(payload); });
}

void DecodeNode::OnPeerClosed(const std::shared_ptr<net::RpcConnection>& conn) {
  // A prefill node went away: its unfinished handoffs fail now instead of at lease expiry.
  Retries retries;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = requests_.begin(); it != requests_.end();) {
      auto next = std::next(it);  // the request may erase itself
      if (it->second.peer.lock() == conn) {
        HandleLocked(it->first, it->second, {E::kPeerClosed, UnavailableError("prefill connection closed")}, &retries);
      }
      it = next;
    }
  }
  for (auto& fn : retries) fn();
}

void DecodeNode::OnRouterLost() {
  Retries retries;
  {
    std::lock_guard<std::mutex> lock(mu_);
    requests_.ForgetCancels();
    for (auto it = requests_.begin(); it != requests_.end();) {
      auto next = std::next(it);
      HandleLocked(it->first, it->second, {E::kCancel, UnavailableError("router connection lost")}, &retries);
      it = next;
    }
  }
  for (auto& fn : retries) fn();
}

void DecodeNode::OnOutputs(std::vector<engine::EngineOutput>&& outputs) {
  proto::Tokens tokens;
  Retries retries;
  {
    std::lock_guard<std::mutex> lock(mu_);
    tokens.set_step(++step_);
    tokens.set_node_id(host_.node_id());
    for (const engine::EngineOutput& out : outputs) {
      Request* r = requests_.Find(out.id);
      if (r == nullptr) continue;
      HandleLocked(out.id, *r, {out.finished ? E::kEngineFinished : E::kEngineOutput, out.status}, &retries,
                   {&out, &tokens});
    }
  }
  if (tokens.entries_size() > 0) host_.SendToRouter(tokens).IgnoreError();
  for (auto& fn : retries) fn();  // newer epochs of ended requests
}

// ---- the request machine ----

void DecodeNode::Handle(uint64_t id, Epoch epoch, const DecodeEvent& event) {
  Retries retries;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (Request* r = requests_.Find(id, epoch)) HandleLocked(id, *r, event, &retries);
  }
  for (auto& fn : retries) fn();
}

void DecodeNode::HandleLocked(uint64_t id, Request& r, const DecodeEvent& event, Retries* retries, OutputSink sink) {
  RunLocked(id, r, r.machine.Handle(event), retries, sink);
}

void DecodeNode::RunLocked(uint64_t id, Request& r, const DecodeActions& actions, Retries* retries, OutputSink sink) {
  const Epoch epoch = r.epoch;
  for (DecodeAction action : actions.actions) {
    switch (action) {
      case DecodeAction::kOpenSession: OpenSessionLocked(id, r, retries); break;
      case DecodeAction::kReplyReserved:
        if (r.responder) r.responder->Reply(r.reply);
        r.responder.reset();
        break;
      case DecodeAction::kReplyError:
        if (r.responder) r.responder->Fail(actions.status);
        r.responder.reset();
        break;
      case DecodeAction::kEngineCancel: engine_->Cancel(id); break;
      case DecodeAction::kCancelSession:
        poll_.Post([this, id, epoch, status = actions.status] {
          receiver_->Cancel(id, status);
          // Uploads already queued finish on their own; the landing blocks are quarantined.
          if (auto u = uploads_.find(id); u != uploads_.end() && u->second.epoch == epoch) uploads_.erase(u);
        });
        break;
      case DecodeAction::kReleaseLanding:
        // Device blocks of a reservation that ends here are quarantined by the scheduler.
        if (!r.landing.empty()) landing_->Quarantine(r.landing, config_.late_write_grace_ms);
        r.landing.clear();
        break;
      case DecodeAction::kCompleteReservation: CompleteReservationLocked(id, r); break;
      case DecodeAction::kSendError:
        TANDEM_LOG_WARN("request {}: KV handoff failed: {}", id, actions.status.ToString());
        SendError(id, epoch, actions.status);
        break;
      case DecodeAction::kForwardOutput:
        if (sink.output != nullptr) ForwardLocked(r, *sink.output, sink.tokens);
        break;
      case DecodeAction::kErase: {
        Retries waiting = requests_.Erase(id);  // `r` is gone from here on
        retries->insert(retries->end(), std::make_move_iterator(waiting.begin()),
                        std::make_move_iterator(waiting.end()));
        return;
      }
    }
  }
}

void DecodeNode::OpenSessionLocked(uint64_t id, Request& r, Retries* retries) {
  std::vector<BlockId> target = r.device_blocks;
  if (!direct_) {
    std::optional<std::vector<BlockId>> landing = landing_->Allocate(static_cast<int>(r.device_blocks.size()));
    if (!landing) {
      return HandleLocked(id, r, {E::kOpenFailed, ResourceExhaustedError("no free landing blocks")}, retries);
    }
    r.landing = *landing;
    target = *landing;
  }
  AppendRuns(target, &r.reply);
  poll_.Post(
      [this, id, epoch = r.epoch, target = std::move(target), device = r.device_blocks,
       lease_ms = r.lease_ms]() mutable { OpenReceiver(id, epoch, std::move(target), std::move(device), lease_ms); });
}

void DecodeNode::CompleteReservationLocked(uint64_t id, Request& r) {
  // Staged: every layer is uploaded (KvLanded waits for the uploads), so the landing blocks are free.
  if (!r.landing.empty()) landing_->Free(r.landing);
  r.landing.clear();
  node::NodeMetrics& m = host_.metrics();
  if (r.reserved_at != 0) m.kv_handoff_wait->Observe(SecondsSince(r.reserved_at));
  m.kv_transfer_bytes->Increment(static_cast<double>(r.bytes));
  bytes_landed_ += static_cast<uint64_t>(r.bytes);
  engine_->CompleteReservation(id, r.first_token, std::move(r.first_token_logprobs), std::move(r.prompt_logprobs));
}

void DecodeNode::ForwardLocked(const Request& r, const engine::EngineOutput& out, proto::Tokens* tokens) {
  node::NodeMetrics& m = host_.metrics();
  m.generation_tokens->Increment(static_cast<double>(out.tokens.size()));
  proto::TokenEntry* entry = tokens->add_entries();
  entry->set_request_id(out.id);
  entry->set_epoch(r.epoch);
  entry->mutable_token_ids()->Add(out.tokens.begin(), out.tokens.end());
  for (const runtime::SampledLogprobs& logprobs : out.logprobs) node::LogprobsToProto(logprobs, entry->add_logprobs());
  for (const runtime::SampledLogprobs& p : out.prompt_logprobs) node::LogprobsToProto(p, entry->add_prompt_logprobs());
  // The first token's entry reports the prompt's cache hits early: a router that ends
  // the request itself (a stop string) never sees the final entry.
  if (!out.finished && out.num_cached_tokens > 0) entry->set_num_cached_tokens(out.num_cached_tokens);
  // The first token's entry (the engine adds its times to it) carries every node stage so far.
  if (!out.finished && !out.tokens.empty() && out.times.first_token) {
    proto::StageTimes* times = entry->mutable_stage_times();
    if (out.times.remote_first_token) {
      *times = r.prefill_times;
      times->set_decode_queue_s(out.times.queued_seconds);
      times->set_kv_wait_s(out.times.prefill_seconds);
    } else {
      times->set_prefill_queue_s(out.times.queued_seconds);
      times->set_prefill_s(out.times.prefill_seconds);
    }
    node::LogStageTimes(out.id, r.epoch, *times, r.trace_timing);
  }
  if (!out.finished) return;
  proto::FinishReason reason = node::FinishReasonToProto(out.finish_reason);
  entry->set_finish_reason(reason);
  if (reason == proto::FINISH_REASON_ERROR) {
    Status status =
        out.status.ok() ? InternalError(std::string(scheduler::FinishReasonName(out.finish_reason))) : out.status;
    if (out.finish_reason == scheduler::FinishReason::kLeaseExpired) {
      status = DeadlineExceededError("reservation lease expired");
      m.reservations_expired->Increment();
    }
    *entry->mutable_error() = proto::ToErrorInfo(status);
  }
  entry->set_num_cached_tokens(out.num_cached_tokens);
  m.ObserveFinished(out);
}

void DecodeNode::SendError(uint64_t id, Epoch epoch, const Status& status) {
  proto::Tokens tokens;
  tokens.set_node_id(host_.node_id());
  proto::TokenEntry* entry = tokens.add_entries();
  entry->set_request_id(id);
  entry->set_epoch(epoch);
  entry->set_finish_reason(proto::FINISH_REASON_ERROR);
  *entry->mutable_error() = proto::ToErrorInfo(status);
  host_.SendToRouter(tokens).IgnoreError();
}

}  // namespace tandem::decode_node
