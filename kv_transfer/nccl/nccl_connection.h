// NcclConnection: one 2-rank NCCL communicator between this process and a peer,
// the nccl backend's unit of connection. Rank 0 writes, rank 1 receives.
//
// Life: non-blocking init (ncclCommInitRankConfig, blocking = 0) polled with
// ncclCommGetAsyncError until the deadline, then a one-byte exchange both ways
// that sets up the peer-to-peer channels (so later sends and receives enqueue
// without waiting), then ready: batches queued meanwhile are submitted in order.
// A batch is a byte stream cut into chunks of chunk_bytes (both ranks cut the
// same way): a chunk that is one contiguous range of real memory is sent or
// received in place; any other chunk goes through the connection's staging
// buffer (a run-copy kernel gathers before ncclSend, scatters after ncclRecv).
// One CUDA event per batch on the connection's stream ends it.
// Abort (Disconnect, a dead peer process, an NCCL error, an init deadline): the
// communicator is aborted on its own thread; every batch ends with the reason
// once the abort returned, or at the abort deadline anyway, then health() is
// no longer OK (the process should be restarted).
//
// Thread rule: one owner thread calls every method; the abort thread touches
// only the communicator, the stream and a shared completion flag.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <cstddef>
#include <deque>
#include <memory>
#include <vector>

#include "kv_transfer/nccl/nccl_transport.h"
#include "kv_transfer/peer_process.h"

namespace tandem::kv_transfer {

class NcclConnection {
 public:
  using SteadyClock = std::chrono::steady_clock;
  struct Piece {
    std::byte* ptr = nullptr;  // null: discarded bytes (receives only)
    uint64_t bytes = 0;
  };
  struct Batch {
    TransferId id = kInvalidHandle;
    std::vector<Piece> pieces;
    uint64_t bytes = 0;
    bool cancelled = false;
    cudaEvent_t event = nullptr;  // set when submitted
  };
  struct Run {  // one gather or scatter copy of a chunk
    const std::byte* src;
    std::byte* dst;
    uint64_t bytes;
  };

  // Starts the communicator as `rank` (0 writer, 1 target) of `id`.
  // Unavailable when NCCL refuses to start it.
  static StatusOr<std::unique_ptr<NcclConnection>> Start(const NcclConfig& config, int rank, const ncclUniqueId& id,
                                                         ProcessWatch watch);
  // Aborts if still running, waits up to abort_timeout_ms for the abort, frees
  // what the abort let go of.
  ~NcclConnection();
  NcclConnection(const NcclConnection&) = delete;
  NcclConnection& operator=(const NcclConnection&) = delete;

  int rank() const { return rank_; }
  // Queues a batch; submitted once the communicator is ready, in post order.
  void Post(Batch batch);
  void Cancel(TransferId id);
  // Init, warm-up, submissions, completions, liveness, abort: never blocks
  // (beyond the few microseconds an enqueue takes). Appends ended batches.
  void Progress(std::vector<TransferEvent>* events);
  // Starts the abort; every batch ends with `why` (idempotent).
  void Abort(const Status& why);
  // Aborted, the abort returned and every batch ended: safe to destroy.
  bool closed() const;
  bool aborting() const { return state_ == State::kAborting; }
  // Not OK once an abort overran its deadline or CUDA failed.
  const Status& health() const { return health_; }

 private:
  enum class State { kInitializing, kWarmEnqueue, kWarming, kReady, kAborting };
  struct AbortJob;

  NcclConnection(const NcclConfig& config, int rank, ProcessWatch watch);
  Status AwaitEnqueued();  // a non-blocking call returned ncclInProgress: wait until enqueued
  Status StartWarmUp();
  Status Submit(Batch& batch);
  Status Chunk(const Batch& batch, uint64_t begin, uint64_t bytes);
  void EndAll(const Status& why, std::vector<TransferEvent>* events);
  bool PastDeadline() const { return SteadyClock::now() >= deadline_; }

  NcclConfig config_;
  int rank_;
  ProcessWatch watch_;
  State state_ = State::kInitializing;
  SteadyClock::time_point deadline_;  // init + warm-up, then the abort's
  SteadyClock::time_point next_liveness_check_{};
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  std::byte* staging_ = nullptr;  // chunk_bytes, allocated at first use
  std::byte* warm_ = nullptr;     // 2 bytes for the warm-up exchange
  cudaEvent_t warm_event_ = nullptr;
  std::deque<Batch> queued_;     // posted before ready
  std::deque<Batch> in_flight_;  // submitted, in stream order
  std::vector<cudaEvent_t> spare_events_;
  std::vector<Run> runs_;  // Chunk's scratch
  Status abort_status_;
  std::shared_ptr<AbortJob> abort_;
  bool ended_ = false;  // every batch ended after the abort
  Status health_;
};

}  // namespace tandem::kv_transfer
