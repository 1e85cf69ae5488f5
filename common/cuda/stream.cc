#include "common/cuda/stream.h"

#include "common/cuda/cuda_status.h"

namespace tandem::cuda {

CudaStream::~CudaStream() {
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

StatusOr<CudaStream> CudaStream::Create() {
  CudaStream s;
  TANDEM_RETURN_IF_CUDA_ERROR(cudaStreamCreateWithFlags(&s.stream_, cudaStreamNonBlocking));
  return s;
}

Status CudaStream::Synchronize() const { return CudaStatus(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }

CudaEvent::~CudaEvent() {
  if (event_ != nullptr) cudaEventDestroy(event_);
}

StatusOr<CudaEvent> CudaEvent::Create(bool timing) {
  CudaEvent e;
  TANDEM_RETURN_IF_CUDA_ERROR(cudaEventCreateWithFlags(&e.event_, timing ? cudaEventDefault : cudaEventDisableTiming));
  return e;
}

Status CudaEvent::Record(cudaStream_t stream) const {
  return CudaStatus(cudaEventRecord(event_, stream), "cudaEventRecord");
}

Status CudaEvent::Synchronize() const { return CudaStatus(cudaEventSynchronize(event_), "cudaEventSynchronize"); }

StatusOr<float> CudaEvent::ElapsedMs(const CudaEvent& start, const CudaEvent& stop) {
  float ms = 0;
  TANDEM_RETURN_IF_CUDA_ERROR(cudaEventElapsedTime(&ms, start.event_, stop.event_));
  return ms;
}

}  // namespace tandem::cuda
