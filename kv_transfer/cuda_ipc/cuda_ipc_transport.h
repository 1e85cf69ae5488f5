// CudaIpcTransport: the `cuda_ipc` backend. Device memory of another process on
// the same host (one GPU shared by two processes, or two GPUs joined by NVLink/
// PCIe P2P), written one-sided by this process's copies:
//   - RegisterMemory(kDevice): a range inside one cudaMalloc allocation; its
//     descriptor carries the allocation's cudaIpcMemHandle plus offset and length.
//   - LoadRemoteRegion: cudaIpcOpenMemHandle, once per allocation per process
//     (opening a handle twice fails), closed when its last region is unloaded or
//     its peer disconnected and no batch uses it any more.
//   - PostWrites: on the transport's own non-blocking streams, batches in turn
//     (`streams`; batches write disjoint bytes, so they may overlap); ops of at least
//     copy_engine_min_bytes take one cudaMemcpyAsync each, shorter ones are
//     gathered into one run-copy kernel launch (kernels/kv_run_copy.h); one CUDA
//     event per batch, turned into its TransferEvent by Poll.
//   - A peer whose process exits (pidfd) fails its batches with Unavailable once
//     their copies finished; Cancel cannot recall queued copies: the event comes
//     when they are done, with status Cancelled. A writer's queued copies land
//     even after the target gave up (README: late writes).
// A CUDA error other than "not ready" breaks the transport: every batch ends with
// Internal and Health() reports it.
// Thread rule: not thread-safe; one owner thread (Transport contract). Every
// method makes `config.device` current for its CUDA calls and restores the
// caller's device.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kv_transfer/transport.h"

namespace tandem::kv_transfer {

struct CudaIpcConfig {
  // CUDA device ordinal the transport works on: its registered memory lives
  // there and its copies run on a stream of it.
  int device = 0;
  // Ops of at least this many bytes each take the copy engines (one
  // cudaMemcpyAsync); shorter ones share one kernel launch per batch. Into
  // another process's memory the copy engines reach only ~870 GB/s at 4 MiB on
  // an H200 against the kernel's ~1800 (kv_transfer_gpu_bench's sweep), so a
  // layer of KV (16 MiB for a 4K-token prompt of the 8B shape) takes the kernel.
  uint64_t copy_engine_min_bytes = uint64_t{256} << 20;
  // Minimum interval between checks that connected peer processes still exist.
  int64_t liveness_interval_ms = 20;
  // Copy streams the batches take in turn: with one, each layer's launch waits
  // for the previous one's last thread blocks (its ramp and tail serialize).
  int streams = 2;
  Status Validate() const;
};

class CudaIpcTransport final : public Transport {
 public:
  // FailedPrecondition when the device is not visible; Internal on CUDA errors.
  static StatusOr<std::unique_ptr<CudaIpcTransport>> Create(const CudaIpcConfig& config);
  // Waits for queued copies, then closes every opened handle.
  ~CudaIpcTransport() override;
  CudaIpcTransport(const CudaIpcTransport&) = delete;
  CudaIpcTransport& operator=(const CudaIpcTransport&) = delete;

  TransportCapabilities Capabilities() const override;
  std::string WorkerAddress() const override;
  StatusOr<RegisteredRegion> RegisterMemory(void* addr, size_t length, MemoryKind kind) override;
  Status UnregisterMemory(RegionId region) override;
  // FailedPrecondition for a peer on another host, in this process, or on a GPU
  // this process cannot see or reach (no P2P path); enables peer access when the
  // peer's GPU differs from this one. Unavailable when the peer process is gone.
  StatusOr<PeerId> Connect(std::string_view worker_address) override;
  Status Disconnect(PeerId peer) override;
  StatusOr<RemoteRegionId> LoadRemoteRegion(PeerId peer, std::string_view descriptor) override;
  Status UnloadRemoteRegion(RemoteRegionId remote) override;
  StatusOr<TransferId> PostWrites(PeerId peer, std::span<const WriteOp> ops) override;
  StatusOr<TransferId> PostReceives(PeerId peer, std::span<const WriteOp> ops) override;
  void Cancel(TransferId id) override;
  size_t Poll(std::vector<TransferEvent>* events) override;
  Status Health() const override;
  // Its process exited (pidfd, checked every liveness_interval_ms by Poll).
  bool PeerGone(PeerId peer) const override;

  struct Impl;  // CUDA handles; defined in the .cc so CUDA headers stay private

 private:
  explicit CudaIpcTransport(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem::kv_transfer
