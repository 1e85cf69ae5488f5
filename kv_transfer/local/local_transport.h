// LocalTransport: the `local` backend. Peers live in the same process and are
// found through a LocalFabric; writes are memcpy, executed in Poll (so
// completion is asynchronous, like a real network). Used by tests and by a
// colocated prefill+decode process.
//
// Thread rule: each LocalTransport is owned by one thread (Transport contract).
// LocalFabric is thread-safe, so two transports on different threads may talk;
// a write's bounds are checked against the target's live registrations under
// the fabric lock, so unregistered memory is never written.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "kv_transfer/transport.h"

namespace tandem::kv_transfer {

// The "network" shared by LocalTransports of one process. Must outlive them.
class LocalFabric {
 public:
  struct Span {
    uint8_t* addr = nullptr;
    uint64_t length = 0;
  };
  // Thread-safe. Returns a fresh transport id (> 0).
  uint64_t AddTransport();
  void RemoveTransport(uint64_t transport);
  bool HasTransport(uint64_t transport);
  void AddRegion(uint64_t transport, RegionId region, Span span);
  void RemoveRegion(uint64_t transport, RegionId region);
  // Looks up a live region (false when the transport or region is gone).
  bool FindRegion(uint64_t transport, RegionId region, Span* span);
  // Copies into a live target region under the lock. NotFound when the region is
  // gone, InvalidArgument when the range leaves it.
  Status CopyTo(uint64_t transport, RegionId region, uint64_t offset, const uint8_t* src,
                uint64_t length);

 private:
  std::mutex mu_;
  uint64_t next_transport_ = 1;
  std::map<uint64_t, std::map<RegionId, Span>> regions_;  // guarded by mu_
};

class LocalTransport final : public Transport {
 public:
  explicit LocalTransport(LocalFabric& fabric);
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
  void Cancel(TransferId id) override;
  size_t Poll(std::vector<TransferEvent>* events) override;

 private:
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
  Status Execute(const Batch& batch);

  LocalFabric& fabric_;
  uint64_t self_;
  uint64_t next_handle_ = 1;
  std::map<RegionId, LocalFabric::Span> local_;
  std::map<PeerId, uint64_t> peers_;  // peer -> remote transport id
  std::map<RemoteRegionId, Remote> remotes_;
  std::vector<Batch> pending_;
};

}  // namespace tandem::kv_transfer
