// LocalTransport: the `local` backend. Peers live in the same process and are
// found through a LocalFabric; writes are memcpy, executed in Poll (so
// completion is asynchronous, like a real network). Used by tests and by a
// colocated prefill+decode process. With `two_sided` it behaves like the nccl
// backend without a GPU: Connect opens a channel, the target Accepts its
// ConnectionToken and posts receive batches, and the k-th write batch lands in
// the k-th receive batch (bytes concatenated in op order); this is how the
// two-sided session protocol is tested on any machine.
//
// Thread rule: each LocalTransport is owned by one thread (Transport contract).
// LocalFabric is thread-safe, so two transports on different threads may talk;
// a write's bounds are checked against the target's live registrations under
// the fabric lock, so unregistered memory is never written.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "kv_transfer/local/local_fabric.h"
#include "kv_transfer/transport.h"

namespace tandem::kv_transfer {

class LocalTransport final : public Transport {
 public:
  explicit LocalTransport(LocalFabric& fabric, bool two_sided = false);
  ~LocalTransport() override;
  LocalTransport(const LocalTransport&) = delete;
  LocalTransport& operator=(const LocalTransport&) = delete;

  TransportCapabilities Capabilities() const override;
  std::string WorkerAddress() const override;
  StatusOr<RegisteredRegion> RegisterMemory(void* addr, size_t length, MemoryKind kind) override;
  Status UnregisterMemory(RegionId region) override;
  StatusOr<PeerId> Connect(std::string_view worker_address) override;
  Status Disconnect(PeerId peer) override;
  StatusOr<RemoteRegionId> LoadRemoteRegion(PeerId peer, std::string_view descriptor) override;
  Status UnloadRemoteRegion(RemoteRegionId remote) override;
  StatusOr<TransferId> PostWrites(PeerId peer, std::span<const WriteOp> ops) override;
  StatusOr<TransferId> PostReceives(PeerId peer, std::span<const WriteOp> ops) override;
  StatusOr<std::string> ConnectionToken(PeerId peer) const override;
  StatusOr<PeerId> Accept(std::string_view token) override;
  void Cancel(TransferId id) override;
  size_t Poll(std::vector<TransferEvent>* events) override;
  // The peer's transport was destroyed (left the fabric).
  bool PeerGone(PeerId peer) const override;

 private:
  struct Peer {
    uint64_t transport = 0;  // the other end's transport id
    uint64_t channel = 0;    // two-sided: the channel (0: one-sided)
    bool accepted = false;   // two-sided: this end is the target
  };
  struct Remote {
    PeerId peer;
    RegionId region;  // the id in the owner transport
    uint64_t length;
  };
  struct Batch {
    TransferId id;
    PeerId peer;
    std::vector<WriteOp> ops;
    uint64_t bytes;
    Status forced;  // non-OK: end with this status instead of copying
  };
  struct ChannelBatch {  // two-sided, until the fabric reports it finished
    uint64_t bytes;
    bool cancelled;
  };
  Status Execute(const Batch& batch);

  LocalFabric& fabric_;
  bool two_sided_;
  uint64_t self_;
  uint64_t next_handle_ = 1;
  std::map<RegionId, LocalFabric::Span> local_;
  std::map<PeerId, Peer> peers_;
  std::map<RemoteRegionId, Remote> remotes_;
  std::vector<Batch> pending_;
  std::map<TransferId, ChannelBatch> channel_batches_;
};

}  // namespace tandem::kv_transfer
