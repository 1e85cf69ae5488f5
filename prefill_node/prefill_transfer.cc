// PrefillNode, the KV transfer side: the transport and KvSender (poll thread),
// and the queue of layers waiting for their fences.
#include "common/base/logging.h"
#include "kv_transfer/transport_factory.h"
#include "prefill_node/prefill_node.h"

namespace tandem::prefill_node {
namespace {

double SecondsSince(Nanos t) { return static_cast<double>(Clock::Real().NowNanos() - t) * 1e-9; }

}  // namespace

Status PrefillNode::InitTransfer(PrefillNodeOptions& options) {
  TANDEM_ASSIGN_OR_RETURN(transport_,
                          options.make_transport
                              ? options.make_transport()
                              : kv_transfer::MakeTransport(config_.transport, {.ucx_transports = config_.ucx_transports,
                                                                               .cuda_device = config_.engine.device}));
  // The engine thread has not started: the backend is still ours to call.
  runtime::Backend& backend = engine_->backend();
  const kv_transfer::MemoryKind pool_kind =
      backend.device() == runtime::Device::kCpu ? kv_transfer::MemoryKind::kHost : kv_transfer::MemoryKind::kDevice;
  direct_ = config_.kv_staging == "auto" &&
            (pool_kind == kv_transfer::MemoryKind::kHost || transport_->Capabilities().device_memory);
  if (direct_) {
    source_layout_ = engine_->device_kv().layout();
    runtime::Tensor pool = engine_->device_kv().pool();
    TANDEM_ASSIGN_OR_RETURN(kv_transfer::RegisteredRegion region,
                            transport_->RegisterMemory(pool.data, source_layout_.TotalBytes(), pool_kind));
    source_region_ = region.id;
  } else {
    source_layout_ = engine_->device_kv().layout();
    source_layout_.num_blocks = config_.transfer_blocks;
    staging_ = std::make_unique<node::HostBlockArena>(source_layout_);
    TANDEM_ASSIGN_OR_RETURN(copy_queue_, backend.CreateHostCopyQueue());
    TANDEM_RETURN_IF_ERROR(backend.PinHostMemory(staging_->base(), staging_->size_bytes()));
    staging_pinned_ = true;
    TANDEM_ASSIGN_OR_RETURN(
        kv_transfer::RegisteredRegion region,
        transport_->RegisterMemory(staging_->base(), staging_->size_bytes(), kv_transfer::MemoryKind::kHost));
    source_region_ = region.id;
  }
  kv_transfer::KvSenderConfig sc;
  sc.model_id = config_.engine.model_name;
  sc.layout = source_layout_;
  TANDEM_RETURN_IF_ERROR(sc.Validate());
  sender_ =
      std::make_unique<kv_transfer::KvSender>(sc, *transport_, Clock::Real(), [this](RequestId id, std::string bytes) {
        std::shared_ptr<net::RpcConnection> conn;
        proto::KvControl control;
        {
          std::lock_guard<std::mutex> lock(mu_);
          Request* r = requests_.Find(id);
          if (r == nullptr) return;
          conn = r->decode_conn;
          control.set_epoch(r->epoch);
        }
        if (!conn) return;
        control.set_request_id(id);
        control.set_payload(std::move(bytes));
        conn->Send(control).IgnoreError();
      });
  TANDEM_LOG_INFO("prefill node: transport {}, KV leaves {}", transport_->Capabilities().backend,
                  direct_ ? "straight from the engine's pool" : "through pinned host staging");
  poll_.Start(
      [this] {
        if (!sender_) return;  // stopped
        SendReadyLayers();
        sender_->Poll();
        sessions_.store(static_cast<int64_t>(sender_->num_sessions()));
      },
      [this, spin = node::MaySpin(pool_kind == kv_transfer::MemoryKind::kHost)] {
        using Pace = node::PollThread::Pace;
        if (!sender_ || (sender_->num_sessions() == 0 && outgoing_.empty())) return Pace::kIdle;
        return spin && sender_->num_in_flight() > 0 ? Pace::kSpin : Pace::kBusy;
      });
  return Status::Ok();
}

// ---- the transfer (poll thread) ----

void PrefillNode::OpenSession(uint64_t id, Epoch epoch, std::string target, std::vector<BlockId> source) {
  kv_transfer::SendParams params;
  params.target = std::move(target);
  params.source_blocks = std::move(source);
  params.on_done = [this, id, epoch](const Status& status) { OnSendDone(id, epoch, status); };
  Outgoing& out = OutgoingFor(id, epoch);
  Status opened = sender_->Open(std::move(params));
  if (!opened.ok()) return OnSendDone(id, epoch, opened);
  out.open = true;
  SendReadyLayers();
  sessions_.store(static_cast<int64_t>(sender_->num_sessions()));
}

void PrefillNode::OnLayerQueued(uint64_t id, Epoch epoch, int layer, std::shared_ptr<runtime::CopyFence> fence) {
  {
    // A request that ended meanwhile has no session to feed.
    std::lock_guard<std::mutex> lock(mu_);
    const Request* r = requests_.Find(id, epoch);
    if (r == nullptr || r->source.empty()) return;
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
  // Fences complete in order (one stream), so each queue drains from the front.
  // An entry stays until its session ends (OnSendDone) or its source is released.
  for (auto& [id, out] : outgoing_) {
    while (out.open && !out.layers.empty() && out.layers.front().second->Ready()) {
      const int layer = out.layers.front().first;
      out.layers.pop_front();
      if (out.first_sent_at == 0) out.first_sent_at = Clock::Real().NowNanos();
      Status sent =
          sender_->SendLayer(id, layer, kv_transfer::LayerSource{source_region_, source_layout_.BlockOffset(layer, 0)});
      if (!sent.ok()) {
        sender_->Cancel(id, sent);  // on_done follows
        out.layers.clear();
      }
    }
  }
}

void PrefillNode::OnSendDone(uint64_t id, Epoch epoch, const Status& status) {
  // The sender no longer reads the source.
  if (auto out = outgoing_.find(id); out != outgoing_.end() && out->second.epoch == epoch) {
    if (status.ok() && out->second.first_sent_at != 0) {
      host_.metrics().kv_transfer_seconds->Observe(SecondsSince(out->second.first_sent_at));
    }
    outgoing_.erase(out);
  }
  Handle(id, epoch, {PrefillEventKind::kSendDone, status});
}

}  // namespace tandem::prefill_node
