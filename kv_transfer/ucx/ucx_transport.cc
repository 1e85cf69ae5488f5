#include "kv_transfer/ucx/ucx_transport.h"

#include <fmt/format.h>
#include <ucp/api/ucp.h>

#include <utility>

#include "kv_transfer/messages.h"
#include "kv_transfer/wire.h"
#include "kv_transfer/write_op_check.h"

namespace tandem::kv_transfer {
namespace {

constexpr uint32_t kUcxMagic = 0x55564b54;  // "TKVU"
constexpr uint16_t kUcxVersion = 1;
constexpr uint8_t kKindAddress = 1;
constexpr uint8_t kKindRegion = 2;

Status FromUcs(ucs_status_t st, std::string_view what) {
  if (st == UCS_OK) return Status::Ok();
  std::string msg = fmt::format("{}: {}", what, ucs_status_string(st));
  switch (st) {
    case UCS_ERR_CANCELED: return CancelledError(std::move(msg));
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_ENDPOINT_TIMEOUT:
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_REJECTED:
    case UCS_ERR_TIMED_OUT: return UnavailableError(std::move(msg));
    case UCS_ERR_NO_MEMORY:
    case UCS_ERR_NO_RESOURCE: return ResourceExhaustedError(std::move(msg));
    default: return InternalError(std::move(msg));
  }
}

}  // namespace

struct UcxTransport::Impl {
  struct Region {
    ucp_mem_h memh = nullptr;
    uint8_t* addr = nullptr;
    uint64_t length = 0;
  };
  struct Peer {
    ucp_ep_h ep = nullptr;
    ucs_status_t error = UCS_OK;  // set by the error handler
  };
  struct Remote {
    PeerId peer;
    ucp_rkey_h rkey;
    uint64_t addr, length;
  };
  struct Batch {
    int pending = 0;
    ucs_status_t error = UCS_OK;
    bool cancelled = false;
    uint64_t bytes = 0;
  };

  bool peer_error_handling = true;
  ucp_context_h context = nullptr;
  ucp_worker_h worker = nullptr;
  uint64_t next_handle = 1;
  std::map<RegionId, Region> regions;
  std::map<PeerId, std::unique_ptr<Peer>> peers;  // stable addresses for the error handler
  std::map<RemoteRegionId, Remote> remotes;
  std::map<TransferId, std::unique_ptr<Batch>> batches;  // stable addresses for callbacks
  // An endpoint being closed, and the rkeys unpacked on it: destroyed only once
  // the close completed, so no cancelled put still references them.
  struct Closing {
    void* request = nullptr;
    std::vector<ucp_rkey_h> rkeys;
    std::unique_ptr<Peer> peer;  // the error handler's argument stays valid until the close completes
  };
  std::vector<Closing> closing;

  static void OnPeerError(void* arg, ucp_ep_h, ucs_status_t status) { static_cast<Peer*>(arg)->error = status; }
  static void OnOpDone(void* request, ucs_status_t status, void* user_data) {
    auto* batch = static_cast<Batch*>(user_data);
    if (status != UCS_OK && batch->error == UCS_OK) batch->error = status;
    --batch->pending;
    ucp_request_free(request);
  }
  // Tracks one non-blocking call's result in `batch`.
  static void Track(Batch* batch, ucs_status_ptr_t req) {
    if (req == nullptr) return;
    if (UCS_PTR_IS_ERR(req)) {
      if (batch->error == UCS_OK) batch->error = UCS_PTR_STATUS(req);
      return;
    }
    ++batch->pending;
  }
  ucp_request_param_t OpParam(Batch* batch) {
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.cb.send = &OnOpDone;
    p.user_data = batch;
    return p;
  }
  // Force-closes a peer's endpoint (in-flight requests complete with errors) and
  // forgets its remote regions.
  void ClosePeer(PeerId peer, std::unique_ptr<Peer> state) {
    ucp_ep_h ep = state->ep;
    Closing c;
    c.peer = std::move(state);
    for (auto it = remotes.begin(); it != remotes.end();) {
      if (it->second.peer == peer) {
        c.rkeys.push_back(it->second.rkey);
        it = remotes.erase(it);
      } else {
        ++it;
      }
    }
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = UCP_EP_CLOSE_FLAG_FORCE;
    ucs_status_ptr_t req = ucp_ep_close_nbx(ep, &p);
    if (req != nullptr && !UCS_PTR_IS_ERR(req)) {
      c.request = req;
      closing.push_back(std::move(c));
    } else {
      for (ucp_rkey_h rkey : c.rkeys) ucp_rkey_destroy(rkey);
    }
  }
  void ReapClosing() {
    for (auto it = closing.begin(); it != closing.end();) {
      if (ucp_request_check_status(it->request) != UCS_INPROGRESS) {
        ucp_request_free(it->request);
        for (ucp_rkey_h rkey : it->rkeys) ucp_rkey_destroy(rkey);
        it = closing.erase(it);
      } else {
        ++it;
      }
    }
  }
  void ProgressAll() {
    for (int i = 0; i < 1024 && ucp_worker_progress(worker) != 0; ++i) {
    }
  }
};

Status UcxConfig::Validate() const {
  if (transports.find_first_of(" \t\n") != std::string::npos) {
    return InvalidArgumentError("ucx transports: comma-separated list without spaces");
  }
  return Status::Ok();
}

UcxTransport::UcxTransport(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

StatusOr<std::unique_ptr<UcxTransport>> UcxTransport::Create(const UcxConfig& config) {
  TANDEM_RETURN_IF_ERROR(config.Validate());
  auto impl = std::make_unique<Impl>();
  ucp_config_t* ucp_config = nullptr;
  TANDEM_RETURN_IF_ERROR(FromUcs(ucp_config_read(nullptr, nullptr, &ucp_config), "ucp_config_read"));
  ucs_status_t st = UCS_OK;
  if (!config.transports.empty()) st = ucp_config_modify(ucp_config, "TLS", config.transports.c_str());
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_RMA;
  if (st == UCS_OK) st = ucp_init(&params, ucp_config, &impl->context);
  ucp_config_release(ucp_config);
  TANDEM_RETURN_IF_ERROR(FromUcs(st, "ucp_init"));
  std::unique_ptr<UcxTransport> t(new UcxTransport(std::move(impl)));  // owns context from here
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SINGLE;
  TANDEM_RETURN_IF_ERROR(FromUcs(ucp_worker_create(t->impl_->context, &wp, &t->impl_->worker), "ucp_worker_create"));
  ucp_address_t* addr = nullptr;
  size_t addr_len = 0;
  TANDEM_RETURN_IF_ERROR(FromUcs(ucp_worker_get_address(t->impl_->worker, &addr, &addr_len), "ucp_worker_get_address"));
  ByteWriter w;
  WriteHeader(w, {kUcxMagic, kUcxVersion, kKindAddress});
  w.Bytes(std::string_view(reinterpret_cast<const char*>(addr), addr_len));
  ucp_worker_release_address(t->impl_->worker, addr);
  t->address_ = w.Take();
  t->impl_->peer_error_handling = config.peer_error_handling;
  return t;
}

UcxTransport::~UcxTransport() {
  Impl& m = *impl_;
  if (m.worker != nullptr) {
    for (auto& [id, peer] : m.peers) m.ClosePeer(id, std::move(peer));
    m.peers.clear();
    for (int i = 0; i < 100000 && (!m.closing.empty() || ucp_worker_progress(m.worker) != 0); ++i) {
      ucp_worker_progress(m.worker);
      m.ReapClosing();
    }
    for (const Impl::Closing& c : m.closing) {  // never completed: leak the request, keep going
      for (ucp_rkey_h rkey : c.rkeys) ucp_rkey_destroy(rkey);
    }
    for (auto& [id, remote] : m.remotes) ucp_rkey_destroy(remote.rkey);  // none left: all peers closed
    for (auto& [id, region] : m.regions) ucp_mem_unmap(m.context, region.memh);
    ucp_worker_destroy(m.worker);
  }
  if (m.context != nullptr) ucp_cleanup(m.context);
}

TransportCapabilities UcxTransport::Capabilities() const {
  return TransportCapabilities{.backend = "ucx", .device_memory = false, .one_sided = true, .progress_driven = true};
}

StatusOr<RegisteredRegion> UcxTransport::RegisterMemory(void* addr, size_t length, MemoryKind kind) {
  if (addr == nullptr || length == 0) return InvalidArgumentError("empty memory region");
  if (kind != MemoryKind::kHost) {
    return InvalidArgumentError("ucx transport: host memory only (this UCX has no CUDA support)");
  }
  Impl& m = *impl_;
  ucp_mem_map_params_t mp{};
  mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
  mp.address = addr;
  mp.length = length;
  ucp_mem_h memh = nullptr;
  TANDEM_RETURN_IF_ERROR(FromUcs(ucp_mem_map(m.context, &mp, &memh), "ucp_mem_map"));
  void* rkey = nullptr;
  size_t rkey_len = 0;
  ucs_status_t st = ucp_rkey_pack(m.context, memh, &rkey, &rkey_len);
  if (st != UCS_OK) {
    ucp_mem_unmap(m.context, memh);
    return FromUcs(st, "ucp_rkey_pack");
  }
  ByteWriter w;
  WriteHeader(w, {kUcxMagic, kUcxVersion, kKindRegion});
  w.U64(reinterpret_cast<uint64_t>(addr));
  w.U64(length);
  w.Bytes(std::string_view(static_cast<const char*>(rkey), rkey_len));
  ucp_rkey_buffer_release(rkey);
  RegionId id = m.next_handle++;
  m.regions[id] = Impl::Region{memh, static_cast<uint8_t*>(addr), length};
  return RegisteredRegion{id, w.Take()};
}

Status UcxTransport::UnregisterMemory(RegionId region) {
  Impl& m = *impl_;
  auto it = m.regions.find(region);
  if (it == m.regions.end()) return NotFoundError("unknown local region");
  ucs_status_t st = ucp_mem_unmap(m.context, it->second.memh);
  m.regions.erase(it);
  return FromUcs(st, "ucp_mem_unmap");
}

StatusOr<PeerId> UcxTransport::Connect(std::string_view worker_address) {
  ByteReader r(worker_address);
  WireHeader h;
  TANDEM_RETURN_IF_ERROR(ReadHeader(r, kUcxMagic, kUcxVersion, &h).WithContext("worker address"));
  if (h.kind != kKindAddress) return InvalidArgumentError("not a ucx worker address");
  std::string raw;
  TANDEM_RETURN_IF_ERROR(r.Bytes(&raw, kMaxAddressBytes, "ucx address"));
  TANDEM_RETURN_IF_ERROR(r.ExpectEnd());
  if (raw.empty()) return InvalidArgumentError("empty ucx address");
  Impl& m = *impl_;
  auto peer = std::make_unique<Impl::Peer>();
  ucp_ep_params_t ep{};
  ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
  ep.address = reinterpret_cast<const ucp_address_t*>(raw.data());
  if (m.peer_error_handling) {
    ep.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    ep.err_handler.cb = &Impl::OnPeerError;
    ep.err_handler.arg = peer.get();
  }
  ucs_status_t st = ucp_ep_create(m.worker, &ep, &peer->ep);
  if (st != UCS_OK) return UnavailableError(fmt::format("ucp_ep_create: {}", ucs_status_string(st)));
  PeerId id = m.next_handle++;
  m.peers[id] = std::move(peer);
  return id;
}

Status UcxTransport::Disconnect(PeerId peer) {
  Impl& m = *impl_;
  auto it = m.peers.find(peer);
  if (it == m.peers.end()) return NotFoundError("unknown peer");
  m.ClosePeer(peer, std::move(it->second));  // force: in-flight requests complete with errors
  m.peers.erase(it);
  return Status::Ok();
}

StatusOr<RemoteRegionId> UcxTransport::LoadRemoteRegion(PeerId peer, std::string_view descriptor) {
  Impl& m = *impl_;
  auto p = m.peers.find(peer);
  if (p == m.peers.end()) return NotFoundError("unknown peer");
  ByteReader r(descriptor);
  WireHeader h;
  TANDEM_RETURN_IF_ERROR(ReadHeader(r, kUcxMagic, kUcxVersion, &h).WithContext("region descriptor"));
  if (h.kind != kKindRegion) return InvalidArgumentError("not a ucx region descriptor");
  uint64_t addr = 0, length = 0;
  std::string rkey_buf;
  TANDEM_RETURN_IF_ERROR(r.U64(&addr, "address"));
  TANDEM_RETURN_IF_ERROR(r.U64(&length, "length"));
  TANDEM_RETURN_IF_ERROR(r.Bytes(&rkey_buf, kMaxAddressBytes, "rkey"));
  TANDEM_RETURN_IF_ERROR(r.ExpectEnd());
  if (length == 0 || addr + length < addr || rkey_buf.empty()) {
    return InvalidArgumentError("bad ucx region descriptor");
  }
  ucp_rkey_h rkey = nullptr;
  TANDEM_RETURN_IF_ERROR(FromUcs(ucp_ep_rkey_unpack(p->second->ep, rkey_buf.data(), &rkey), "ucp_ep_rkey_unpack"));
  RemoteRegionId id = m.next_handle++;
  m.remotes[id] = Impl::Remote{peer, rkey, addr, length};
  return id;
}

Status UcxTransport::UnloadRemoteRegion(RemoteRegionId remote) {
  Impl& m = *impl_;
  auto it = m.remotes.find(remote);
  if (it == m.remotes.end()) return NotFoundError("unknown remote region");
  ucp_rkey_destroy(it->second.rkey);
  m.remotes.erase(it);
  return Status::Ok();
}

StatusOr<TransferId> UcxTransport::PostWrites(PeerId peer, std::span<const WriteOp> ops) {
  Impl& m = *impl_;
  auto p = m.peers.find(peer);
  if (p == m.peers.end()) return NotFoundError("unknown peer");
  if (p->second->error != UCS_OK) return FromUcs(p->second->error, "peer failed");
  uint64_t bytes = 0;
  for (const WriteOp& op : ops) {
    TANDEM_RETURN_IF_ERROR(ResolveWriteOp(op, peer, m.regions, m.remotes).status());
    bytes += op.length;
  }
  TransferId id = m.next_handle++;
  auto batch = std::make_unique<Impl::Batch>();
  batch->bytes = bytes;
  Impl::Batch* b = batch.get();
  m.batches[id] = std::move(batch);
  for (const WriteOp& op : ops) {
    const Impl::Region& l = m.regions.at(op.local_region);
    const Impl::Remote& rm = m.remotes.at(op.remote_region);
    ucp_request_param_t param = m.OpParam(b);
    param.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
    param.memh = l.memh;
    Impl::Track(b, ucp_put_nbx(p->second->ep, l.addr + op.local_offset, op.length, rm.addr + op.remote_offset, rm.rkey,
                               &param));
    if (b->error != UCS_OK) break;
  }
  if (b->error == UCS_OK) {
    // Puts complete locally; the flush completes once they are visible remotely.
    ucp_request_param_t param = m.OpParam(b);
    Impl::Track(b, ucp_ep_flush_nbx(p->second->ep, &param));
  }
  return id;
}

StatusOr<TransferId> UcxTransport::PostReceives(PeerId, std::span<const WriteOp>) {
  return FailedPreconditionError("ucx transport is one-sided: no receives to post");
}

void UcxTransport::Cancel(TransferId id) {
  auto it = impl_->batches.find(id);
  if (it != impl_->batches.end()) it->second->cancelled = true;
}

bool UcxTransport::PeerGone(PeerId peer) const {
  auto it = impl_->peers.find(peer);
  return it != impl_->peers.end() && it->second->error != UCS_OK;
}

size_t UcxTransport::Poll(std::vector<TransferEvent>* events) {
  Impl& m = *impl_;
  m.ProgressAll();
  m.ReapClosing();
  size_t before = events->size();
  for (auto it = m.batches.begin(); it != m.batches.end();) {
    Impl::Batch& b = *it->second;
    if (b.pending > 0) {
      ++it;
      continue;
    }
    Status st = FromUcs(b.error, "ucx put");
    if (b.cancelled && st.ok()) st = CancelledError("transfer cancelled");
    events->push_back(TransferEvent{it->first, std::move(st), b.bytes});
    it = m.batches.erase(it);
  }
  return events->size() - before;
}

}  // namespace tandem::kv_transfer
