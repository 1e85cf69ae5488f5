// NcclTransport: the `nccl` backend. Two-sided GPU-to-GPU transfers over one
// 2-rank NCCL communicator per (writer, target) pair: between processes on one
// host (NVLink/PCIe) and across hosts where NCCL has a network. Not between two
// processes on one GPU: NCCL refuses two ranks on one device (use cuda_ipc).
//   - WorkerAddress: the target's identity (host, process, GPU); no NCCL id.
//   - Connect (the writer, prefill): creates the ncclUniqueId and starts the
//     communicator as rank 0; ConnectionToken carries the id to the target,
//     whose Accept starts rank 1 (README: the two-sided session flow).
//   - RegisterMemory(kDevice): records the range; the descriptor carries only
//     its length (nothing is remotely addressable).
//   - PostWrites / PostReceives: batches are byte streams paired in post order
//     per connection (NcclConnection: chunks sent or received in place, or
//     gathered / scattered through a staging buffer by the run-copy kernel).
//   - Cancel cannot recall a posted batch: its event comes when it completes.
//     Disconnect, a dead peer process (same host: pidfd), an NCCL error or an
//     init past init_timeout_ms aborts the connection on its own thread: every
//     batch of the pair ends with an error; an abort that overruns
//     abort_timeout_ms makes Health() fail for good.
// Only built with TANDEM_CUDA and NCCL found (TANDEM_HAVE_NCCL).
// Thread rule: not thread-safe; one owner thread (Transport contract), plus one
// short-lived internal thread per aborted connection.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kv_transfer/transport.h"

namespace tandem::kv_transfer {

struct NcclConfig {
  // CUDA device ordinal the transport works on (its registered memory, its
  // communicators' rank).
  int device = 0;
  // Communicator init plus the warm-up exchange must finish within this; else
  // the connection is aborted and its batches fail (Unavailable).
  int64_t init_timeout_ms = 10'000;
  // ncclCommAbort gets this long to return; then the connection's batches end
  // anyway and Health() reports the transport unusable.
  int64_t abort_timeout_ms = 5'000;
  // A batch moves in chunks of at most this many bytes, each one ncclSend /
  // ncclRecv (through a staging buffer of this size when the chunk's bytes are
  // not one contiguous range). Both ends must use the same value (checked at
  // Accept).
  uint64_t chunk_bytes = 16 << 20;
  // Minimum interval between checks that a same-host peer process still exists.
  int64_t liveness_interval_ms = 20;
  Status Validate() const;
};

class NcclConnection;

class NcclTransport final : public Transport {
 public:
  // FailedPrecondition when the device is not visible.
  static StatusOr<std::unique_ptr<NcclTransport>> Create(const NcclConfig& config);
  // Aborts every connection (waiting up to abort_timeout_ms for each).
  ~NcclTransport() override;
  NcclTransport(const NcclTransport&) = delete;
  NcclTransport& operator=(const NcclTransport&) = delete;

  TransportCapabilities Capabilities() const override;
  std::string WorkerAddress() const override;
  StatusOr<RegisteredRegion> RegisterMemory(void* addr, size_t length, MemoryKind kind) override;
  Status UnregisterMemory(RegionId region) override;
  // FailedPrecondition for its own address or a peer on this host's same GPU.
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
  Status Health() const override;

  struct Impl;  // NCCL and CUDA handles; defined in the .cc

 private:
  explicit NcclTransport(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem::kv_transfer
