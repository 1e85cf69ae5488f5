#include "decode_node/decode_node.h"

#include <chrono>

#include "common/base/logging.h"
#include "common/engine/backend_factory.h"
#include "common/node/node_protocol.h"
#include "common/proto/messages.h"
#include "kv_transfer/transport_factory.h"

namespace tandem::decode_node {

namespace {

int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Runs of consecutive ids, in order.
void AppendRuns(const std::vector<BlockId>& ids, proto::ReserveReply* reply) {
  for (size_t i = 0; i < ids.size();) {
    size_t j = i + 1;
    while (j < ids.size() && ids[j] == ids[j - 1] + 1) ++j;
    proto::BlockRun* run = reply->add_needed_runs();
    run->set_first_block(ids[i]);
    run->set_num_blocks(static_cast<int32_t>(j - i));
    i = j;
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
  config_.role = "decode";
  TANDEM_RETURN_IF_ERROR(config_.Validate());
  std::unique_ptr<runtime::Backend> backend = std::move(options.backend);
  if (!backend) {
    TANDEM_ASSIGN_OR_RETURN(backend, engine::MakeBackend(config_.engine.backend, config_.engine.device));
  }
  TANDEM_ASSIGN_OR_RETURN(engine_, engine::Engine::Create(config_.engine, std::move(backend)));
  kv_cache::KvLayout layout = engine_->device_kv().layout();
  layout.num_blocks = config_.transfer_blocks;
  landing_ = std::make_unique<node::HostBlockArena>(layout);

  TANDEM_ASSIGN_OR_RETURN(transport_, options.make_transport ? options.make_transport()
                                                              : kv_transfer::MakeTransport(config_.transport, config_.ucx_transports));
  kv_transfer::KvReceiverConfig rc;
  rc.model_id = config_.engine.model_name;
  rc.layout = layout;
  rc.default_lease_ms = static_cast<uint32_t>(config_.lease_ms);
  TANDEM_RETURN_IF_ERROR(rc.Validate());
  receiver_ = std::make_unique<kv_transfer::KvReceiver>(
      rc, *transport_, Clock::Real(), [this](RequestId id, std::string bytes) {
        std::shared_ptr<net::RpcConnection> peer;
        proto::KvControl control;
        {
          std::lock_guard<std::mutex> lock(mu_);
          auto it = requests_.find(id);
          if (it == requests_.end()) return;
          peer = it->second.peer.lock();
          control.set_epoch(it->second.epoch);
        }
        if (!peer) return;  // the sender never spoke; its lease/drain ends it
        control.set_request_id(id);
        control.set_payload(std::move(bytes));
        peer->Send(control).IgnoreError();
      });
  TANDEM_RETURN_IF_ERROR(receiver_->RegisterLanding(landing_->base(), kv_transfer::MemoryKind::kHost));
  std::string descriptor = transport_->WorkerAddress();
  std::string backend_name = transport_->Capabilities().backend;
  poll_.Start(
      [this] {
        if (!receiver_) return;  // stopped
        receiver_->Poll();
        sessions_.store(static_cast<int64_t>(receiver_->num_sessions()));
      },
      [this] { return receiver_ && receiver_->num_sessions() > 0; });

  engine_->Start([this](std::vector<engine::EngineOutput>&& outputs) { OnOutputs(std::move(outputs)); });

  node::RoleHooks hooks;
  hooks.role = proto::NODE_ROLE_DECODE;
  hooks.kv_transport = config_.transport;
  hooks.transport_descriptor = descriptor;
  hooks.on_request = [this](const std::shared_ptr<net::RpcConnection>& c, net::MessagePtr m, net::Responder r) {
    OnRequest(c, std::move(m), std::move(r));
  };
  hooks.on_message = [this](const std::shared_ptr<net::RpcConnection>& c, net::MessagePtr m) {
    OnMessage(c, std::move(m));
  };
  hooks.on_router_lost = [this] { OnRouterLost(); };
  hooks.on_peer_close = [this](const std::shared_ptr<net::RpcConnection>& conn) {
    // A prefill node went away: its unfinished handoffs fail now instead of at lease expiry.
    std::vector<std::pair<uint64_t, Epoch>> broken;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& [id, r] : requests_) {
        if (r.remote && !r.completing && !r.ended && r.peer.lock() == conn) broken.emplace_back(id, r.epoch);
      }
    }
    for (auto [id, epoch] : broken) Fail(id, epoch, UnavailableError("prefill connection closed"));
  };
  hooks.refresh = [this](node::NodeMetrics& m) { Refresh(m); };
  TANDEM_LOG_INFO("decode node: transport {}", backend_name);
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
  });
  poll_.Stop();
}

DecodeNodeStats DecodeNode::Stats() {
  DecodeNodeStats s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    s.requests = static_cast<int64_t>(requests_.size());
    s.bytes_landed = bytes_landed_;
  }
  s.landing_in_use = landing_->num_in_use();
  s.sessions = sessions_.load();
  return s;
}

bool DecodeNode::Idle() {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_.empty();
}

void DecodeNode::Refresh(node::NodeMetrics& metrics) {
  metrics.Update(engine_->Counters(), sessions_.load(), landing_->num_in_use());
}

void DecodeNode::OnRequest(const std::shared_ptr<net::RpcConnection>& conn, net::MessagePtr message,
                           net::Responder responder) {
  if (const auto* reserve = proto::MessageAs<proto::ReserveRequest>(*message)) {
    HandleReserve(*reserve, std::move(responder));
  } else if (const auto* prefill = proto::MessageAs<proto::PrefillRequest>(*message)) {
    HandleLocalPrefill(*prefill, std::move(responder));
  } else if (const auto* cancel = proto::MessageAs<proto::Cancel>(*message)) {
    HandleCancel(cancel->request_id(), cancel->epoch());
    proto::Ack ack;
    ack.set_request_id(cancel->request_id());
    ack.set_epoch(cancel->epoch());
    responder.Reply(ack);
  } else if (const auto* release = proto::MessageAs<proto::Release>(*message)) {
    HandleCancel(release->request_id(), release->epoch());
    proto::Ack ack;
    ack.set_request_id(release->request_id());
    ack.set_epoch(release->epoch());
    responder.Reply(ack);
  } else {
    responder.Fail(UnimplementedError("decode node does not serve " + message->GetTypeName()));
  }
}

void DecodeNode::OnMessage(const std::shared_ptr<net::RpcConnection>& conn, net::MessagePtr message) {
  if (const auto* control = proto::MessageAs<proto::KvControl>(*message)) {
    HandleKvControl(conn, *control);
  } else if (const auto* done = proto::MessageAs<proto::KvDone>(*message)) {
    HandleKvDone(*done);
  }
}

void DecodeNode::HandleReserve(const proto::ReserveRequest& reserve, net::Responder responder) {
  if (host_.draining()) return responder.Fail(UnavailableError("draining"));
  if (reserve.request_id() == 0) return responder.Fail(InvalidArgumentError("request_id must be set"));
  if (reserve.epoch() == 0) return responder.Fail(InvalidArgumentError("epoch must be >= 1"));
  if (reserve.prompt_len() != reserve.token_ids_size()) {
    return responder.Fail(InvalidArgumentError("prompt_len does not match token_ids"));
  }
  Status valid = node::ValidatePrompt(reserve.token_ids(), engine_->model_config().vocab_size,
                                      engine_->max_model_len());
  if (!valid.ok()) return responder.Fail(valid);
  if (reserve.tenant_salt().size() > 1024) return responder.Fail(InvalidArgumentError("tenant_salt too long"));
  StatusOr<runtime::SamplingParams> sampling = node::SamplingFromProto(reserve.sampling(), reserve.max_tokens());
  if (!sampling.ok()) return responder.Fail(sampling.status());
  const uint64_t id = reserve.request_id();
  const Epoch epoch = reserve.epoch();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (RefuseBuriedLocked(id, epoch, responder)) return;
    if (SupersedeLocked(id, epoch, [this, reserve, responder] { HandleReserve(reserve, responder); }, responder)) {
      return;
    }
    Request& r = requests_[id];
    r.epoch = epoch;
    r.remote = true;
    r.reserved_at = Clock::Real().NowNanos();
    uint32_t lease_ms = reserve.lease_ms() > 0 ? reserve.lease_ms() : static_cast<uint32_t>(config_.lease_ms);
    lease_ms = std::min<uint32_t>(lease_ms, 10 * 60 * 1000);
    // Queued under mu_, as in HandleLocalPrefill.
    engine_->Reserve(node::MakeEngineRequest(id, reserve.token_ids(), reserve.tenant_salt(), std::move(*sampling)),
                     lease_ms, [this, id, epoch, lease_ms, responder](StatusOr<scheduler::Reservation> r) {
                       OnReserved(id, epoch, lease_ms, std::move(r), responder);
                     });
  }
}

void DecodeNode::OnReserved(uint64_t id, Epoch epoch, uint32_t lease_ms,
                            StatusOr<scheduler::Reservation> reservation, net::Responder responder) {
  // Engine thread.
  node::NodeMetrics& m = host_.metrics();
  if (!reservation.ok()) {
    std::vector<std::function<void()>> then;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = requests_.find(id);
      if (it != requests_.end()) {
        then.swap(it->second.then);
        requests_.erase(it);  // the engine forgot it: no finish output follows
      }
    }
    for (auto& fn : then) fn();
    m.serving.kv_reservations->WithLabels({"refused"}).Increment();
    return responder.Fail(reservation.status());
  }
  m.serving.kv_reservations->WithLabels({"granted"}).Increment();
  const int block_size = engine_->device_kv().layout().block_size;
  std::vector<BlockId> needed(reservation->block_table.begin() + reservation->first_block_to_fill,
                              reservation->block_table.end());
  proto::ReserveReply reply;
  reply.set_request_id(id);
  reply.set_epoch(epoch);
  reply.set_prefix_hit_tokens(reservation->first_block_to_fill * block_size);
  reply.set_lease_deadline_ms(WallMs() + lease_ms);
  reply.set_decode_node_id(host_.node_id());
  std::lock_guard<std::mutex> lock(mu_);
  auto it = requests_.find(id);
  if (it == requests_.end() || it->second.cancelled) {
    // Cancelled while reserving: the engine Cancel queued behind Reserve ends it.
    engine_->Cancel(id);
    return responder.Fail(CancelledError("cancelled"));
  }
  Request& r = it->second;
  if (needed.empty()) return responder.Reply(reply);  // whole prompt cached: the router releases it
  std::optional<std::vector<BlockId>> landing = landing_->Allocate(static_cast<int>(needed.size()));
  if (!landing) {
    r.ended = true;  // the Error reply is the outcome; the engine's finish record is swallowed
    engine_->Cancel(id);
    return responder.Fail(ResourceExhaustedError("no free landing blocks"));
  }
  r.device_blocks = std::move(needed);
  r.landing = *landing;
  poll_.Post([this, id, epoch, lease_ms, landing = *landing, reply = std::move(reply), responder]() mutable {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = requests_.find(id);
      if (it == requests_.end() || it->second.cancelled || it->second.ended) {
        return responder.Fail(CancelledError("cancelled"));
      }
    }
    kv_transfer::ReceiveParams params;
    params.request_id = id;
    params.epoch = epoch;
    params.blocks = landing;
    params.lease_ms = lease_ms;
    params.on_done = [this, id, epoch](const Status& status) { OnSessionDone(id, epoch, status); };
    StatusOr<std::string> target = receiver_->Open(std::move(params));
    sessions_.store(static_cast<int64_t>(receiver_->num_sessions()));
    if (!target.ok()) {
      // The Error reply is the outcome: no Tokens entry for a reservation never granted.
      std::lock_guard<std::mutex> lock(mu_);
      auto it = requests_.find(id);
      if (it != requests_.end() && !it->second.ended) {
        it->second.ended = true;
        AbandonLocked(id, it->second, target.status());
      }
      return responder.Fail(target.status());
    }
    AppendRuns(landing, &reply);
    reply.set_transport_descriptor(std::move(*target));
    responder.Reply(reply);
  });
}

void DecodeNode::HandleLocalPrefill(const proto::PrefillRequest& prefill, net::Responder responder) {
  if (host_.draining()) return responder.Fail(UnavailableError("draining"));
  if (prefill.request_id() == 0) return responder.Fail(InvalidArgumentError("request_id must be set"));
  if (prefill.epoch() == 0) return responder.Fail(InvalidArgumentError("epoch must be >= 1"));
  if (prefill.has_reservation() && prefill.reservation().needed_runs_size() > 0) {
    return responder.Fail(InvalidArgumentError("a decode node prefills locally only (empty reservation)"));
  }
  Status valid = node::ValidatePrompt(prefill.token_ids(), engine_->model_config().vocab_size,
                                      engine_->max_model_len());
  if (!valid.ok()) return responder.Fail(valid);
  if (prefill.tenant_salt().size() > 1024) return responder.Fail(InvalidArgumentError("tenant_salt too long"));
  StatusOr<runtime::SamplingParams> sampling = node::SamplingFromProto(prefill.sampling(), 0);
  if (!sampling.ok()) return responder.Fail(sampling.status());
  const uint64_t id = prefill.request_id();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (RefuseBuriedLocked(id, prefill.epoch(), responder)) return;
    if (SupersedeLocked(id, prefill.epoch(), [this, prefill, responder] { HandleLocalPrefill(prefill, responder); },
                        responder)) {
      return;
    }
    requests_[id].epoch = prefill.epoch();
    requests_[id].decode_started_at = Clock::Real().NowNanos();
    // Queued under mu_: a Cancel that finds the record queues its engine Cancel after this.
    engine_->Submit(node::MakeEngineRequest(id, prefill.token_ids(), prefill.tenant_salt(), std::move(*sampling)));
  }
  proto::Ack ack;
  ack.set_request_id(id);
  ack.set_epoch(prefill.epoch());
  responder.Reply(ack);
}

void DecodeNode::AbandonLocked(uint64_t id, Request& r, const Status& reason) {
  r.cancelled = true;
  engine_->Cancel(id);
  if (!r.landing.empty()) {
    landing_->Quarantine(r.landing, config_.late_write_grace_ms);
    r.landing.clear();
  }
  if (r.remote) poll_.Post([this, id, reason] { receiver_->Cancel(id, reason); });
}

void DecodeNode::HandleCancel(uint64_t id, Epoch epoch) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = requests_.find(id);
  if (epoch != 0 && (it == requests_.end() || it->second.epoch < epoch)) {
    tombstones_.Bury(id, epoch, Clock::Real().NowNanos());  // its request may still come
  }
  if (it == requests_.end() || (epoch != 0 && it->second.epoch != epoch)) return;
  // The engine's finish record (cancelled) becomes the ABORT entry.
  AbandonLocked(id, it->second, CancelledError("cancelled by the router"));
}

void DecodeNode::OnRouterLost() {
  std::lock_guard<std::mutex> lock(mu_);
  tombstones_.Clear();  // the next router numbers its requests afresh
  for (auto& [id, r] : requests_) {
    if (!r.cancelled) AbandonLocked(id, r, UnavailableError("router connection lost"));
  }
}

void DecodeNode::Fail(uint64_t id, Epoch epoch, const Status& status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = requests_.find(id);
    if (it == requests_.end() || it->second.epoch != epoch || it->second.ended) return;
    it->second.ended = true;
    AbandonLocked(id, it->second, status);
  }
  TANDEM_LOG_WARN("request {}: KV handoff failed: {}", id, status.ToString());
  proto::TokenEntry entry;
  entry.set_request_id(id);
  entry.set_epoch(epoch);
  entry.set_finish_reason(proto::FINISH_REASON_ERROR);
  *entry.mutable_error() = proto::ToErrorInfo(status);
  SendEntry(entry);
}

void DecodeNode::HandleKvControl(const std::shared_ptr<net::RpcConnection>& conn, const proto::KvControl& control) {
  if (control.payload().size() > (1u << 20)) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = requests_.find(control.request_id());
    if (it == requests_.end() || it->second.epoch != control.epoch()) return;
    it->second.peer = conn;
  }
  poll_.Post([this, payload = control.payload()] { receiver_->OnControlMessage(payload); });
}

void DecodeNode::HandleKvDone(const proto::KvDone& done) {
  const uint64_t id = done.request_id();
  Status status = proto::FromErrorInfo(done.status());
  if (status.ok() && (done.first_token() < 0 || done.first_token() >= engine_->model_config().vocab_size)) {
    status = InvalidArgumentError("first_token out of range");
  }
  if (!status.ok()) return Fail(id, done.epoch(), status);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = requests_.find(id);
  if (it == requests_.end() || it->second.epoch != done.epoch() || !it->second.remote || it->second.have_first) {
    return;
  }
  it->second.have_first = true;
  it->second.first_token = done.first_token();
  it->second.bytes = done.bytes_sent();
  MaybeCompleteLocked(id, it->second);
}

void DecodeNode::OnSessionDone(uint64_t id, Epoch epoch, const Status& status) {
  // Poll thread.
  if (!status.ok()) return Fail(id, epoch, status);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = requests_.find(id);
  if (it == requests_.end() || it->second.epoch != epoch) return;
  it->second.landed = true;
  MaybeCompleteLocked(id, it->second);
}

void DecodeNode::MaybeCompleteLocked(uint64_t id, Request& r) {
  if (!r.landed || !r.have_first || r.completing || r.cancelled || r.ended) return;
  r.completing = true;
  engine_->Post([this, id] { Upload(id); });
}

void DecodeNode::Upload(uint64_t id) {
  // Engine thread: copy every layer of the landed blocks into the reserved device blocks.
  // (Layer-wise H2D from on_layer, overlapping the transfer, is a later optimization.)
  std::vector<BlockId> device, landing;
  TokenId first = 0;
  Epoch epoch = 0;
  Nanos reserved_at = 0;
  int64_t bytes = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = requests_.find(id);
    if (it == requests_.end() || it->second.cancelled || it->second.ended) return;
    device = it->second.device_blocks;
    landing.swap(it->second.landing);
    first = it->second.first_token;
    epoch = it->second.epoch;
    reserved_at = it->second.reserved_at;
    bytes = it->second.bytes;
  }
  const kv_cache::KvLayout& layout = engine_->device_kv().layout();
  runtime::Tensor pool = engine_->device_kv().pool();
  const size_t block_bytes = layout.BytesPerBlockLayer();
  Status status;
  for (int layer = 0; layer < layout.num_layers && status.ok(); ++layer) {
    for (size_t i = 0; i < device.size() && status.ok(); ++i) {
      auto* dst = static_cast<std::byte*>(pool.data) + layout.BlockOffset(layer, device[i]);
      runtime::Tensor view(dst, DType::kU8, pool.device, {static_cast<int64_t>(block_bytes)});
      status = engine_->backend().CopyToDevice(landing_->Block(layer, landing[i]), block_bytes, view);
    }
  }
  landing_->Free(landing);
  if (!status.ok()) return Fail(id, epoch, status);
  node::NodeMetrics& m = host_.metrics();
  m.serving.kv_transfer_seconds->Get().Observe(static_cast<double>(Clock::Real().NowNanos() - reserved_at) * 1e-9);
  m.serving.kv_transfer_bytes->WithLabels({"received"}).Increment(static_cast<double>(bytes));
  {
    std::lock_guard<std::mutex> lock(mu_);
    bytes_landed_ += static_cast<uint64_t>(bytes);
    auto it = requests_.find(id);
    if (it != requests_.end()) it->second.decode_started_at = Clock::Real().NowNanos();
  }
  engine_->CompleteReservation(id, first);
}

void DecodeNode::OnOutputs(std::vector<engine::EngineOutput>&& outputs) {
  proto::Tokens tokens;
  node::NodeMetrics& m = host_.metrics();
  std::vector<std::function<void()>> then;
  {
    std::lock_guard<std::mutex> lock(mu_);
    tokens.set_step(++step_);
    for (engine::EngineOutput& out : outputs) {
      auto it = requests_.find(out.id);
      if (it == requests_.end()) continue;
      Request& r = it->second;
      if (out.finished && !r.landing.empty()) {
        // Lease expiry or abort while receiving: the sender may still write.
        landing_->Quarantine(r.landing, config_.late_write_grace_ms);
        r.landing.clear();
        uint64_t id = out.id;
        if (r.remote) poll_.Post([this, id] { receiver_->Cancel(id, DeadlineExceededError("reservation ended")); });
      }
      if (r.ended) {
        if (out.finished) {
          for (auto& fn : r.then) then.push_back(std::move(fn));
          requests_.erase(it);
        }
        continue;
      }
      m.serving.generation_tokens->Get().Increment(static_cast<double>(out.tokens.size()));
      proto::TokenEntry* entry = tokens.add_entries();
      entry->set_request_id(out.id);
      entry->set_epoch(r.epoch);
      entry->mutable_token_ids()->Add(out.tokens.begin(), out.tokens.end());
      // The first token's entry reports the prompt's cache hits early: a router that ends
      // the request itself (a stop string) never sees the final entry.
      if (!out.finished && out.num_cached_tokens > 0) entry->set_num_cached_tokens(out.num_cached_tokens);
      if (out.finished) {
        proto::FinishReason reason = node::FinishReasonToProto(out.finish_reason);
        entry->set_finish_reason(reason);
        if (reason == proto::FINISH_REASON_ERROR) {
          Status status = out.status.ok() ? InternalError(out.finish_reason) : out.status;
          if (out.finish_reason == "lease_expired") {
            status = DeadlineExceededError("reservation lease expired");
            m.serving.kv_reservations->WithLabels({"expired"}).Increment();
          }
          *entry->mutable_error() = proto::ToErrorInfo(status);
        }
        entry->set_num_cached_tokens(out.num_cached_tokens);
        if (r.decode_started_at > 0 && reason != proto::FINISH_REASON_ERROR) {
          m.serving.request_decode_time->Get().Observe(
              static_cast<double>(Clock::Real().NowNanos() - r.decode_started_at) * 1e-9);
        }
        m.serving.prompt_tokens->Get().Increment(out.num_prompt_tokens);
        m.serving.prefix_cache_queries->Get().Increment(out.num_prompt_tokens);
        m.serving.prefix_cache_hits->Get().Increment(out.num_cached_tokens);
        for (auto& fn : r.then) then.push_back(std::move(fn));
        requests_.erase(it);
      }
    }
    tokens.set_node_id(host_.node_id());
  }
  if (tokens.entries_size() > 0) host_.SendToRouter(tokens).IgnoreError();
  for (auto& fn : then) fn();  // newer epochs of ended requests
}

bool DecodeNode::RefuseBuriedLocked(uint64_t id, Epoch epoch, const net::Responder& responder) {
  if (!tombstones_.Buried(id, epoch, Clock::Real().NowNanos())) return false;
  responder.Fail(CancelledError("request " + std::to_string(id) + " epoch " + std::to_string(epoch) +
                                " was cancelled before it arrived"));
  return true;
}

bool DecodeNode::SupersedeLocked(uint64_t id, Epoch epoch, std::function<void()> retry,
                                 const net::Responder& responder) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return false;
  Request& old = it->second;
  if (epoch <= old.epoch) {
    responder.Fail(AlreadyExistsError("request " + std::to_string(id) + " epoch " + std::to_string(epoch) +
                                      " is not newer than " + std::to_string(old.epoch)));
    return true;
  }
  if (old.then.size() >= 4) {
    responder.Fail(ResourceExhaustedError("too many superseding requests for " + std::to_string(id)));
    return true;
  }
  if (!old.ended) {
    old.ended = true;  // the newer epoch replaces it: no entry for the old one
    if (!old.cancelled) AbandonLocked(id, old, CancelledError("superseded by epoch " + std::to_string(epoch)));
  }
  old.then.push_back(std::move(retry));
  return true;
}

void DecodeNode::SendEntry(const proto::TokenEntry& entry) {
  proto::Tokens tokens;
  tokens.set_node_id(host_.node_id());
  *tokens.add_entries() = entry;
  host_.SendToRouter(tokens).IgnoreError();
}

}  // namespace tandem::decode_node
