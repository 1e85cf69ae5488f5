// CudaStream and CudaEvent: move-only owners of a cudaStream_t / cudaEvent_t.
//
// Thread rule: the handles may be used from any thread as CUDA allows; the owner
// object itself is not thread-safe (one owner destroys it).
#pragma once

#include <cuda_runtime_api.h>

#include <utility>

#include "common/base/status.h"

namespace tandem::cuda {

class CudaStream {
 public:
  CudaStream() = default;
  ~CudaStream();
  CudaStream(CudaStream&& o) noexcept : stream_(std::exchange(o.stream_, nullptr)) {}
  CudaStream& operator=(CudaStream&& o) noexcept {
    std::swap(stream_, o.stream_);
    return *this;
  }
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;

  // A non-blocking stream (does not synchronize with the legacy default stream).
  static StatusOr<CudaStream> Create();

  cudaStream_t get() const { return stream_; }
  // Blocks the calling thread until all work queued so far has finished.
  Status Synchronize() const;

 private:
  cudaStream_t stream_ = nullptr;
};

class CudaEvent {
 public:
  CudaEvent() = default;
  ~CudaEvent();
  CudaEvent(CudaEvent&& o) noexcept : event_(std::exchange(o.event_, nullptr)) {}
  CudaEvent& operator=(CudaEvent&& o) noexcept {
    std::swap(event_, o.event_);
    return *this;
  }
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  // timing=false gives a cheaper event for ordering only (cudaEventDisableTiming).
  static StatusOr<CudaEvent> Create(bool timing = true);

  cudaEvent_t get() const { return event_; }
  Status Record(cudaStream_t stream) const;
  Status Synchronize() const;
  // Milliseconds between two recorded, completed timing events.
  static StatusOr<float> ElapsedMs(const CudaEvent& start, const CudaEvent& stop);

 private:
  cudaEvent_t event_ = nullptr;
};

}  // namespace tandem::cuda
