#include "common/runtime/cuda_host_copy_queue.h"

#include <fmt/format.h>

#include "common/cuda/cuda_status.h"
#include "common/runtime/cuda_backend.h"

namespace tandem::runtime {
StatusOr<std::shared_ptr<CopyFence>> CudaEventFence::Record(int device, cudaStream_t stream) {
  TANDEM_RETURN_IF_CUDA_ERROR(cudaSetDevice(device));
  TANDEM_ASSIGN_OR_RETURN(cuda::CudaEvent event, cuda::CudaEvent::Create(/*timing=*/false));
  TANDEM_RETURN_IF_ERROR(event.Record(stream));
  return std::shared_ptr<CopyFence>(std::make_shared<CudaEventFence>(device, std::move(event)));
}

bool CudaEventFence::Ready() {
  // Any thread: the event names its context, but the runtime wants a current device.
  cudaSetDevice(device_);
  cudaError_t err = cudaEventQuery(event_.get());
  if (err == cudaErrorNotReady) return false;
  // An error is sticky on the stream; the work is over either way, and the
  // engine's next synchronous call reports it.
  if (err != cudaSuccess) cudaGetLastError();
  return true;
}

CudaHostCopyQueue::CudaHostCopyQueue(const CudaBackend& backend, CopyQueueOptions options)
    : backend_(backend), options_(options), device_(backend.device_ordinal()), compute_(backend.stream()) {}

StatusOr<std::unique_ptr<CudaHostCopyQueue>> CudaHostCopyQueue::Create(const CudaBackend& backend,
                                                                       CopyQueueOptions options) {
  std::unique_ptr<CudaHostCopyQueue> q(new CudaHostCopyQueue(backend, options));
  TANDEM_ASSIGN_OR_RETURN(q->copy_, cuda::CudaStream::Create());
  TANDEM_ASSIGN_OR_RETURN(q->after_compute_, cuda::CudaEvent::Create(/*timing=*/false));
  TANDEM_ASSIGN_OR_RETURN(q->after_copies_, cuda::CudaEvent::Create(/*timing=*/false));
  return q;
}

Status CudaHostCopyQueue::Enqueue(Tensor src, void* dst, size_t num_bytes) {
  if (!src.defined() || src.device != Device::kCuda || num_bytes != src.NumBytes() || dst == nullptr) {
    return InvalidArgumentError(fmt::format("HostCopyQueue: {} bytes from {}", num_bytes, src.DebugString()));
  }
  TANDEM_RETURN_IF_ERROR(OrderAfterCompute());
  if (num_bytes == 0) return Status::Ok();
  TANDEM_RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(dst, src.data, num_bytes, cudaMemcpyDeviceToHost, copy_.get()));
  return Status::Ok();
}

Status CudaHostCopyQueue::EnqueueToDevice(const void* src, Tensor dst, size_t num_bytes) {
  if (!dst.defined() || dst.device != Device::kCuda || num_bytes != dst.NumBytes() || src == nullptr) {
    return InvalidArgumentError(fmt::format("HostCopyQueue: {} bytes into {}", num_bytes, dst.DebugString()));
  }
  TANDEM_RETURN_IF_ERROR(OrderAfterCompute());
  if (num_bytes == 0) return Status::Ok();
  TANDEM_RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(dst.data, src, num_bytes, cudaMemcpyHostToDevice, copy_.get()));
  return Status::Ok();
}

Status CudaHostCopyQueue::OrderAfterCompute() {
  TANDEM_RETURN_IF_CUDA_ERROR(cudaSetDevice(device_));
  if (!options_.after_compute || ordered_) return Status::Ok();
  if (backend_.in_graph_step()) return FailedPreconditionError("HostCopyQueue::Enqueue inside a graph step");
  TANDEM_RETURN_IF_ERROR(after_compute_.Record(compute_));
  TANDEM_RETURN_IF_CUDA_ERROR(cudaStreamWaitEvent(copy_.get(), after_compute_.get(), 0));
  ordered_ = true;
  return Status::Ok();
}

StatusOr<std::shared_ptr<CopyFence>> CudaHostCopyQueue::Mark() {
  // Copies enqueued after this mark must wait for the ops issued until then.
  ordered_ = false;
  return CudaEventFence::Record(device_, copy_.get());
}

Status CudaHostCopyQueue::JoinCompute() {
  TANDEM_RETURN_IF_ERROR(after_copies_.Record(copy_.get()));
  TANDEM_RETURN_IF_CUDA_ERROR(cudaStreamWaitEvent(compute_, after_copies_.get(), 0));
  return Status::Ok();
}

}  // namespace tandem::runtime
