#include "kv_transfer/local/local_transport.h"

#include <cstring>
#include <string>

#include "kv_transfer/wire.h"

namespace tandem::kv_transfer {
namespace {

constexpr uint32_t kLocalMagic = 0x4c564b54;  // "TKVL"
constexpr uint16_t kLocalVersion = 1;
constexpr uint8_t kKindAddress = 1;
constexpr uint8_t kKindRegion = 2;

}  // namespace

uint64_t LocalFabric::AddTransport() {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t id = next_transport_++;
  regions_[id];
  return id;
}

void LocalFabric::RemoveTransport(uint64_t transport) {
  std::lock_guard<std::mutex> lock(mu_);
  regions_.erase(transport);
}

bool LocalFabric::HasTransport(uint64_t transport) {
  std::lock_guard<std::mutex> lock(mu_);
  return regions_.count(transport) > 0;
}

void LocalFabric::AddRegion(uint64_t transport, RegionId region, Span span) {
  std::lock_guard<std::mutex> lock(mu_);
  regions_[transport][region] = span;
}

void LocalFabric::RemoveRegion(uint64_t transport, RegionId region) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = regions_.find(transport);
  if (it != regions_.end()) it->second.erase(region);
}

bool LocalFabric::FindRegion(uint64_t transport, RegionId region, Span* span) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = regions_.find(transport);
  if (it == regions_.end()) return false;
  auto r = it->second.find(region);
  if (r == it->second.end()) return false;
  *span = r->second;
  return true;
}

Status LocalFabric::CopyTo(uint64_t transport, RegionId region, uint64_t offset,
                           const uint8_t* src, uint64_t length) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = regions_.find(transport);
  if (it == regions_.end()) return UnavailableError("local peer is gone");
  auto r = it->second.find(region);
  if (r == it->second.end()) return NotFoundError("remote region was unregistered");
  if (offset > r->second.length || length > r->second.length - offset) {
    return InvalidArgumentError("write leaves the remote region");
  }
  std::memcpy(r->second.addr + offset, src, length);
  return Status::Ok();
}

LocalTransport::LocalTransport(LocalFabric& fabric) : fabric_(fabric), self_(fabric.AddTransport()) {}

LocalTransport::~LocalTransport() { fabric_.RemoveTransport(self_); }

TransportCapabilities LocalTransport::Capabilities() const {
  return TransportCapabilities{.backend = "local", .device_memory = false, .one_sided = true};
}

std::string LocalTransport::WorkerAddress() const {
  ByteWriter w;
  WriteHeader(w, {kLocalMagic, kLocalVersion, kKindAddress});
  w.U64(self_);
  return w.Take();
}

StatusOr<RegisteredRegion> LocalTransport::RegisterMemory(void* addr, size_t length,
                                                          MemoryKind kind) {
  if (addr == nullptr || length == 0) return InvalidArgumentError("empty memory region");
  if (kind != MemoryKind::kHost) return InvalidArgumentError("local transport: host memory only");
  RegionId id = next_handle_++;
  LocalFabric::Span span{static_cast<uint8_t*>(addr), length};
  local_[id] = span;
  fabric_.AddRegion(self_, id, span);
  ByteWriter w;
  WriteHeader(w, {kLocalMagic, kLocalVersion, kKindRegion});
  w.U64(self_);
  w.U64(id);
  w.U64(length);
  return RegisteredRegion{id, w.Take()};
}

Status LocalTransport::UnregisterMemory(RegionId region) {
  if (local_.erase(region) == 0) return NotFoundError("unknown local region");
  fabric_.RemoveRegion(self_, region);
  return Status::Ok();
}

StatusOr<PeerId> LocalTransport::Connect(std::string_view worker_address) {
  ByteReader r(worker_address);
  WireHeader h;
  TANDEM_RETURN_IF_ERROR(ReadHeader(r, kLocalMagic, kLocalVersion, &h).WithContext("worker address"));
  if (h.kind != kKindAddress) return InvalidArgumentError("not a local worker address");
  uint64_t transport = 0;
  TANDEM_RETURN_IF_ERROR(r.U64(&transport, "transport id"));
  TANDEM_RETURN_IF_ERROR(r.ExpectEnd());
  if (!fabric_.HasTransport(transport)) return UnavailableError("local peer not found");
  PeerId id = next_handle_++;
  peers_[id] = transport;
  return id;
}

Status LocalTransport::Disconnect(PeerId peer) {
  if (peers_.erase(peer) == 0) return NotFoundError("unknown peer");
  for (auto it = remotes_.begin(); it != remotes_.end();) {
    it = it->second.peer == peer ? remotes_.erase(it) : std::next(it);
  }
  for (Batch& b : pending_) {
    if (b.peer == peer && b.forced.ok()) b.forced = UnavailableError("peer disconnected");
  }
  return Status::Ok();
}

StatusOr<RemoteRegionId> LocalTransport::LoadRemoteRegion(PeerId peer, std::string_view descriptor) {
  auto p = peers_.find(peer);
  if (p == peers_.end()) return NotFoundError("unknown peer");
  ByteReader r(descriptor);
  WireHeader h;
  TANDEM_RETURN_IF_ERROR(ReadHeader(r, kLocalMagic, kLocalVersion, &h).WithContext("region descriptor"));
  if (h.kind != kKindRegion) return InvalidArgumentError("not a local region descriptor");
  uint64_t owner = 0, region = 0, length = 0;
  TANDEM_RETURN_IF_ERROR(r.U64(&owner, "owner"));
  TANDEM_RETURN_IF_ERROR(r.U64(&region, "region"));
  TANDEM_RETURN_IF_ERROR(r.U64(&length, "length"));
  TANDEM_RETURN_IF_ERROR(r.ExpectEnd());
  if (owner != p->second) return InvalidArgumentError("descriptor belongs to another peer");
  LocalFabric::Span span;
  if (!fabric_.FindRegion(owner, region, &span) || span.length != length) {
    return NotFoundError("remote region is not registered");
  }
  RemoteRegionId id = next_handle_++;
  remotes_[id] = Remote{peer, region, length};
  return id;
}

Status LocalTransport::UnloadRemoteRegion(RemoteRegionId remote) {
  if (remotes_.erase(remote) == 0) return NotFoundError("unknown remote region");
  return Status::Ok();
}

StatusOr<TransferId> LocalTransport::PostWrites(PeerId peer, std::span<const WriteOp> ops) {
  if (peers_.count(peer) == 0) return NotFoundError("unknown peer");
  uint64_t bytes = 0;
  for (const WriteOp& op : ops) {
    auto l = local_.find(op.local_region);
    if (l == local_.end()) return InvalidArgumentError("unknown local region in write");
    auto rm = remotes_.find(op.remote_region);
    if (rm == remotes_.end() || rm->second.peer != peer) {
      return InvalidArgumentError("unknown remote region in write");
    }
    TANDEM_RETURN_IF_ERROR(CheckWriteOpBounds(op, l->second.length, rm->second.length));
    bytes += op.length;
  }
  TransferId id = next_handle_++;
  pending_.push_back(Batch{id, peer, std::vector<WriteOp>(ops.begin(), ops.end()), bytes, {}});
  return id;
}

StatusOr<TransferId> LocalTransport::PostReceives(PeerId, std::span<const WriteOp>) {
  return FailedPreconditionError("local transport is one-sided: no receives to post");
}

void LocalTransport::Cancel(TransferId id) {
  for (Batch& b : pending_) {
    if (b.id == id && b.forced.ok()) b.forced = CancelledError("transfer cancelled");
  }
}

Status LocalTransport::Execute(const Batch& batch) {
  if (!batch.forced.ok()) return batch.forced;
  auto p = peers_.find(batch.peer);
  if (p == peers_.end()) return UnavailableError("peer disconnected");
  for (const WriteOp& op : batch.ops) {
    auto rm = remotes_.find(op.remote_region);
    auto l = local_.find(op.local_region);
    if (rm == remotes_.end() || l == local_.end()) return NotFoundError("region unloaded mid-transfer");
    TANDEM_RETURN_IF_ERROR(fabric_.CopyTo(p->second, rm->second.region, op.remote_offset,
                                          l->second.addr + op.local_offset, op.length));
  }
  return Status::Ok();
}

size_t LocalTransport::Poll(std::vector<TransferEvent>* events) {
  std::vector<Batch> batches;
  batches.swap(pending_);
  for (const Batch& b : batches) events->push_back(TransferEvent{b.id, Execute(b), b.bytes});
  return batches.size();
}

}  // namespace tandem::kv_transfer
