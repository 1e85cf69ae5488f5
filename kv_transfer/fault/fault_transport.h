// FaultTransport: wraps any Transport and injects failures into data transfers,
// for tests and chaos runs (RELIABILITY.md F4, F5). Faults are counted per
// posted batch (1-based), so "fail every Nth" is deterministic.
//
//   fail   -> the batch is not forwarded; its event carries Unavailable
//   drop   -> the batch is not forwarded and never completes until Cancel
//   delay  -> forwarded; its event is held until `delay_ms` of the Clock passed
//   bytes  -> once more than fail_after_bytes were posted, every later batch fails
//   partition (SetPartitioned) -> new batches are dropped and Connect fails
//
// Thread rule: like every Transport, one owner thread.
#pragma once

#include <atomic>

#include <cstdint>
#include <deque>
#include <map>
#include <memory>

#include "common/base/clock.h"
#include "kv_transfer/transport.h"

namespace tandem::kv_transfer {

struct FaultConfig {
  // Every Nth batch fails at once with Unavailable (0: never). Tune to hit a
  // chosen fraction of requests: each request sends one batch per layer.
  uint64_t fail_every_nth = 0;
  // Every Nth batch is swallowed: no event until Cancel (0: never). Models a
  // silent peer; the session lease must end it.
  uint64_t drop_every_nth = 0;
  // Cancel does not end dropped batches (only Disconnect does): a hung peer
  // whose transport cannot take back a posted put.
  bool cancel_ignored = false;
  // Extra completion latency for forwarded batches, in ms of the given Clock.
  int64_t delay_ms = 0;
  // After this many posted bytes every further batch fails (0: no limit).
  uint64_t fail_after_bytes = 0;

  Status Validate() const;
};

struct FaultStats {
  uint64_t batches_posted = 0;
  uint64_t batches_failed = 0;
  uint64_t batches_dropped = 0;
  uint64_t bytes_posted = 0;
};

class FaultTransport final : public Transport {
 public:
  // REQUIRES: config.Validate() is OK; `clock` outlives this.
  FaultTransport(std::unique_ptr<Transport> inner, const FaultConfig& config, Clock& clock);

  void SetConfig(const FaultConfig& config) { config_ = config; }
  // May be called from any thread (a test cutting and healing the link).
  void SetPartitioned(bool partitioned) { partitioned_ = partitioned; }
  const FaultStats& stats() const { return stats_; }
  Transport& inner() { return *inner_; }

  TransportCapabilities Capabilities() const override;
  std::string WorkerAddress() const override { return inner_->WorkerAddress(); }
  StatusOr<RegisteredRegion> RegisterMemory(void* addr, size_t length, MemoryKind kind) override {
    return inner_->RegisterMemory(addr, length, kind);
  }
  Status UnregisterMemory(RegionId region) override { return inner_->UnregisterMemory(region); }
  StatusOr<PeerId> Connect(std::string_view worker_address) override;
  Status Disconnect(PeerId peer) override;
  StatusOr<RemoteRegionId> LoadRemoteRegion(PeerId peer, std::string_view descriptor) override {
    return inner_->LoadRemoteRegion(peer, descriptor);
  }
  Status UnloadRemoteRegion(RemoteRegionId remote) override { return inner_->UnloadRemoteRegion(remote); }
  StatusOr<TransferId> PostWrites(PeerId peer, std::span<const WriteOp> ops) override;
  // Receives are forwarded untouched (faults apply to writes).
  StatusOr<TransferId> PostReceives(PeerId peer, std::span<const WriteOp> ops) override;
  StatusOr<std::string> ConnectionToken(PeerId peer) const override { return inner_->ConnectionToken(peer); }
  StatusOr<PeerId> Accept(std::string_view token) override { return inner_->Accept(token); }
  void Cancel(TransferId id) override;
  size_t Poll(std::vector<TransferEvent>* events) override;
  Status Health() const override { return inner_->Health(); }
  bool PeerGone(PeerId peer) const override { return inner_->PeerGone(peer); }

 private:
  enum class Fate { kForwarded, kDropped };
  struct Batch {
    Fate fate;
    PeerId peer;
    TransferId inner_id;  // kInvalidHandle unless forwarded
    uint64_t bytes;
  };
  struct Held {
    Nanos release_at;
    TransferEvent event;
  };

  std::unique_ptr<Transport> inner_;
  FaultConfig config_;
  Clock& clock_;
  std::atomic<bool> partitioned_{false};
  FaultStats stats_;
  TransferId next_id_ = 1;
  std::map<TransferId, Batch> batches_;        // outer id -> batch, until its event
  std::map<TransferId, TransferId> by_inner_;  // inner id -> outer id
  std::deque<TransferEvent> ready_;            // failed or cancelled-dropped batches
  std::deque<Held> held_;                      // delayed events, in post order
};

}  // namespace tandem::kv_transfer
