#include "kv_transfer/nccl/nccl_transport.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <nccl.h>

#include <cstring>
#include <map>
#include <random>
#include <utility>

#include "common/cuda/cuda_status.h"
#include "kv_transfer/nccl/nccl_connection.h"
#include "kv_transfer/nccl/nccl_wire.h"
#include "kv_transfer/peer_process.h"
#include "kv_transfer/write_op_check.h"

namespace tandem::kv_transfer {

struct NcclTransport::Impl {
  struct Region {
    std::byte* addr = nullptr;
    uint64_t length = 0;
  };
  struct Peer {
    std::unique_ptr<NcclConnection> conn;
    bool accepted = false;  // rank 1: receives only
    uint64_t peer_nonce = 0;
    std::string token;  // rank 0: what the target Accepts
  };
  struct Remote {
    PeerId peer;
    uint64_t length;
  };

  NcclConfig config;
  ProcessIdentity self;
  uint64_t nonce = 0;
  std::string device_uuid;
  std::string address;
  uint64_t next_handle = 1;
  std::map<RegionId, Region> regions;
  std::map<PeerId, Peer> peers;
  std::map<RemoteRegionId, Remote> remotes;
  std::map<TransferId, NcclConnection*> owners;          // batch -> its connection, until its event
  std::vector<std::unique_ptr<NcclConnection>> closing;  // disconnected, abort in progress
  Status health;  // sticky: from connections destroyed after an abort overran or CUDA failed

  bool SameGpu(const ProcessIdentity& process, const std::string& uuid) const {
    return self.SameHost(process) && uuid == device_uuid;
  }
  StatusOr<PeerId> AddConnection(int rank, const ncclUniqueId& id, const ProcessIdentity& peer_process, Peer peer) {
    TANDEM_ASSIGN_OR_RETURN(ProcessWatch watch, ProcessWatch::Open(self, peer_process));
    TANDEM_ASSIGN_OR_RETURN(peer.conn, NcclConnection::Start(config, rank, id, std::move(watch)));
    PeerId pid = next_handle++;
    peers.emplace(pid, std::move(peer));
    return pid;
  }
  StatusOr<TransferId> Post(PeerId peer, bool send, NcclConnection::Batch batch) {
    auto p = peers.find(peer);
    if (p == peers.end()) return NotFoundError("unknown peer");
    if (p->second.accepted == send) {
      return FailedPreconditionError(send ? "an accepted connection only receives"
                                          : "receives are posted on an accepted connection");
    }
    if (p->second.conn->aborting()) return UnavailableError("NCCL connection is aborted");
    batch.id = next_handle++;
    owners[batch.id] = p->second.conn.get();
    TransferId id = batch.id;
    p->second.conn->Post(std::move(batch));
    return id;
  }
};

Status NcclConfig::Validate() const {
  if (device < 0) return InvalidArgumentError("nccl: device must be >= 0");
  if (init_timeout_ms <= 0 || abort_timeout_ms <= 0 || liveness_interval_ms < 0) {
    return InvalidArgumentError("nccl: init_timeout_ms, abort_timeout_ms must be > 0, liveness_interval_ms >= 0");
  }
  if (chunk_bytes == 0) return InvalidArgumentError("nccl: chunk_bytes must be > 0");
  return Status::Ok();
}

NcclTransport::NcclTransport(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

StatusOr<std::unique_ptr<NcclTransport>> NcclTransport::Create(const NcclConfig& config) {
  TANDEM_RETURN_IF_ERROR(config.Validate());
  const int devices = cuda::DeviceCount();
  if (config.device >= devices) {
    return FailedPreconditionError(
        fmt::format("nccl: CUDA device {} is not visible ({} devices)", config.device, devices));
  }
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  TANDEM_ASSIGN_OR_RETURN(impl->self, SelfIdentity());
  std::random_device rd;
  while (impl->nonce == 0) impl->nonce = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  cudaDeviceProp prop;
  TANDEM_RETURN_IF_CUDA_ERROR(cudaGetDeviceProperties(&prop, config.device));
  impl->device_uuid.assign(prop.uuid.bytes, kNcclDeviceUuidBytes);
  impl->address =
      EncodeNcclAddress(NcclAddress{.process = impl->self, .nonce = impl->nonce, .device_uuid = impl->device_uuid});
  return std::unique_ptr<NcclTransport>(new NcclTransport(std::move(impl)));
}

NcclTransport::~NcclTransport() {
  // Each connection's destructor aborts it and waits for the abort.
  impl_->peers.clear();
  impl_->closing.clear();
}

TransportCapabilities NcclTransport::Capabilities() const {
  return TransportCapabilities{.backend = "nccl", .device_memory = true, .one_sided = false};
}

std::string NcclTransport::WorkerAddress() const { return impl_->address; }

StatusOr<RegisteredRegion> NcclTransport::RegisterMemory(void* addr, size_t length, MemoryKind kind) {
  Impl& m = *impl_;
  if (addr == nullptr || length == 0) return InvalidArgumentError("empty memory region");
  if (kind != MemoryKind::kDevice) return InvalidArgumentError("nccl transport: device memory only");
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, addr) != cudaSuccess || attr.type != cudaMemoryTypeDevice ||
      attr.device != m.config.device) {
    cudaGetLastError();
    return InvalidArgumentError(fmt::format("nccl: {} is not device memory of CUDA device {}", addr, m.config.device));
  }
  RegionId id = m.next_handle++;
  m.regions[id] = Impl::Region{static_cast<std::byte*>(addr), length};
  return RegisteredRegion{id, EncodeNcclRegion(NcclRegion{.owner_nonce = m.nonce, .length = length})};
}

Status NcclTransport::UnregisterMemory(RegionId region) {
  if (impl_->regions.erase(region) == 0) return NotFoundError("unknown local region");
  return Status::Ok();
}

StatusOr<PeerId> NcclTransport::Connect(std::string_view worker_address) {
  Impl& m = *impl_;
  TANDEM_ASSIGN_OR_RETURN(NcclAddress peer, DecodeNcclAddress(worker_address));
  if (peer.nonce == m.nonce) return FailedPreconditionError("nccl: cannot connect to itself");
  if (m.SameGpu(peer.process, peer.device_uuid)) {
    return FailedPreconditionError(
        "nccl: the peer uses this process's GPU; NCCL cannot put two ranks on one GPU "
        "(use cuda_ipc)");
  }
  ncclUniqueId id;
  ncclResult_t r = ncclGetUniqueId(&id);
  if (r != ncclSuccess) return UnavailableError(fmt::format("ncclGetUniqueId: {}", ncclGetErrorString(r)));
  Impl::Peer state;
  state.peer_nonce = peer.nonce;
  state.token = EncodeNcclToken(NcclToken{.writer_nonce = m.nonce,
                                          .target_nonce = peer.nonce,
                                          .writer = m.self,
                                          .writer_device_uuid = m.device_uuid,
                                          .unique_id = std::string(id.internal, kNcclUniqueIdBytes),
                                          .chunk_bytes = m.config.chunk_bytes});
  return m.AddConnection(0, id, peer.process, std::move(state));
}

StatusOr<std::string> NcclTransport::ConnectionToken(PeerId peer) const {
  auto p = impl_->peers.find(peer);
  if (p == impl_->peers.end() || p->second.accepted) return NotFoundError("no connection of this end to that peer");
  return p->second.token;
}

StatusOr<PeerId> NcclTransport::Accept(std::string_view token) {
  Impl& m = *impl_;
  TANDEM_ASSIGN_OR_RETURN(NcclToken t, DecodeNcclToken(token));
  if (t.target_nonce != m.nonce) return InvalidArgumentError("nccl: connection token made for another transport");
  if (t.chunk_bytes != m.config.chunk_bytes) {
    return FailedPreconditionError(fmt::format("nccl: the writer cuts batches into {}-byte chunks, this end {}",
                                               t.chunk_bytes, m.config.chunk_bytes));
  }
  if (m.SameGpu(t.writer, t.writer_device_uuid)) {
    return FailedPreconditionError("nccl: the writer uses this process's GPU; NCCL cannot put two ranks on one GPU");
  }
  ncclUniqueId id;
  std::memcpy(id.internal, t.unique_id.data(), kNcclUniqueIdBytes);
  Impl::Peer state;
  state.accepted = true;
  state.peer_nonce = t.writer_nonce;
  return m.AddConnection(1, id, t.writer, std::move(state));
}

Status NcclTransport::Disconnect(PeerId peer) {
  Impl& m = *impl_;
  auto p = m.peers.find(peer);
  if (p == m.peers.end()) return NotFoundError("unknown peer");
  p->second.conn->Abort(UnavailableError("NCCL peer disconnected"));
  m.closing.push_back(std::move(p->second.conn));
  m.peers.erase(p);
  for (auto it = m.remotes.begin(); it != m.remotes.end();) {
    it = it->second.peer == peer ? m.remotes.erase(it) : std::next(it);
  }
  return Status::Ok();
}

StatusOr<RemoteRegionId> NcclTransport::LoadRemoteRegion(PeerId peer, std::string_view descriptor) {
  Impl& m = *impl_;
  auto p = m.peers.find(peer);
  if (p == m.peers.end()) return NotFoundError("unknown peer");
  TANDEM_ASSIGN_OR_RETURN(NcclRegion region, DecodeNcclRegion(descriptor));
  if (region.owner_nonce != p->second.peer_nonce) return InvalidArgumentError("nccl: descriptor of another peer");
  RemoteRegionId id = m.next_handle++;
  m.remotes[id] = Impl::Remote{peer, region.length};
  return id;
}

Status NcclTransport::UnloadRemoteRegion(RemoteRegionId remote) {
  if (impl_->remotes.erase(remote) == 0) return NotFoundError("unknown remote region");
  return Status::Ok();
}

StatusOr<TransferId> NcclTransport::PostWrites(PeerId peer, std::span<const WriteOp> ops) {
  Impl& m = *impl_;
  TANDEM_RETURN_IF_ERROR(m.health);
  if (m.peers.count(peer) == 0) return NotFoundError("unknown peer");
  NcclConnection::Batch batch;
  for (const WriteOp& op : ops) {
    TANDEM_ASSIGN_OR_RETURN(auto regions, ResolveWriteOp(op, peer, m.regions, m.remotes));
    batch.pieces.push_back({regions.local->addr + op.local_offset, op.length});
    batch.bytes += op.length;
  }
  return m.Post(peer, true, std::move(batch));
}

StatusOr<TransferId> NcclTransport::PostReceives(PeerId peer, std::span<const WriteOp> ops) {
  Impl& m = *impl_;
  TANDEM_RETURN_IF_ERROR(m.health);
  if (m.peers.count(peer) == 0) return NotFoundError("unknown peer");
  NcclConnection::Batch batch;
  for (const WriteOp& op : ops) {
    std::byte* dst = nullptr;
    if (op.local_region != kInvalidHandle) {
      auto l = m.regions.find(op.local_region);
      if (l == m.regions.end()) return InvalidArgumentError("unknown local region in receive");
      TANDEM_RETURN_IF_ERROR(CheckRange(op.local_offset, op.length, l->second.length, "local"));
      dst = l->second.addr + op.local_offset;
    } else if (op.length == 0) {
      return InvalidArgumentError("empty discard");
    }
    batch.pieces.push_back({dst, op.length});
    batch.bytes += op.length;
  }
  return m.Post(peer, false, std::move(batch));
}

void NcclTransport::Cancel(TransferId id) {
  auto it = impl_->owners.find(id);
  if (it != impl_->owners.end()) it->second->Cancel(id);
}

size_t NcclTransport::Poll(std::vector<TransferEvent>* events) {
  Impl& m = *impl_;
  size_t before = events->size();
  for (auto& [id, peer] : m.peers) peer.conn->Progress(events);
  for (auto it = m.closing.begin(); it != m.closing.end();) {
    (*it)->Progress(events);
    if (!(*it)->closed()) {
      ++it;
      continue;
    }
    if (m.health.ok() && !(*it)->health().ok()) m.health = (*it)->health();
    it = m.closing.erase(it);
  }
  for (size_t i = before; i < events->size(); ++i) m.owners.erase((*events)[i].id);
  return events->size() - before;
}

Status NcclTransport::Health() const {
  const Impl& m = *impl_;
  if (!m.health.ok()) return m.health;
  for (const auto& [id, peer] : m.peers) {
    if (!peer.conn->health().ok()) return peer.conn->health();
  }
  for (const auto& c : m.closing) {
    if (!c->health().ok()) return c->health();
  }
  return Status::Ok();
}

}  // namespace tandem::kv_transfer
