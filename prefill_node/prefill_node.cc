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
        sender_->Poll();
        sessions_.store(static_cast<int64_t>(sender_->num_sessions()));
      },
      [this] { return sender_ && sender_->num_sessions() > 0; });

  engine_->SetForwardObserver(
      [this](const scheduler::SchedulerOutput& step, const scheduler::Scheduler&) { OnForward(step); });
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
  poll_.RunSync([this] {
    sender_->CancelAll(CancelledError("prefill node stopping"));
    for (int i = 0; i < 4000 && sender_->num_sessions() > 0; ++i) {
      sender_->Poll();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (sender_->num_sessions() == 0) {
      sender_.reset();
      transport_->UnregisterMemory(staging_region_).IgnoreError();
      transport_.reset();
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
    if (jobs_.count(id)) return responder.Fail(AlreadyExistsError("request " + std::to_string(id) + " exists"));
    Job& job = jobs_[id];
    job.epoch = prefill.epoch();
    job.decode_address = prefill.decode_address();
    job.target = res.transport_descriptor();
    job.first_block = first_block;
    job.num_blocks = static_cast<int>(needed);
    job.prompt_len = prompt_len;
    job.submitted_at = Clock::Real().NowNanos();
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
  engine_->Submit(node::MakeEngineRequest(id, prefill.token_ids(), prefill.tenant_salt(), std::move(*sampling)));
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

void PrefillNode::OnForward(const scheduler::SchedulerOutput& step) {
  // Engine thread, after the forward: the prompt's KV is in its device blocks now.
  for (const scheduler::ScheduledSequence& s : step.scheduled) {
    if (!s.needs_logits || !s.is_prefill) continue;
    std::lock_guard<std::mutex> lock(mu_);
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
    const kv_cache::KvLayout& layout = engine_->device_kv().layout();
    runtime::Tensor pool = engine_->device_kv().pool();
    const size_t bytes = layout.BytesPerBlockLayer();
    Status status;
    for (int layer = 0; layer < layout.num_layers && status.ok(); ++layer) {
      for (int i = 0; i < job.num_blocks && status.ok(); ++i) {
        auto* src = static_cast<std::byte*>(pool.data) + layout.BlockOffset(layer, s.block_table[job.first_block + i]);
        runtime::Tensor view(src, DType::kU8, pool.device, {static_cast<int64_t>(bytes)});
        status = engine_->backend().CopyToHost(view, staging_->Block(layer, job.staging[i]), bytes);
      }
    }
    if (!status.ok()) {
      FailLocked(s.id, job, status);
      continue;
    }
    job.staged = true;
    job.computed_at = Clock::Real().NowNanos();
    host_.metrics().serving.request_prefill_time->Get().Observe(
        static_cast<double>(job.computed_at - job.submitted_at) * 1e-9);
    MaybeOpenLocked(s.id, job);
  }
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
    Status opened = sender_->Open(std::move(params));
    if (!opened.ok()) return OnSendDone(id, epoch, opened);
    const kv_cache::KvLayout& layout = staging_->layout();
    for (int layer = 0; layer < layout.num_layers; ++layer) {
      Status sent = sender_->SendLayer(id, layer, kv_transfer::LayerSource{staging_region_, layout.BlockOffset(layer, 0)});
      if (!sent.ok()) {
        sender_->Cancel(id, sent);  // on_done follows
        break;
      }
    }
    sessions_.store(static_cast<int64_t>(sender_->num_sessions()));
  });
}

void PrefillNode::OnSendDone(uint64_t id, Epoch epoch, const Status& status) {
  // Poll thread: the sender no longer reads the staging blocks.
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
