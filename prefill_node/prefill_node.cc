#include "prefill_node/prefill_node.h"

#include "common/base/logging.h"
#include "common/engine/backend_factory.h"
#include "common/node/node_protocol.h"
#include "common/proto/messages.h"
#include "kv_transfer/transport_factory.h"

namespace tandem::prefill_node {

StatusOr<std::unique_ptr<PrefillNode>> PrefillNode::Create(PrefillNodeOptions options) {
  std::unique_ptr<PrefillNode> node(new PrefillNode());
  TANDEM_RETURN_IF_ERROR(node->Init(std::move(options)));
  return node;
}

PrefillNode::~PrefillNode() { Stop(); }

Status PrefillNode::Init(PrefillNodeOptions options) {
  config_ = std::move(options.config);
  config_.role = "prefill";
  TANDEM_RETURN_IF_ERROR(config_.Validate());
  std::unique_ptr<runtime::Backend> backend = std::move(options.backend);
  if (!backend) {
    TANDEM_ASSIGN_OR_RETURN(backend, engine::MakeBackend(config_.engine.backend, config_.engine.device));
  }
  TANDEM_ASSIGN_OR_RETURN(engine_, engine::Engine::Create(config_.engine, std::move(backend)));
  kv_cache::KvLayout layout = engine_->device_kv().layout();
  layout.num_blocks = config_.transfer_blocks;
  staging_ = std::make_unique<node::HostBlockArena>(layout);
  // The engine thread has not started: the backend is still ours to call.
  TANDEM_ASSIGN_OR_RETURN(copy_queue_, engine_->backend().CreateHostCopyQueue());
  TANDEM_RETURN_IF_ERROR(engine_->backend().PinHostMemory(staging_->base(), staging_->size_bytes()));
  staging_pinned_ = true;

  TANDEM_ASSIGN_OR_RETURN(transport_, options.make_transport ? options.make_transport()
                                                              : kv_transfer::MakeTransport(config_.transport, config_.ucx_transports));
  TANDEM_ASSIGN_OR_RETURN(kv_transfer::RegisteredRegion region,
                          transport_->RegisterMemory(staging_->base(), staging_->size_bytes(),
                                                     kv_transfer::MemoryKind::kHost));
  staging_region_ = region.id;
  kv_transfer::KvSenderConfig sc;
  sc.model_id = config_.engine.model_name;
  sc.layout = layout;
  TANDEM_RETURN_IF_ERROR(sc.Validate());
  sender_ = std::make_unique<kv_transfer::KvSender>(
      sc, *transport_, Clock::Real(), [this](RequestId id, std::string bytes) {
        std::shared_ptr<net::RpcConnection> conn;
        proto::KvControl control;
        {
          std::lock_guard<std::mutex> lock(mu_);
          auto it = jobs_.find(id);
          if (it == jobs_.end()) return;
          conn = it->second.decode_conn;
          control.set_epoch(it->second.epoch);
        }
        if (!conn) return;
        control.set_request_id(id);
        control.set_payload(std::move(bytes));
        conn->Send(control).IgnoreError();
      });
  std::string descriptor = transport_->WorkerAddress();
  poll_.Start(
      [this] {
        if (!sender_) return;  // stopped
        SendReadyLayers();
        sender_->Poll();
        sessions_.store(static_cast<int64_t>(sender_->num_sessions()));
      },
      [this] { return sender_ && (sender_->num_sessions() > 0 || !outgoing_.empty()); });

  engine::ForwardObserver observer;
  observer.on_begin = [this](const scheduler::SchedulerOutput& step) { return OnStepBegin(step); };
  observer.on_layer = [this](int layer) { OnLayer(layer); };
  observer.on_end = [this](const scheduler::SchedulerOutput&, const Status& status) { OnStepEnd(status); };
  engine_->SetForwardObserver(std::move(observer));
  engine_->Start([this](std::vector<engine::EngineOutput>&& outputs) { OnOutputs(std::move(outputs)); });

  node::RoleHooks hooks;
  hooks.role = proto::NODE_ROLE_PREFILL;
  hooks.kv_transport = config_.transport;
  hooks.transport_descriptor = descriptor;
  hooks.on_request = [this](const std::shared_ptr<net::RpcConnection>& c, net::MessagePtr m, net::Responder r) {
    OnRequest(c, std::move(m), std::move(r));
  };
  hooks.on_message = [this](const std::shared_ptr<net::RpcConnection>& c, net::MessagePtr m) {
    OnPeerMessage(c, std::move(m));
  };
  hooks.on_router_lost = [this] {
    std::lock_guard<std::mutex> lock(mu_);
    tombstones_.Clear();  // the next router numbers its requests afresh
    for (auto it = jobs_.begin(); it != jobs_.end();) {
      auto next = std::next(it);
      FailLocked(it->first, it->second, UnavailableError("router connection lost"));
      MaybeEraseLocked(it);
      it = next;
    }
  };
  hooks.refresh = [this](node::NodeMetrics& m) { Refresh(m); };
  hooks.queued_prefill_tokens = [this] {
    std::lock_guard<std::mutex> lock(mu_);
    int64_t tokens = 0;
    for (const auto& [id, job] : jobs_) {
      if (!job.staged && !job.ended) tokens += job.prompt_len;
    }
    return tokens;
  };
  TANDEM_RETURN_IF_ERROR(host_.Start(config_, engine_.get(), std::move(hooks)));

  net::RpcHandlers peer_handlers;
  peer_handlers.on_message = [this](const std::shared_ptr<net::RpcConnection>& c, net::MessagePtr m) {
    OnPeerMessage(c, std::move(m));
  };
  peer_handlers.on_close = [this](const std::shared_ptr<net::RpcConnection>& c, const Status& why) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = jobs_.begin(); it != jobs_.end();) {
      auto next = std::next(it);
      if (it->second.decode_conn == c) {
        FailLocked(it->first, it->second, UnavailableError("decode connection closed: " + why.ToString()));
        MaybeEraseLocked(it);
      }
      it = next;
    }
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
      transport_->UnregisterMemory(staging_region_).IgnoreError();
      transport_.reset();
      if (staging_pinned_) engine_->backend().UnpinHostMemory(staging_->base());
      staging_pinned_ = false;
    } else {
      // A hung peer still holds staging reads: leak rather than free memory under it.
      TANDEM_LOG_ERROR("prefill stop: {} transfer sessions did not drain", sender_->num_sessions());
      sender_.release();
      transport_.release();
      staging_.release();
    }
  });
  poll_.Stop();
}

PrefillNodeStats PrefillNode::Stats() {
  PrefillNodeStats s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    s.jobs = static_cast<int64_t>(jobs_.size());
    s.bytes_sent = bytes_sent_;
  }
  s.staging_in_use = staging_->num_in_use();
  s.sessions = sessions_.load();
  return s;
}

bool PrefillNode::Idle() {
  std::lock_guard<std::mutex> lock(mu_);
  return jobs_.empty();
}

void PrefillNode::Refresh(node::NodeMetrics& metrics) {
  metrics.Update(engine_->Counters(), sessions_.load(), staging_->num_in_use());
}

void PrefillNode::OnRequest(const std::shared_ptr<net::RpcConnection>& conn, net::MessagePtr message,
                            net::Responder responder) {
  uint64_t id = 0;
  Epoch epoch = 0;
  if (const auto* prefill = proto::MessageAs<proto::PrefillRequest>(*message)) {
    return HandlePrefill(*prefill, std::move(responder));
  } else if (const auto* cancel = proto::MessageAs<proto::Cancel>(*message)) {
    id = cancel->request_id();
    epoch = cancel->epoch();
  } else if (const auto* release = proto::MessageAs<proto::Release>(*message)) {
    id = release->request_id();
    epoch = release->epoch();
  } else {
    return responder.Fail(UnimplementedError("prefill node does not serve " + message->GetTypeName()));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = jobs_.find(id);
    if (epoch != 0 && (it == jobs_.end() || it->second.epoch < epoch)) {
      tombstones_.Bury(id, epoch, Clock::Real().NowNanos());  // its PrefillRequest may still come
    }
    if (it != jobs_.end() && (epoch == 0 || it->second.epoch == epoch)) {
      FailLocked(id, it->second, CancelledError("cancelled by the router"));
      MaybeEraseLocked(it);
    }
  }
  proto::Ack ack;
  ack.set_request_id(id);
  ack.set_epoch(epoch);
  responder.Reply(ack);
}

void PrefillNode::HandlePrefill(const proto::PrefillRequest& prefill, net::Responder responder) {
  if (host_.draining()) return responder.Fail(UnavailableError("draining"));
  const uint64_t id = prefill.request_id();
  if (id == 0) return responder.Fail(InvalidArgumentError("request_id must be set"));
  if (prefill.epoch() == 0) return responder.Fail(InvalidArgumentError("epoch must be >= 1"));
  Status valid = node::ValidatePrompt(prefill.token_ids(), engine_->model_config().vocab_size,
                                      engine_->max_model_len());
  if (!valid.ok()) return responder.Fail(valid);
  if (prefill.tenant_salt().size() > 1024) return responder.Fail(InvalidArgumentError("tenant_salt too long"));
  const proto::ReserveReply& res = prefill.reservation();
  const int block_size = engine_->device_kv().layout().block_size;
  const int prompt_len = prefill.token_ids_size();
  const int prompt_blocks = (prompt_len + block_size - 1) / block_size;
  if (res.prefix_hit_tokens() < 0 || res.prefix_hit_tokens() % block_size != 0 ||
      res.prefix_hit_tokens() >= prompt_len + block_size) {
    return responder.Fail(InvalidArgumentError("reservation.prefix_hit_tokens is not a block multiple within the prompt"));
  }
  int64_t needed = 0;
  for (const proto::BlockRun& run : res.needed_runs()) {
    if (run.num_blocks() <= 0 || run.first_block() < 0) return responder.Fail(InvalidArgumentError("bad block run"));
    needed += run.num_blocks();
  }
  const int first_block = res.prefix_hit_tokens() / block_size;
  if (needed == 0 || first_block + needed != prompt_blocks) {
    return responder.Fail(InvalidArgumentError("reservation does not cover the prompt's uncached blocks"));
  }
  if (res.transport_descriptor().empty() || res.transport_descriptor().size() > (1u << 16)) {
    return responder.Fail(InvalidArgumentError("reservation.transport_descriptor missing or too large"));
  }
  if (prefill.decode_address().empty() || prefill.decode_address().size() > 256) {
    return responder.Fail(InvalidArgumentError("decode_address missing"));
  }
  proto::SamplingParams first_only = prefill.sampling();
  first_only.set_min_tokens(std::min(first_only.min_tokens(), 1));
  StatusOr<runtime::SamplingParams> sampling = node::SamplingFromProto(first_only, 1);
  if (!sampling.ok()) return responder.Fail(sampling.status());
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (static_cast<int>(jobs_.size()) >= config_.max_pending_jobs) {
      return responder.Fail(ResourceExhaustedError("prefill queue full"));
    }
    if (tombstones_.Buried(id, prefill.epoch(), Clock::Real().NowNanos())) {
      return responder.Fail(CancelledError("request " + std::to_string(id) + " epoch " +
                                           std::to_string(prefill.epoch()) + " was cancelled before it arrived"));
    }
    if (jobs_.count(id)) return responder.Fail(AlreadyExistsError("request " + std::to_string(id) + " exists"));
    Job& job = jobs_[id];
    job.epoch = prefill.epoch();
    job.decode_address = prefill.decode_address();
    job.target = res.transport_descriptor();
    job.first_block = first_block;
    job.num_blocks = static_cast<int>(needed);
    job.prompt_len = prompt_len;
    job.submitted_at = Clock::Real().NowNanos();
    // Queued under mu_: a Cancel that finds the job queues its engine Cancel after this.
    engine_->Submit(node::MakeEngineRequest(id, prefill.token_ids(), prefill.tenant_salt(), std::move(*sampling)));
  }
  const Epoch epoch = prefill.epoch();
  peers_->AsyncConnect(prefill.decode_address(),
                       [this, id, epoch](StatusOr<std::shared_ptr<net::RpcConnection>> conn) {
                         std::lock_guard<std::mutex> lock(mu_);
                         auto it = jobs_.find(id);
                         if (it == jobs_.end() || it->second.epoch != epoch) return;
                         if (!conn.ok()) {
                           FailLocked(id, it->second, conn.status());
                           MaybeEraseLocked(it);
                           return;
                         }
                         it->second.decode_conn = *conn;
                         MaybeOpenLocked(id, it->second);
                       });
  proto::Ack ack;
  ack.set_request_id(id);
  ack.set_epoch(epoch);
  responder.Reply(ack);
}

void PrefillNode::OnPeerMessage(const std::shared_ptr<net::RpcConnection>&, net::MessagePtr message) {
  if (const auto* control = proto::MessageAs<proto::KvControl>(*message)) {
    if (control->payload().size() > (1u << 20)) return;
    poll_.Post([this, payload = control->payload()] { sender_->OnControlMessage(payload); });
  }
}

bool PrefillNode::OnStepBegin(const scheduler::SchedulerOutput& step) {
  // Engine thread, before the forward: prompts finishing in this step get staging now.
  copying_.clear();
  std::lock_guard<std::mutex> lock(mu_);
  for (const scheduler::ScheduledSequence& s : step.scheduled) {
    if (!s.needs_logits || !s.is_prefill) continue;
    auto it = jobs_.find(s.id);
    if (it == jobs_.end() || it->second.staged || it->second.ended) continue;
    Job& job = it->second;
    if (static_cast<int>(s.block_table.size()) < job.first_block + job.num_blocks) {
      FailLocked(s.id, job, InternalError("block table shorter than the prompt"));
      continue;
    }
    std::optional<std::vector<BlockId>> staging = staging_->Allocate(job.num_blocks);
    if (!staging) {
      FailLocked(s.id, job, ResourceExhaustedError("no free staging blocks"));
      continue;
    }
    job.staging = *staging;
    job.staged = true;
    Copying& c = copying_.emplace_back();
    c.id = s.id;
    c.epoch = job.epoch;
    c.device_blocks.assign(s.block_table.begin() + job.first_block,
                           s.block_table.begin() + job.first_block + job.num_blocks);
    c.staging = job.staging;
    MaybeOpenLocked(s.id, job);
  }
  return !copying_.empty();
}

void PrefillNode::OnLayer(int layer) {
  // Engine thread: layer `layer` of this step is issued; copy it out behind it.
  const kv_cache::KvLayout& layout = engine_->device_kv().layout();
  runtime::Tensor pool = engine_->device_kv().pool();
  const size_t bytes = layout.BytesPerBlockLayer();
  for (Copying& c : copying_) {
    for (size_t i = 0; i < c.device_blocks.size() && c.status.ok(); ++i) {
      auto* src = static_cast<std::byte*>(pool.data) + layout.BlockOffset(layer, c.device_blocks[i]);
      runtime::Tensor view(src, DType::kU8, pool.device, {static_cast<int64_t>(bytes)});
      c.status = copy_queue_->Enqueue(view, staging_->Block(layer, c.staging[i]), bytes);
    }
  }
  StatusOr<std::shared_ptr<runtime::CopyFence>> fence = copy_queue_->Mark();
  for (Copying& c : copying_) {
    if (!fence.ok() && c.status.ok()) c.status = fence.status();
    if (!c.status.ok()) continue;
    poll_.Post([this, id = c.id, epoch = c.epoch, layer, f = *fence] { OnLayerQueued(id, epoch, layer, f); });
  }
}

void PrefillNode::OnStepEnd(const Status& status) {
  // Engine thread: the forward is issued; later steps must not reuse blocks under the copies.
  Status joined = copy_queue_->JoinCompute();
  const Nanos now = Clock::Real().NowNanos();
  std::lock_guard<std::mutex> lock(mu_);
  for (Copying& c : copying_) {
    auto it = jobs_.find(c.id);
    if (it == jobs_.end() || it->second.epoch != c.epoch) continue;
    Job& job = it->second;
    Status failed = !status.ok() ? status : !c.status.ok() ? c.status : joined;
    if (!failed.ok()) {
      FailLocked(c.id, job, failed);
      MaybeEraseLocked(it);
      continue;
    }
    job.computed_at = now;
    host_.metrics().serving.request_prefill_time->Get().Observe(static_cast<double>(now - job.submitted_at) * 1e-9);
  }
  copying_.clear();
}

void PrefillNode::MaybeOpenLocked(uint64_t id, Job& job) {
  if (!job.staged || !job.decode_conn || job.session_open || job.transfer_done || job.ended) return;
  job.session_open = true;
  const Epoch epoch = job.epoch;
  poll_.Post([this, id, epoch, target = job.target, staging = job.staging] {
    kv_transfer::SendParams params;
    params.target = target;
    params.source_blocks = staging;
    params.on_done = [this, id, epoch](const Status& status) { OnSendDone(id, epoch, status); };
    Outgoing& out = OutgoingFor(id, epoch);
    Status opened = sender_->Open(std::move(params));
    if (!opened.ok()) return OnSendDone(id, epoch, opened);
    out.open = true;
    SendReadyLayers();
    sessions_.store(static_cast<int64_t>(sender_->num_sessions()));
  });
}

void PrefillNode::OnLayerQueued(uint64_t id, Epoch epoch, int layer, std::shared_ptr<runtime::CopyFence> fence) {
  {
    // A job that ended meanwhile has no session to feed (and its erase was posted before this).
    std::lock_guard<std::mutex> lock(mu_);
    auto it = jobs_.find(id);
    if (it == jobs_.end() || it->second.epoch != epoch || it->second.ended) return;
  }
  OutgoingFor(id, epoch).layers.emplace_back(layer, std::move(fence));
  SendReadyLayers();
}

PrefillNode::Outgoing& PrefillNode::OutgoingFor(uint64_t id, Epoch epoch) {
  Outgoing& out = outgoing_[id];
  if (out.epoch != epoch) {  // new, or left over from an earlier epoch of the id
    out = Outgoing();
    out.epoch = epoch;
  }
  return out;
}

void PrefillNode::SendReadyLayers() {
  // Poll thread. Copies complete in order, so each queue drains from the front.
  const kv_cache::KvLayout& layout = staging_->layout();
  for (auto it = outgoing_.begin(); it != outgoing_.end();) {
    Outgoing& out = it->second;
    const uint64_t id = it->first;
    bool finished = false;  // every layer handed to the sender, or the session failed
    while (out.open && !out.layers.empty() && out.layers.front().second->Ready()) {
      const int layer = out.layers.front().first;
      out.layers.pop_front();
      Status sent = sender_->SendLayer(id, layer, kv_transfer::LayerSource{staging_region_, layout.BlockOffset(layer, 0)});
      if (!sent.ok()) {
        sender_->Cancel(id, sent);  // on_done follows
        finished = true;
        break;
      }
      finished = layer == layout.num_layers - 1;
    }
    it = finished ? outgoing_.erase(it) : std::next(it);
  }
}

void PrefillNode::OnSendDone(uint64_t id, Epoch epoch, const Status& status) {
  // Poll thread: the sender no longer reads the staging blocks.
  if (auto out = outgoing_.find(id); out != outgoing_.end() && out->second.epoch == epoch) outgoing_.erase(out);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end() || it->second.epoch != epoch) return;
  Job& job = it->second;
  job.transfer_done = true;
  job.session_open = false;
  job.transfer_status = status;
  staging_->Free(job.staging);
  job.staging.clear();
  node::NodeMetrics& m = host_.metrics();
  if (status.ok()) {
    int64_t bytes = static_cast<int64_t>(job.num_blocks) * staging_->layout().num_layers *
                    static_cast<int64_t>(staging_->layout().BytesPerBlockLayer());
    bytes_sent_ += static_cast<uint64_t>(bytes);
    m.serving.kv_transfer_bytes->WithLabels({"sent"}).Increment(static_cast<double>(bytes));
    m.serving.kv_transfer_seconds->Get().Observe(static_cast<double>(Clock::Real().NowNanos() - job.computed_at) *
                                                 1e-9);
  }
  if (!status.ok() && !job.ended) FailLocked(id, job, status);
  MaybeFinishLocked(id, job);
  MaybeEraseLocked(it);
}

void PrefillNode::OnOutputs(std::vector<engine::EngineOutput>&& outputs) {
  std::lock_guard<std::mutex> lock(mu_);
  for (engine::EngineOutput& out : outputs) {
    auto it = jobs_.find(out.id);
    if (it == jobs_.end()) continue;
    Job& job = it->second;
    if (!out.tokens.empty() && !job.have_token) {
      job.have_token = true;
      job.first_token = out.tokens.front();
      host_.metrics().serving.generation_tokens->Get().Increment(1);
    }
    if (out.finished) {
      job.engine_done = true;
      host_.metrics().serving.prompt_tokens->Get().Increment(out.num_prompt_tokens);
      host_.metrics().serving.prefix_cache_queries->Get().Increment(out.num_prompt_tokens);
      host_.metrics().serving.prefix_cache_hits->Get().Increment(out.num_cached_tokens);
      if (!job.have_token && !job.ended) {
        FailLocked(out.id, job, out.status.ok() ? InternalError("prefill ended: " + out.finish_reason) : out.status);
      }
    }
    MaybeFinishLocked(out.id, job);
    MaybeEraseLocked(it);
  }
}

void PrefillNode::MaybeFinishLocked(uint64_t id, Job& job) {
  if (job.ended || !job.have_token || !job.transfer_done) return;
  job.ended = true;
  SendKvDoneLocked(id, job, job.transfer_status);
}

void PrefillNode::FailLocked(uint64_t id, Job& job, const Status& status) {
  if (job.ended) return;
  job.ended = true;
  if (!job.engine_done) engine_->Cancel(id);
  if (job.session_open) {
    poll_.Post([this, id, status] { sender_->Cancel(id, status); });  // on_done frees staging
  } else if (!job.staging.empty()) {
    // Copies still queued into these blocks land before any later copy into
    // them (one in-order copy stream), and the sender never reads them now.
    poll_.Post([this, id, epoch = job.epoch] {
      if (auto out = outgoing_.find(id); out != outgoing_.end() && out->second.epoch == epoch) outgoing_.erase(out);
    });
    staging_->Free(job.staging);
    job.staging.clear();
  }
  SendKvDoneLocked(id, job, status);
}

void PrefillNode::SendKvDoneLocked(uint64_t id, const Job& job, const Status& status) {
  if (!job.decode_conn) return;  // never reached decode: its lease ends the reservation
  proto::KvDone done;
  done.set_request_id(id);
  done.set_epoch(job.epoch);
  done.set_first_token(job.first_token);
  *done.mutable_status() = proto::ToErrorInfo(status);
  if (status.ok()) {
    done.set_bytes_sent(static_cast<int64_t>(job.num_blocks) * staging_->layout().num_layers *
                        static_cast<int64_t>(staging_->layout().BytesPerBlockLayer()));
  }
  done.set_num_prompt_tokens(job.prompt_len);
  job.decode_conn->Send(done).IgnoreError();
}

void PrefillNode::MaybeEraseLocked(std::map<uint64_t, Job>::iterator it) {
  const Job& job = it->second;
  if (job.ended && job.engine_done && !job.session_open && job.staging.empty()) jobs_.erase(it);
}

}  // namespace tandem::prefill_node
