// DecodeNode, the KV transfer side: the transport and KvReceiver (poll thread),
// and the staged path's uploads of landed layers.
#include "common/base/logging.h"
#include "common/node/kv_layer_copy.h"
#include "decode_node/decode_node.h"
#include "kv_transfer/transport_factory.h"

namespace tandem::decode_node {

using E = DecodeEventKind;

Status DecodeNode::InitTransfer(DecodeNodeOptions& options) {
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
  kv_cache::KvLayout layout = engine_->device_kv().layout();
  if (!direct_) {
    layout.num_blocks = config_.transfer_blocks;
    landing_ = std::make_unique<node::HostBlockArena>(layout);
    TANDEM_RETURN_IF_ERROR(backend.PinHostMemory(landing_->base(), landing_->size_bytes()));
    landing_pinned_ = true;
    TANDEM_ASSIGN_OR_RETURN(upload_queue_, backend.CreateHostCopyQueue({.after_compute = false}));
  }
  kv_transfer::KvReceiverConfig rc;
  rc.model_id = config_.engine.model_name;
  rc.layout = layout;
  rc.default_lease_ms = static_cast<uint32_t>(config_.lease_ms);
  TANDEM_RETURN_IF_ERROR(rc.Validate());
  receiver_ = std::make_unique<kv_transfer::KvReceiver>(rc, *transport_, Clock::Real(),
                                                        [this](RequestId id, std::string bytes) {
                                                          std::shared_ptr<net::RpcConnection> peer;
                                                          proto::KvControl control;
                                                          {
                                                            std::lock_guard<std::mutex> lock(mu_);
                                                            Request* r = requests_.Find(id);
                                                            if (r == nullptr) return;
                                                            peer = r->peer.lock();
                                                            control.set_epoch(r->epoch);
                                                          }
                                                          if (!peer)
                                                            return;  // the sender never spoke; its lease/drain ends it
                                                          control.set_request_id(id);
                                                          control.set_payload(std::move(bytes));
                                                          peer->Send(control).IgnoreError();
                                                        });
  if (direct_) {
    TANDEM_RETURN_IF_ERROR(receiver_->RegisterLanding(engine_->device_kv().pool().data, pool_kind));
  } else {
    TANDEM_RETURN_IF_ERROR(receiver_->RegisterLanding(landing_->base(), kv_transfer::MemoryKind::kHost));
  }
  TANDEM_LOG_INFO("decode node: transport {}, KV lands {}", transport_->Capabilities().backend,
                  direct_ ? "straight in the engine's pool" : "in pinned host memory, uploaded layer by layer");
  poll_.Start(
      [this] {
        if (!receiver_) return;  // stopped
        receiver_->Poll();
        PollUploads();
        sessions_.store(static_cast<int64_t>(receiver_->num_sessions()));
      },
      [this, spin = node::MaySpin(pool_kind == kv_transfer::MemoryKind::kHost)] {
        using Pace = node::PollThread::Pace;
        if (!receiver_ || (receiver_->num_sessions() == 0 && uploads_.empty())) return Pace::kIdle;
        // A one-sided receiver cannot see bytes arrive: it spins while any session is open.
        return spin && receiver_->num_sessions() > 0 ? Pace::kSpin : Pace::kBusy;
      });
  return Status::Ok();
}

// ---- the transfer (poll thread) ----

void DecodeNode::OpenReceiver(uint64_t id, Epoch epoch, std::vector<BlockId> target, std::vector<BlockId> device,
                              uint32_t lease_ms) {
  kv_transfer::ReceiveParams params;
  params.request_id = id;
  params.epoch = epoch;
  params.blocks = target;
  params.lease_ms = lease_ms;
  params.on_layer = [this, id, epoch](int layer) { OnLayerLanded(id, epoch, layer); };
  params.on_done = [this, id, epoch](const Status& status) { OnSessionDone(id, epoch, status); };
  StatusOr<std::string> opened = receiver_->Open(std::move(params));
  sessions_.store(static_cast<int64_t>(receiver_->num_sessions()));
  if (opened.ok() && !direct_) {
    Upload& u = uploads_[id];
    u = Upload();
    u.epoch = epoch;
    u.landing = std::move(target);
    u.device = std::move(device);
  }
  Retries retries;
  bool ended = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Request* r = requests_.Find(id, epoch);
    if (r == nullptr) {
      ended = true;
    } else {
      if (opened.ok()) r->reply.set_transport_descriptor(*opened);
      HandleLocked(id, *r, {opened.ok() ? E::kOpened : E::kOpenFailed, opened.status()}, &retries);
    }
  }
  // Not under mu_: the cancel tells the sender through the receiver's sink, which takes mu_.
  if (ended && opened.ok()) receiver_->Cancel(id, CancelledError("request ended"));
  for (auto& fn : retries) fn();
}

void DecodeNode::OnLayerLanded(uint64_t id, Epoch epoch, int layer) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    Request* r = requests_.Find(id, epoch);
    if (r != nullptr && r->first_layer_at == 0) r->first_layer_at = Clock::Real().NowNanos();
  }
  if (direct_) return;
  auto it = uploads_.find(id);
  if (it == uploads_.end() || it->second.epoch != epoch) return;
  Upload& u = it->second;
  const kv_cache::KvLayout& pool_layout = engine_->device_kv().layout();
  auto* pool = static_cast<std::byte*>(engine_->device_kv().pool().data);
  Status status = node::EnqueueLayerToDevice(*upload_queue_, engine_->backend().device(),
                                             {landing_->base(), &landing_->layout(), u.landing},
                                             {pool, &pool_layout, u.device}, layer);
  StatusOr<std::shared_ptr<runtime::CopyFence>> fence =
      status.ok() ? upload_queue_->Mark() : StatusOr<std::shared_ptr<runtime::CopyFence>>(status);
  if (!fence.ok()) {
    uploads_.erase(it);
    Handle(id, epoch, {E::kKvFailed, fence.status().WithContext("uploading landed KV")});
    return;
  }
  u.fences.push_back(*fence);
}

void DecodeNode::OnSessionDone(uint64_t id, Epoch epoch, const Status& status) {
  sessions_.store(static_cast<int64_t>(receiver_->num_sessions()));
  if (!status.ok()) {
    if (auto u = uploads_.find(id); u != uploads_.end() && u->second.epoch == epoch) uploads_.erase(u);
    return Handle(id, epoch, {E::kKvFailed, status});
  }
  if (direct_) return OnKvLanded(id, epoch);
  auto u = uploads_.find(id);
  if (u != uploads_.end() && u->second.epoch == epoch) u->second.session_done = true;
  PollUploads();
}

void DecodeNode::PollUploads() {
  // Staged: a transfer has landed once its session is done and its uploads have run.
  for (auto it = uploads_.begin(); it != uploads_.end();) {
    Upload& u = it->second;
    while (!u.fences.empty() && u.fences.front()->Ready()) u.fences.pop_front();
    if (!u.session_done || !u.fences.empty()) {
      ++it;
      continue;
    }
    const uint64_t id = it->first;
    const Epoch epoch = u.epoch;
    it = uploads_.erase(it);
    OnKvLanded(id, epoch);
  }
}

void DecodeNode::OnKvLanded(uint64_t id, Epoch epoch) {
  Retries retries;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Request* r = requests_.Find(id, epoch);
    if (r == nullptr) return;
    if (r->first_layer_at != 0) {
      host_.metrics().kv_transfer_seconds->Observe(static_cast<double>(Clock::Real().NowNanos() - r->first_layer_at) *
                                                   1e-9);
    }
    HandleLocked(id, *r, {E::kKvLanded, Status::Ok()}, &retries);
  }
  for (auto& fn : retries) fn();
}

}  // namespace tandem::decode_node
