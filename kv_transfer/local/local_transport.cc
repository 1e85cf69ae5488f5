#include "kv_transfer/local/local_transport.h"

#include <string>

#include "kv_transfer/wire.h"
#include "kv_transfer/write_op_check.h"

namespace tandem::kv_transfer {
namespace {

constexpr uint32_t kLocalMagic = 0x4c564b54;  // "TKVL"
constexpr uint16_t kLocalVersion = 1;
constexpr uint8_t kKindAddress = 1;
constexpr uint8_t kKindRegion = 2;
constexpr uint8_t kKindToken = 3;

}  // namespace

LocalTransport::LocalTransport(LocalFabric& fabric, bool two_sided)
    : fabric_(fabric), two_sided_(two_sided), self_(fabric.AddTransport()) {}

LocalTransport::~LocalTransport() { fabric_.RemoveTransport(self_); }

TransportCapabilities LocalTransport::Capabilities() const {
  return TransportCapabilities{.backend = "local", .device_memory = false, .one_sided = !two_sided_};
}

std::string LocalTransport::WorkerAddress() const {
  ByteWriter w;
  WriteHeader(w, {kLocalMagic, kLocalVersion, kKindAddress});
  w.U64(self_);
  return w.Take();
}

StatusOr<RegisteredRegion> LocalTransport::RegisterMemory(void* addr, size_t length, MemoryKind kind) {
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
  peers_[id] = Peer{transport, two_sided_ ? fabric_.OpenChannel(self_, transport) : 0, false};
  return id;
}

StatusOr<std::string> LocalTransport::ConnectionToken(PeerId peer) const {
  if (!two_sided_) return Transport::ConnectionToken(peer);
  auto p = peers_.find(peer);
  if (p == peers_.end() || p->second.accepted) return NotFoundError("no connection of this end to that peer");
  ByteWriter w;
  WriteHeader(w, {kLocalMagic, kLocalVersion, kKindToken});
  w.U64(p->second.channel);
  w.U64(self_);
  w.U64(p->second.transport);
  return w.Take();
}

StatusOr<PeerId> LocalTransport::Accept(std::string_view token) {
  if (!two_sided_) return Transport::Accept(token);
  ByteReader r(token);
  WireHeader h;
  TANDEM_RETURN_IF_ERROR(ReadHeader(r, kLocalMagic, kLocalVersion, &h).WithContext("connection token"));
  if (h.kind != kKindToken) return InvalidArgumentError("not a local connection token");
  uint64_t channel = 0, writer = 0, target = 0;
  TANDEM_RETURN_IF_ERROR(r.U64(&channel, "channel"));
  TANDEM_RETURN_IF_ERROR(r.U64(&writer, "writer"));
  TANDEM_RETURN_IF_ERROR(r.U64(&target, "target"));
  TANDEM_RETURN_IF_ERROR(r.ExpectEnd());
  if (target != self_) return InvalidArgumentError("connection token for another transport");
  if (!fabric_.ChannelJoins(channel, writer, self_)) return UnavailableError("local connection is closed");
  PeerId id = next_handle_++;
  peers_[id] = Peer{writer, channel, true};
  return id;
}

Status LocalTransport::Disconnect(PeerId peer) {
  auto it = peers_.find(peer);
  if (it == peers_.end()) return NotFoundError("unknown peer");
  if (it->second.channel != 0) fabric_.CloseChannel(it->second.channel, UnavailableError("peer disconnected"));
  peers_.erase(it);
  for (auto it = remotes_.begin(); it != remotes_.end();) {
    it = it->second.peer == peer ? remotes_.erase(it) : std::next(it);
  }
  for (Batch& b : pending_) {
    if (b.peer == peer && b.forced.ok()) b.forced = UnavailableError("peer disconnected");
  }
  return Status::Ok();
}

bool LocalTransport::PeerGone(PeerId peer) const {
  auto it = peers_.find(peer);
  return it != peers_.end() && !fabric_.HasTransport(it->second.transport);
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
  if (owner != p->second.transport) return InvalidArgumentError("descriptor belongs to another peer");
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
  auto p = peers_.find(peer);
  if (p == peers_.end()) return NotFoundError("unknown peer");
  if (p->second.accepted) return FailedPreconditionError("an accepted connection only receives");
  uint64_t bytes = 0;
  for (const WriteOp& op : ops) {
    TANDEM_RETURN_IF_ERROR(ResolveWriteOp(op, peer, local_, remotes_).status());
    bytes += op.length;
  }
  TransferId id = next_handle_++;
  if (two_sided_) {
    std::vector<LocalFabric::Span> source;
    for (const WriteOp& op : ops) source.push_back({local_.at(op.local_region).addr + op.local_offset, op.length});
    channel_batches_[id] = ChannelBatch{bytes, false};
    fabric_.PostSend(p->second.channel, id, std::move(source));
    return id;
  }
  pending_.push_back(Batch{id, peer, std::vector<WriteOp>(ops.begin(), ops.end()), bytes, {}});
  return id;
}

StatusOr<TransferId> LocalTransport::PostReceives(PeerId peer, std::span<const WriteOp> ops) {
  if (!two_sided_) return FailedPreconditionError("local transport is one-sided: no receives to post");
  auto p = peers_.find(peer);
  if (p == peers_.end()) return NotFoundError("unknown peer");
  if (!p->second.accepted) return FailedPreconditionError("receives are posted on an accepted connection");
  std::vector<LocalFabric::Landing> landing;
  uint64_t bytes = 0;
  for (const WriteOp& op : ops) {
    if (op.local_region != kInvalidHandle) {
      auto l = local_.find(op.local_region);
      if (l == local_.end()) return InvalidArgumentError("unknown local region in receive");
      TANDEM_RETURN_IF_ERROR(CheckRange(op.local_offset, op.length, l->second.length, "local"));
    } else if (op.length == 0) {
      return InvalidArgumentError("empty discard");
    }
    landing.push_back({op.local_region, op.local_offset, op.length});
    bytes += op.length;
  }
  TransferId id = next_handle_++;
  channel_batches_[id] = ChannelBatch{bytes, false};
  fabric_.PostReceive(p->second.channel, id, std::move(landing));
  return id;
}

void LocalTransport::Cancel(TransferId id) {
  auto c = channel_batches_.find(id);
  if (c != channel_batches_.end()) c->second.cancelled = true;  // cannot be recalled: it still pairs up
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
    TANDEM_RETURN_IF_ERROR(fabric_.CopyTo(p->second.transport, rm->second.region, op.remote_offset,
                                          l->second.addr + op.local_offset, op.length));
  }
  return Status::Ok();
}

size_t LocalTransport::Poll(std::vector<TransferEvent>* events) {
  size_t before = events->size();
  std::vector<Batch> batches;
  batches.swap(pending_);
  for (const Batch& b : batches) events->push_back(TransferEvent{b.id, Execute(b), b.bytes});
  if (two_sided_) {
    LocalFabric::Finished finished;
    fabric_.Progress(self_, &finished);
    for (auto& [id, st] : finished) {
      auto c = channel_batches_.find(id);
      if (c == channel_batches_.end()) continue;
      if (st.ok() && c->second.cancelled) st = CancelledError("transfer cancelled (it had been posted and completed)");
      events->push_back(TransferEvent{id, std::move(st), c->second.bytes});
      channel_batches_.erase(c);
    }
  }
  return events->size() - before;
}

}  // namespace tandem::kv_transfer
