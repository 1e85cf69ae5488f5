#include "kv_transfer/nccl/nccl_connection.h"

#include <fmt/format.h>

#include <atomic>
#include <thread>
#include <utility>

#include "common/cuda/cuda_status.h"
#include "common/kernels/kv_run_copy.h"

namespace tandem::kv_transfer {
namespace {

Status FromNccl(ncclResult_t r, const char* what) {
  if (r == ncclSuccess) return Status::Ok();
  std::string msg = fmt::format("{}: {}", what, ncclGetErrorString(r));
  if (r == ncclRemoteError || r == ncclSystemError) return UnavailableError(std::move(msg));
  return InternalError(std::move(msg));
}

// Makes `device` current for the scope and restores the caller's device.
class DeviceScope {
 public:
  explicit DeviceScope(int device) : device_(device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = device;
    if (previous_ != device_) cudaSetDevice(device_);
  }
  ~DeviceScope() {
    if (previous_ != device_) cudaSetDevice(previous_);
  }

 private:
  int device_;
  int previous_ = 0;
};

}  // namespace

struct NcclConnection::AbortJob {
  std::atomic<bool> done{false};
};

NcclConnection::NcclConnection(const NcclConfig& config, int rank, ProcessWatch watch)
    : config_(config),
      rank_(rank),
      watch_(std::move(watch)),
      deadline_(SteadyClock::now() + std::chrono::milliseconds(config.init_timeout_ms)) {}

StatusOr<std::unique_ptr<NcclConnection>> NcclConnection::Start(const NcclConfig& config, int rank,
                                                                const ncclUniqueId& id, ProcessWatch watch) {
  std::unique_ptr<NcclConnection> c(new NcclConnection(config, rank, std::move(watch)));
  DeviceScope scope(config.device);
  TANDEM_RETURN_IF_CUDA_ERROR(cudaStreamCreateWithFlags(&c->stream_, cudaStreamNonBlocking));
  TANDEM_RETURN_IF_CUDA_ERROR(cudaMalloc(&c->warm_, 2));
  TANDEM_RETURN_IF_CUDA_ERROR(cudaEventCreateWithFlags(&c->warm_event_, cudaEventDisableTiming));
  ncclConfig_t nccl_config = NCCL_CONFIG_INITIALIZER;
  nccl_config.blocking = 0;
  ncclResult_t r = ncclCommInitRankConfig(&c->comm_, 2, id, rank, &nccl_config);
  if (r != ncclSuccess && r != ncclInProgress) {
    c->comm_ = nullptr;
    return UnavailableError(fmt::format("ncclCommInitRankConfig: {}", ncclGetErrorString(r)));
  }
  return c;
}

NcclConnection::~NcclConnection() {
  if (comm_ != nullptr && abort_ == nullptr) Abort(CancelledError("connection closed"));
  if (abort_ != nullptr) {
    auto until = SteadyClock::now() + std::chrono::milliseconds(config_.abort_timeout_ms);
    while (!abort_->done && SteadyClock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (!abort_->done) return;  // the abort thread may still use the stream: leak it
  }
  DeviceScope scope(config_.device);
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  for (const Batch& b : in_flight_) {
    if (b.event != nullptr) cudaEventDestroy(b.event);
  }
  for (cudaEvent_t e : spare_events_) cudaEventDestroy(e);
  if (warm_event_ != nullptr) cudaEventDestroy(warm_event_);
  cudaFree(staging_);
  cudaFree(warm_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

void NcclConnection::Post(Batch batch) { queued_.push_back(std::move(batch)); }

void NcclConnection::Cancel(TransferId id) {
  for (auto* list : {&queued_, &in_flight_}) {
    for (Batch& b : *list) {
      if (b.id == id) b.cancelled = true;  // NCCL cannot recall it: it still pairs up
    }
  }
}

bool NcclConnection::closed() const { return comm_ == nullptr || (abort_ != nullptr && abort_->done && ended_); }

void NcclConnection::Abort(const Status& why) {
  if (abort_ != nullptr || comm_ == nullptr) return;
  abort_status_ = why;
  state_ = State::kAborting;
  deadline_ = SteadyClock::now() + std::chrono::milliseconds(config_.abort_timeout_ms);
  abort_ = std::make_shared<AbortJob>();
  std::thread([job = abort_, comm = comm_, stream = stream_, device = config_.device] {
    cudaSetDevice(device);
    ncclCommAbort(comm);            // ends the communicator's kernels
    cudaStreamSynchronize(stream);  // and the gathers/scatters queued around them
    job->done = true;
  }).detach();
}

Status NcclConnection::AwaitEnqueued() {
  auto until = SteadyClock::now() + std::chrono::milliseconds(config_.abort_timeout_ms);
  for (;;) {
    ncclResult_t state = ncclSuccess;
    TANDEM_RETURN_IF_ERROR(FromNccl(ncclCommGetAsyncError(comm_, &state), "ncclCommGetAsyncError"));
    if (state != ncclInProgress) return FromNccl(state, "NCCL operation");
    if (SteadyClock::now() >= until) return UnavailableError("an NCCL operation did not enqueue in time");
  }
}

Status NcclConnection::StartWarmUp() {
  const int peer = 1 - rank_;
  TANDEM_RETURN_IF_ERROR(FromNccl(ncclGroupStart(), "ncclGroupStart"));
  TANDEM_RETURN_IF_ERROR(FromNccl(ncclSend(warm_, 1, ncclUint8, peer, comm_, stream_), "ncclSend"));
  TANDEM_RETURN_IF_ERROR(FromNccl(ncclRecv(warm_ + 1, 1, ncclUint8, peer, comm_, stream_), "ncclRecv"));
  ncclResult_t r = ncclGroupEnd();
  if (r == ncclInProgress) {
    state_ = State::kWarmEnqueue;
    return Status::Ok();
  }
  TANDEM_RETURN_IF_ERROR(FromNccl(r, "ncclGroupEnd"));
  TANDEM_RETURN_IF_CUDA_ERROR(cudaEventRecord(warm_event_, stream_));
  state_ = State::kWarming;
  return Status::Ok();
}

namespace {

// Run-copy launches for `runs` (as many as the kernel's capacity needs).
Status LaunchRuns(const std::vector<NcclConnection::Run>& runs, cudaStream_t stream) {
  kernels::RunCopyParams p;
  p.count = 0;
  for (const NcclConnection::Run& r : runs) {
    p.src[p.count] = r.src;
    p.dst[p.count] = r.dst;
    p.bytes[p.count] = static_cast<int64_t>(r.bytes);
    if (++p.count == kernels::kRunCopyMaxRuns) {
      TANDEM_RETURN_IF_ERROR(kernels::LaunchRunCopy(p, stream));
      p.count = 0;
    }
  }
  return p.count > 0 ? kernels::LaunchRunCopy(p, stream) : Status::Ok();
}

}  // namespace

// One chunk [begin, begin + bytes) of the batch's byte stream: in place when it
// is one range of real memory, else gathered into / scattered from staging.
Status NcclConnection::Chunk(const Batch& batch, uint64_t begin, uint64_t bytes) {
  runs_.clear();
  std::byte* direct = nullptr;
  uint64_t at = 0;
  int pieces = 0;
  for (const Piece& p : batch.pieces) {
    const uint64_t start = at, lo = std::max(at, begin), hi = std::min(at + p.bytes, begin + bytes);
    at += p.bytes;
    if (lo >= hi) continue;
    ++pieces;
    direct = p.ptr == nullptr ? nullptr : p.ptr + (lo - start);
    if (p.ptr != nullptr) {
      std::byte* staged = staging_ + (lo - begin);
      runs_.push_back(rank_ == 0 ? Run{direct, staged, hi - lo} : Run{staged, direct, hi - lo});
    }
    if (at >= begin + bytes) break;
  }
  const bool in_place = pieces == 1 && direct != nullptr;
  if (!in_place && staging_ == nullptr) return InternalError("nccl staging buffer missing");
  if (rank_ == 0) {
    if (!in_place) TANDEM_RETURN_IF_ERROR(LaunchRuns(runs_, stream_));
    ncclResult_t r = ncclSend(in_place ? direct : staging_, bytes, ncclUint8, 1, comm_, stream_);
    return r == ncclInProgress ? AwaitEnqueued() : FromNccl(r, "ncclSend");
  }
  ncclResult_t r = ncclRecv(in_place ? direct : staging_, bytes, ncclUint8, 0, comm_, stream_);
  TANDEM_RETURN_IF_ERROR(r == ncclInProgress ? AwaitEnqueued() : FromNccl(r, "ncclRecv"));
  return in_place ? Status::Ok() : LaunchRuns(runs_, stream_);
}

Status NcclConnection::Submit(Batch& batch) {
  DeviceScope scope(config_.device);
  if (staging_ == nullptr) {
    bool needs = batch.pieces.size() > 1 || (!batch.pieces.empty() && batch.pieces[0].ptr == nullptr);
    if (needs) TANDEM_RETURN_IF_CUDA_ERROR(cudaMalloc(&staging_, config_.chunk_bytes));
  }
  for (uint64_t begin = 0; begin < batch.bytes; begin += config_.chunk_bytes) {
    TANDEM_RETURN_IF_ERROR(Chunk(batch, begin, std::min(config_.chunk_bytes, batch.bytes - begin)));
  }
  if (!spare_events_.empty()) {
    batch.event = spare_events_.back();
    spare_events_.pop_back();
  } else {
    TANDEM_RETURN_IF_CUDA_ERROR(cudaEventCreateWithFlags(&batch.event, cudaEventDisableTiming));
  }
  TANDEM_RETURN_IF_CUDA_ERROR(cudaEventRecord(batch.event, stream_));
  return Status::Ok();
}

void NcclConnection::EndAll(const Status& why, std::vector<TransferEvent>* events) {
  for (auto* list : {&in_flight_, &queued_}) {
    for (Batch& b : *list) {
      events->push_back(TransferEvent{b.id, why, b.bytes});
      if (b.event != nullptr) spare_events_.push_back(b.event);
    }
    list->clear();
  }
}

void NcclConnection::Progress(std::vector<TransferEvent>* events) {
  if (comm_ == nullptr) return;
  if (state_ != State::kAborting && watch_.watching()) {
    auto now = SteadyClock::now();
    if (now >= next_liveness_check_) {
      next_liveness_check_ = now + std::chrono::milliseconds(config_.liveness_interval_ms);
      if (watch_.Exited()) Abort(UnavailableError("NCCL peer process exited"));
    }
  }
  if (state_ == State::kAborting) {
    if (ended_) return;
    if (abort_->done) {
      EndAll(abort_status_, events);
      ended_ = true;
    } else if (PastDeadline()) {
      health_ = InternalError(fmt::format("ncclCommAbort did not return in {} ms", config_.abort_timeout_ms));
      EndAll(abort_status_.WithContext("NCCL abort hung"), events);
      ended_ = true;
    }
    return;
  }
  DeviceScope scope(config_.device);
  ncclResult_t async = ncclSuccess;
  Status st = FromNccl(ncclCommGetAsyncError(comm_, &async), "ncclCommGetAsyncError");
  if (st.ok() && async != ncclInProgress) st = FromNccl(async, "NCCL communicator");
  if (!st.ok()) return Abort(UnavailableError(st.message()));
  switch (state_) {
    case State::kInitializing:
      if (async == ncclInProgress) {
        if (PastDeadline()) {
          Abort(UnavailableError(fmt::format("NCCL init did not finish in {} ms", config_.init_timeout_ms)));
        }
        return;
      }
      if (Status w = StartWarmUp(); !w.ok()) Abort(UnavailableError(w.message()));
      return;
    case State::kWarmEnqueue:
      if (async == ncclInProgress) {
        if (PastDeadline()) Abort(UnavailableError("NCCL warm-up did not enqueue in time"));
        return;
      }
      if (Status r = cuda::CudaStatus(cudaEventRecord(warm_event_, stream_), "cudaEventRecord"); !r.ok()) {
        return Abort(r);
      }
      state_ = State::kWarming;
      return;
    case State::kWarming: {
      cudaError_t e = cudaEventQuery(warm_event_);
      if (e == cudaErrorNotReady) {
        if (PastDeadline()) Abort(UnavailableError("NCCL warm-up exchange did not finish in time"));
        return;
      }
      if (e != cudaSuccess) {
        health_ = cuda::CudaStatus(e, "cudaEventQuery");
        return Abort(health_);
      }
      state_ = State::kReady;
      break;
    }
    case State::kReady:
    case State::kAborting: break;
  }
  while (!queued_.empty()) {
    Batch b = std::move(queued_.front());
    queued_.pop_front();
    Status submitted = Submit(b);
    in_flight_.push_back(std::move(b));
    if (!submitted.ok()) return Abort(UnavailableError(submitted.message()));
  }
  while (!in_flight_.empty()) {
    Batch& b = in_flight_.front();
    cudaError_t e = cudaEventQuery(b.event);
    if (e == cudaErrorNotReady) break;  // later batches are behind it on the stream
    if (e != cudaSuccess) {
      health_ = cuda::CudaStatus(e, "cudaEventQuery");
      return Abort(health_);
    }
    events->push_back(TransferEvent{b.id,
                                    b.cancelled ? CancelledError("transfer cancelled (it had been posted "
                                                                 "and completed)")
                                                : Status::Ok(),
                                    b.bytes});
    spare_events_.push_back(b.event);
    in_flight_.pop_front();
  }
}

}  // namespace tandem::kv_transfer
