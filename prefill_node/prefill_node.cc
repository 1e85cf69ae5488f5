#include "prefill_node/prefill_node.h"

#include "common/base/logging.h"
#include "common/engine/backend_factory.h"
#include "common/node/kv_layer_copy.h"
#include "common/node/node_protocol.h"
#include "common/proto/messages.h"

namespace tandem::prefill_node {

StatusOr<std::unique_ptr<PrefillNode>> PrefillNode::Create(PrefillNodeOptions options) {
  std::unique_ptr<PrefillNode> node(new PrefillNode());
  TANDEM_RETURN_IF_ERROR(node->Init(std::move(options)));
  return node;
}

PrefillNode::~PrefillNode() { Stop(); }

Status PrefillNode::Init(PrefillNodeOptions options) {
  config_ = std::move(options.config);
  if (config_.role.empty()) config_.role = "prefill";
  if (config_.role != "prefill") return InvalidArgumentError("tandem-prefill runs as role prefill, not " + config_.role);
  TANDEM_RETURN_IF_ERROR(config_.Validate());
  std::unique_ptr<runtime::Backend> backend = std::move(options.backend);
  if (!backend) {
    TANDEM_ASSIGN_OR_RETURN(backend, engine::MakeBackend(config_.engine.backend, config_.engine.device));
  }
  TANDEM_ASSIGN_OR_RETURN(engine_, engine::Engine::Create(config_.engine, std::move(backend)));
  TANDEM_RETURN_IF_ERROR(InitTransfer(options));

  engine::ForwardObserver observer;
  observer.on_begin = [this](const scheduler::SchedulerOutput& step) { return OnStepBegin(step); };
  observer.on_layer = [this](int layer) { OnLayer(layer); };
  observer.on_end = [this](const scheduler::SchedulerOutput&, const Status& status) { OnStepEnd(status); };
  engine_->SetForwardObserver(std::move(observer));
  engine_->Start([this](std::vector<engine::EngineOutput>&& outputs) { OnOutputs(std::move(outputs)); });

  node::RoleHooks hooks;
  hooks.role = proto::NODE_ROLE_PREFILL;
  hooks.kv_transport = config_.transport;
  hooks.transport_descriptor = transport_->WorkerAddress();
  hooks.on_request = [this](const std::shared_ptr<net::RpcConnection>& c, net::MessagePtr m, net::Responder r) {
    OnRequest(c, std::move(m), std::move(r));
  };
  hooks.on_message = [this](const std::shared_ptr<net::RpcConnection>& c, net::MessagePtr m) {
    OnPeerMessage(c, std::move(m));
  };
  hooks.on_router_lost = [this] {
    Retries retries;
    {
      std::lock_guard<std::mutex> lock(mu_);
      requests_.ForgetCancels();
      for (auto it = requests_.begin(); it != requests_.end();) {
        auto next = std::next(it);  // the request may erase itself
        HandleLocked(it->first, it->second, {PrefillEventKind::kCancel, UnavailableError("router connection lost")},
                     &retries);
        it = next;
      }
    }
    for (auto& fn : retries) fn();
  };
  hooks.refresh = [this](node::NodeMetrics& m) { Refresh(m); };
  hooks.queued_prefill_tokens = [this] {
    std::lock_guard<std::mutex> lock(mu_);
    int64_t tokens = 0;
    for (const auto& [id, r] : requests_) {
      PrefillState s = r.machine.state();
      if (s == PrefillState::kAccepted || s == PrefillState::kConnected) tokens += r.prompt_len;
    }
    return tokens;
  };
  TANDEM_RETURN_IF_ERROR(host_.Start(config_, engine_.get(), std::move(hooks)));

  net::RpcHandlers peer_handlers;
  peer_handlers.on_message = [this](const std::shared_ptr<net::RpcConnection>& c, net::MessagePtr m) {
    OnPeerMessage(c, std::move(m));
  };
  peer_handlers.on_close = [this](const std::shared_ptr<net::RpcConnection>& c, const Status& why) {
    Retries retries;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto it = requests_.begin(); it != requests_.end();) {
        auto next = std::next(it);
        if (it->second.decode_conn == c) {
          HandleLocked(
              it->first, it->second,
              {PrefillEventKind::kDecodeClosed, UnavailableError("decode connection closed: " + why.ToString())},
              &retries);
        }
        it = next;
      }
    }
    for (auto& fn : retries) fn();
  };
  TANDEM_ASSIGN_OR_RETURN(peers_, net::RpcClient::Create(host_.loop(), config_.ClientConfig(), peer_handlers));
  return Status::Ok();
}

void PrefillNode::Stop() {
  if (stopped_) return;
  stopped_ = true;
  if (peers_) peers_->CloseAll();
  host_.Stop();
  peers_.reset();
  if (engine_) engine_->Stop();
  // The engine thread is gone: wait for the last layer copies into staging.
  if (copy_queue_) {
    StatusOr<std::shared_ptr<runtime::CopyFence>> last = copy_queue_->Mark();
    while (last.ok() && !(*last)->Ready()) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  if (!sender_) return;  // Init failed before the transport existed
  poll_.RunSync([this] {
    outgoing_.clear();
    sender_->CancelAll(CancelledError("prefill node stopping"));
    for (int i = 0; i < 4000 && sender_->num_sessions() > 0; ++i) {
      sender_->Poll();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (sender_->num_sessions() == 0) {
      sender_.reset();
      transport_->UnregisterMemory(source_region_).IgnoreError();
      transport_.reset();
      if (staging_pinned_) engine_->backend().UnpinHostMemory(staging_->base());
      staging_pinned_ = false;
    } else {
      // A hung peer still reads the source: leak rather than free memory under it.
      TANDEM_LOG_ERROR("prefill stop: {} transfer sessions did not drain", sender_->num_sessions());
      sender_.release();
      transport_.release();
      staging_.release();
      if (direct_) engine_.release();  // its KV pool is the source
    }
  });
  poll_.Stop();
}

PrefillNodeStats PrefillNode::Stats() {
  PrefillNodeStats s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    s.requests = static_cast<int64_t>(requests_.size());
    s.bytes_sent = bytes_sent_;
  }
  s.staging_in_use = staging_ ? staging_->num_in_use() : 0;
  s.sessions = sessions_.load();
  return s;
}

bool PrefillNode::Idle() {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_.empty();
}

void PrefillNode::Refresh(node::NodeMetrics& metrics) {
  metrics.Update(engine_->Counters(), sessions_.load(), staging_ ? staging_->num_in_use() : 0);
}

// ---- requests from the router ----

void PrefillNode::OnRequest(const std::shared_ptr<net::RpcConnection>& conn, net::MessagePtr message,
                            net::Responder responder) {
  if (const auto* prefill = proto::MessageAs<proto::PrefillRequest>(*message)) {
    return HandlePrefill(*prefill, std::move(responder));
  }
  if (const auto* target = proto::MessageAs<proto::PrefillTarget>(*message)) {
    return HandlePrefillTarget(*target, std::move(responder));
  }
  std::optional<std::pair<uint64_t, Epoch>> cancel = node::CancelTarget(*message);
  if (!cancel) return responder.Fail(UnimplementedError("prefill node does not serve " + message->GetTypeName()));
  const auto [id, epoch] = *cancel;
  Retries retries;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (Request* r = requests_.OnCancel(id, epoch, Clock::Real().NowNanos())) {
      HandleLocked(id, *r, {PrefillEventKind::kCancel, CancelledError("cancelled by the router")}, &retries);
    }
  }
  node::ReplyAck(responder, id, epoch);
  for (auto& fn : retries) fn();
}

namespace {

// Decode's reservation against a prompt of `prompt_len` tokens: the prompt blocks it needs,
// [*first_block, *first_block + *num_blocks), which must run to the prompt's end.
Status CheckReservation(const proto::ReserveReply& res, int prompt_len, int block_size, int* first_block,
                        int* num_blocks) {
  const int prompt_blocks = (prompt_len + block_size - 1) / block_size;
  if (res.prefix_hit_tokens() < 0 || res.prefix_hit_tokens() % block_size != 0 ||
      res.prefix_hit_tokens() >= prompt_len + block_size) {
    return InvalidArgumentError("reservation.prefix_hit_tokens is not a block multiple within the prompt");
  }
  int64_t needed = 0;
  for (const proto::BlockRun& run : res.needed_runs()) {
    if (run.num_blocks() <= 0 || run.first_block() < 0) return InvalidArgumentError("bad block run");
    needed += run.num_blocks();
  }
  *first_block = res.prefix_hit_tokens() / block_size;
  if (needed == 0 || *first_block + needed != prompt_blocks) {
    return InvalidArgumentError("reservation does not cover the prompt's uncached blocks");
  }
  if (res.transport_descriptor().empty() || res.transport_descriptor().size() > (1u << 16)) {
    return InvalidArgumentError("reservation.transport_descriptor missing or too large");
  }
  *num_blocks = static_cast<int>(needed);
  return Status::Ok();
}

}  // namespace

void PrefillNode::HandlePrefill(const proto::PrefillRequest& prefill, net::Responder responder) {
  if (host_.draining()) return responder.Fail(UnavailableError("draining"));
  const uint64_t id = prefill.request_id();
  const Epoch epoch = prefill.epoch();
  Status valid = node::ValidateRequestHeader(id, epoch, prefill.tenant_salt());
  if (valid.ok()) {
    valid = node::ValidatePrompt(prefill.token_ids(), engine_->model_config().vocab_size, engine_->max_model_len());
  }
  if (!valid.ok()) return responder.Fail(valid);
  const int block_size = engine_->device_kv().layout().block_size;
  const int prompt_len = prefill.token_ids_size();
  // Beside the Reserve the node does not know decode's prefix hit yet: it readies the whole
  // prompt and sends what the PrefillTarget says decode needs.
  int first_block = 0;
  int needed = (prompt_len + block_size - 1) / block_size;
  if (!prefill.reservation_follows()) {
    Status reservation = CheckReservation(prefill.reservation(), prompt_len, block_size, &first_block, &needed);
    if (!reservation.ok()) return responder.Fail(reservation);
  }
  if (prefill.decode_address().empty() || prefill.decode_address().size() > 256) {
    return responder.Fail(InvalidArgumentError("decode_address missing"));
  }
  if (!direct_ && needed > config_.transfer_blocks) {
    return responder.Fail(InvalidArgumentError("prompt needs " + std::to_string(needed) +
                                               " KV blocks, more than transfer_blocks (" +
                                               std::to_string(config_.transfer_blocks) + ")"));
  }
  proto::SamplingParams first_only = prefill.sampling();
  first_only.set_min_tokens(std::min(first_only.min_tokens(), 1));
  StatusOr<runtime::SamplingParams> sampling = node::SamplingFromProto(first_only, 1);
  if (!sampling.ok()) return responder.Fail(sampling.status());
  StatusOr<scheduler::Priority> priority = node::PriorityFromProto(prefill.priority());
  if (!priority.ok()) return responder.Fail(priority.status());
  Retries retries;
  bool admitted = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (static_cast<int>(requests_.size()) >= config_.max_pending_jobs) {
      return responder.Fail(ResourceExhaustedError("prefill queue full"));
    }
    Request* r = nullptr;
    Status refusal;
    switch (requests_.Admit(
        id, epoch, Clock::Real().NowNanos(), [this, prefill, responder] { HandlePrefill(prefill, responder); }, &r,
        &refusal)) {
      case node::RequestTable<Request>::Admission::kRefused: return responder.Fail(refusal);
      case node::RequestTable<Request>::Admission::kSuperseding:
        // The older epoch ends first; the queued retry answers the router then.
        HandleLocked(id, *r,
                     {PrefillEventKind::kCancel, CancelledError("superseded by epoch " + std::to_string(epoch))},
                     &retries);
        break;
      case node::RequestTable<Request>::Admission::kAdmitted: {
        admitted = true;
        if (!prefill.reservation_follows()) r->target = prefill.reservation().transport_descriptor();
        r->first_block = first_block;
        r->num_blocks = needed;
        r->prompt_len = prompt_len;
        r->trace_timing = prefill.trace_timing();
        engine::EngineRequest request =
            node::MakeEngineRequest(id, prefill.token_ids(), prefill.tenant_salt(), *priority, std::move(*sampling));
        request.hold_kv_after_finish = direct_;  // the sender reads the blocks after the step
        // Queued under mu_: a Cancel that finds the request queues its engine Cancel after this.
        engine_->Submit(std::move(request));
        break;
      }
    }
  }
  for (auto& fn : retries) fn();
  if (!admitted) return;
  peers_->AsyncConnect(prefill.decode_address(), [this, id, epoch](StatusOr<std::shared_ptr<net::RpcConnection>> conn) {
    OnConnected(id, epoch, std::move(conn));
  });
  node::ReplyAck(responder, id, epoch);
}

void PrefillNode::HandlePrefillTarget(const proto::PrefillTarget& target, net::Responder responder) {
  const uint64_t id = target.request_id();
  const Epoch epoch = target.epoch();
  Retries retries;
  Status answer;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Request* r = requests_.Find(id, epoch);
    if (r == nullptr) {
      answer = NotFoundError("request " + std::to_string(id) + " epoch " + std::to_string(epoch) +
                             " is not on this node (it failed or was cancelled)");
    } else if (!r->target.empty()) {
      answer = FailedPreconditionError("request " + std::to_string(id) + " already has its reservation");
    } else if (const PrefillState state = r->machine.state();
               state == PrefillState::kFailed || state == PrefillState::kErased) {
      answer = FailedPreconditionError("request " + std::to_string(id) + ": the prefill failed");
    } else {
      int first_block = 0;
      int needed = 0;
      answer = CheckReservation(target.reservation(), r->prompt_len, engine_->device_kv().layout().block_size,
                                &first_block, &needed);
      if (answer.ok()) {
        SetTargetLocked(*r, target.reservation().transport_descriptor(), first_block, needed);
        ConnectedIfReadyLocked(id, *r, &retries);
      } else {
        // Nothing can be sent: the request ends here (the router prefills elsewhere).
        HandleLocked(id, *r, {PrefillEventKind::kCancel, answer}, &retries);
      }
    }
  }
  for (auto& fn : retries) fn();
  if (!answer.ok()) return responder.Fail(answer);
  node::ReplyAck(responder, id, epoch);
}

void PrefillNode::SetTargetLocked(Request& r, std::string target, int first_block, int num_blocks) {
  // A step that began before the reservation readied every prompt block: decode's
  // cached prefix stays here.
  const int drop = std::min<int>(first_block - r.first_block, static_cast<int>(r.source.size()));
  if (drop > 0) {
    const std::vector<BlockId> cached(r.source.begin(), r.source.begin() + drop);
    // Staged: copies still queued into these land before any later copy into them.
    if (!direct_) staging_->Free(cached);
    r.source.erase(r.source.begin(), r.source.begin() + drop);
  }
  r.target = std::move(target);
  r.first_block = first_block;
  r.num_blocks = num_blocks;
}

void PrefillNode::ConnectedIfReadyLocked(uint64_t id, Request& r, Retries* retries) {
  if (r.decode_conn && !r.target.empty()) HandleLocked(id, r, {PrefillEventKind::kConnected, Status::Ok()}, retries);
}

void PrefillNode::OnConnected(uint64_t id, Epoch epoch, StatusOr<std::shared_ptr<net::RpcConnection>> conn) {
  Retries retries;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Request* r = requests_.Find(id, epoch);
    if (r == nullptr) return;
    if (!conn.ok()) {
      HandleLocked(id, *r, {PrefillEventKind::kConnectFailed, conn.status()}, &retries);
    } else {
      r->decode_conn = *conn;
      ConnectedIfReadyLocked(id, *r, &retries);
    }
  }
  for (auto& fn : retries) fn();
}

void PrefillNode::OnPeerMessage(const std::shared_ptr<net::RpcConnection>&, net::MessagePtr message) {
  if (const auto* control = proto::MessageAs<proto::KvControl>(*message)) {
    if (control->payload().size() > (1u << 20)) return;
    poll_.Post([this, payload = control->payload()] { sender_->OnControlMessage(payload); });
  }
}

// ---- the request machine ----

void PrefillNode::Handle(uint64_t id, Epoch epoch, const PrefillEvent& event) {
  Retries retries;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (Request* r = requests_.Find(id, epoch)) HandleLocked(id, *r, event, &retries);
  }
  for (auto& fn : retries) fn();
}

void PrefillNode::HandleLocked(uint64_t id, Request& r, const PrefillEvent& event, Retries* retries) {
  PrefillActions actions = r.machine.Handle(event);
  if (!actions.status.ok() && actions.Has(PrefillAction::kSendKvDone)) {
    TANDEM_LOG_WARN("request {}: prefill handoff failed: {}", id, actions.status.ToString());
  }
  RunLocked(id, r, actions, retries);
}

void PrefillNode::RunLocked(uint64_t id, Request& r, const PrefillActions& actions, Retries* retries) {
  const Epoch epoch = r.epoch;
  for (PrefillAction action : actions.actions) {
    switch (action) {
      case PrefillAction::kOpenSession:
        poll_.Post([this, id, epoch, target = r.target, source = r.source]() mutable {
          OpenSession(id, epoch, std::move(target), std::move(source));
        });
        break;
      case PrefillAction::kCancelSession:
        poll_.Post([this, id, status = actions.status] { sender_->Cancel(id, status); });
        break;
      case PrefillAction::kEngineCancel: engine_->Cancel(id); break;
      case PrefillAction::kReleaseSource:
        // Staged: layer copies still queued into these blocks land before any later
        // copy into them (one in-order copy stream). Either way the sender never
        // reads them again: its queue of layers goes too.
        if (direct_) {
          engine_->ReleaseHeld(id);
        } else {
          staging_->Free(r.source);
        }
        r.source.clear();
        poll_.Post([this, id, epoch] {
          if (auto out = outgoing_.find(id); out != outgoing_.end() && out->second.epoch == epoch) outgoing_.erase(out);
        });
        break;
      case PrefillAction::kSendKvDone: SendKvDone(id, r, actions.status); break;
      case PrefillAction::kErase: {
        Retries waiting = requests_.Erase(id);  // `r` is gone from here on
        retries->insert(retries->end(), std::make_move_iterator(waiting.begin()),
                        std::make_move_iterator(waiting.end()));
        return;
      }
    }
  }
}

void PrefillNode::SendKvDone(uint64_t id, const Request& r, const Status& status) {
  // Never reached decode: its lease ends the reservation. No reservation yet: the router
  // hears of the failure when its PrefillTarget finds the request gone.
  if (!r.decode_conn || r.target.empty()) return;
  proto::KvDone done;
  done.set_request_id(id);
  done.set_epoch(r.epoch);
  done.set_first_token(r.machine.first_token().value_or(0));
  *done.mutable_status() = proto::ToErrorInfo(status);
  const int64_t bytes = static_cast<int64_t>(r.num_blocks) * source_layout_.num_layers *
                        static_cast<int64_t>(source_layout_.BytesPerBlockLayer());
  if (status.ok()) {
    done.set_bytes_sent(bytes);
    bytes_sent_ += static_cast<uint64_t>(bytes);
    host_.metrics().kv_transfer_bytes->Increment(static_cast<double>(bytes));
  }
  done.set_num_prompt_tokens(r.prompt_len);
  if (r.first_token_logprobs) node::LogprobsToProto(*r.first_token_logprobs, done.mutable_first_token_logprobs());
  for (const runtime::SampledLogprobs& p : r.prompt_logprobs) node::LogprobsToProto(p, done.add_prompt_logprobs());
  if (status.ok()) {
    proto::StageTimes* times = done.mutable_stage_times();
    *times = r.stage_times;
    if (r.first_token_at != 0) {
      times->set_kv_transfer_s(static_cast<double>(Clock::Real().NowNanos() - r.first_token_at) * 1e-9);
    }
    node::LogStageTimes(id, r.epoch, *times, r.trace_timing);
  }
  r.decode_conn->Send(done).IgnoreError();
}

// ---- the forward (engine thread) ----

bool PrefillNode::OnStepBegin(const scheduler::SchedulerOutput& step) {
  // Before the forward: prompts finishing in this step get their KV source now.
  copying_.clear();
  Retries retries;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const scheduler::ScheduledSequence& s : step.scheduled) {
      if (!s.needs_logits || !s.is_prefill) continue;
      Request* r = requests_.Find(s.id);
      if (r == nullptr) continue;
      const PrefillState state = r->machine.state();
      if (state != PrefillState::kAccepted && state != PrefillState::kConnected) continue;
      if (static_cast<int>(s.block_table.size()) < r->first_block + r->num_blocks) {
        HandleLocked(s.id, *r, {PrefillEventKind::kStageFailed, InternalError("block table shorter than the prompt")},
                     &retries);
        continue;
      }
      Copying c;
      c.id = s.id;
      c.epoch = r->epoch;
      c.device_blocks.assign(s.block_table.begin() + r->first_block,
                             s.block_table.begin() + r->first_block + r->num_blocks);
      if (direct_) {
        r->source = c.device_blocks;
      } else {
        std::optional<std::vector<BlockId>> staging = staging_->Allocate(r->num_blocks);
        if (!staging) {
          HandleLocked(s.id, *r, {PrefillEventKind::kStageFailed, ResourceExhaustedError("no free staging blocks")},
                       &retries);
          continue;
        }
        r->source = *staging;
        c.staging = *staging;
      }
      HandleLocked(s.id, *r, {PrefillEventKind::kStepBegan, Status::Ok()}, &retries);
      copying_.push_back(std::move(c));
    }
  }
  for (auto& fn : retries) fn();
  return !copying_.empty();
}

void PrefillNode::OnLayer(int layer) {
  // Layer `layer` of this step is issued: mark when it is ready to leave.
  runtime::Backend& backend = engine_->backend();
  Status status;
  if (!direct_) {
    const kv_cache::KvLayout& pool_layout = engine_->device_kv().layout();
    auto* pool = static_cast<std::byte*>(engine_->device_kv().pool().data);
    for (const Copying& c : copying_) {
      status = node::EnqueueLayerToHost(*copy_queue_, backend.device(), {pool, &pool_layout, c.device_blocks},
                                        {staging_->base(), &staging_->layout(), c.staging}, layer);
      if (!status.ok()) break;
    }
  }
  StatusOr<std::shared_ptr<runtime::CopyFence>> fence = !status.ok()
                                                            ? StatusOr<std::shared_ptr<runtime::CopyFence>>(status)
                                                        : direct_ ? backend.MarkCompute()
                                                                  : copy_queue_->Mark();
  for (const Copying& c : copying_) {
    if (!fence.ok()) {
      Handle(c.id, c.epoch, {PrefillEventKind::kStepFailed, fence.status()});
      continue;
    }
    poll_.Post([this, id = c.id, epoch = c.epoch, layer, f = *fence] { OnLayerQueued(id, epoch, layer, f); });
  }
}

void PrefillNode::OnStepEnd(const Status& status) {
  // The forward is issued; later steps must not reuse staged blocks under the copies.
  Status joined = copy_queue_ ? copy_queue_->JoinCompute() : Status::Ok();
  const Status failed = !status.ok() ? status : joined;
  if (!failed.ok()) {
    for (const Copying& c : copying_) Handle(c.id, c.epoch, {PrefillEventKind::kStepFailed, failed});
  }
  copying_.clear();
}

void PrefillNode::OnOutputs(std::vector<engine::EngineOutput>&& outputs) {
  Retries retries;
  {
    std::lock_guard<std::mutex> lock(mu_);
    node::NodeMetrics& m = host_.metrics();
    for (engine::EngineOutput& out : outputs) {
      Request* r = requests_.Find(out.id);
      if (r == nullptr) continue;
      if (!out.tokens.empty()) {
        m.generation_tokens->Increment(1);
        if (!out.logprobs.empty()) r->first_token_logprobs = std::move(out.logprobs.front());
        r->prompt_logprobs = std::move(out.prompt_logprobs);
        r->first_token_at = Clock::Real().NowNanos();
        r->stage_times.set_prefill_queue_s(out.times.queued_seconds);
        r->stage_times.set_prefill_s(out.times.prefill_seconds);
        HandleLocked(out.id, *r, {PrefillEventKind::kFirstToken, Status::Ok(), out.tokens.front()}, &retries);
        r = requests_.Find(out.id);
      }
      if (out.finished) {
        m.ObserveFinished(out);
        if (r == nullptr) continue;
        Status status = out.status;
        using scheduler::FinishReason;
        if (status.ok() && out.finish_reason != FinishReason::kStop && out.finish_reason != FinishReason::kLength) {
          status = InternalError("prefill ended: " + std::string(scheduler::FinishReasonName(out.finish_reason)));
        }
        HandleLocked(out.id, *r, {PrefillEventKind::kEngineFinished, status}, &retries);
      }
    }
  }
  for (auto& fn : retries) fn();
}

}  // namespace tandem::prefill_node
