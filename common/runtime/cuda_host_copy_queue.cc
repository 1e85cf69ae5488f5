#include "common/runtime/cuda_host_copy_queue.h"

#include <fmt/format.h>

#include "common/cuda/cuda_status.h"
#include "common/runtime/cuda_backend.h"

namespace tandem::runtime {
namespace {

class EventFence final : public CopyFence {
 public:
  EventFence(int device, cuda::CudaEvent event) : device_(device), event_(std::move(event)) {}
  bool Ready() override {
    // Any thread: the event names its context, but the runtime wants a current device.
    cudaSetDevice(device_);
    cudaError_t err = cudaEventQuery(event_.get());
    if (err == cudaErrorNotReady) return false;
    // An error is sticky on the stream; the copy is over either way, and the
    // engine's next synchronous call reports it.
    if (err != cudaSuccess) cudaGetLastError();
    return true;
  }

 private:
  int device_;
  cuda::CudaEvent event_;
};

}  // namespace

CudaHostCopyQueue::CudaHostCopyQueue(const CudaBackend& backend)
    : backend_(backend), device_(backend.device_ordinal()), compute_(backend.stream()) {}

StatusOr<std::unique_ptr<CudaHostCopyQueue>> CudaHostCopyQueue::Create(const CudaBackend& backend) {
  std::unique_ptr<CudaHostCopyQueue> q(new CudaHostCopyQueue(backend));
  TANDEM_ASSIGN_OR_RETURN(q->copy_, cuda::CudaStream::Create());
  TANDEM_ASSIGN_OR_RETURN(q->after_compute_, cuda::CudaEvent::Create(/*timing=*/false));
  TANDEM_ASSIGN_OR_RETURN(q->after_copies_, cuda::CudaEvent::Create(/*timing=*/false));
  return q;
}

Status CudaHostCopyQueue::Enqueue(Tensor src, void* dst, size_t num_bytes) {
  if (!src.defined() || src.device != Device::kCuda || num_bytes != src.NumBytes() || dst == nullptr) {
    return InvalidArgumentError(fmt::format("HostCopyQueue: {} bytes from {}", num_bytes, src.DebugString()));
  }
  if (backend_.in_graph_step()) return FailedPreconditionError("HostCopyQueue::Enqueue inside a graph step");
  if (!ordered_) {
    TANDEM_RETURN_IF_ERROR(after_compute_.Record(compute_));
    TANDEM_RETURN_IF_CUDA_ERROR(cudaStreamWaitEvent(copy_.get(), after_compute_.get(), 0));
    ordered_ = true;
  }
  if (num_bytes == 0) return Status::Ok();
  TANDEM_RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(dst, src.data, num_bytes, cudaMemcpyDeviceToHost, copy_.get()));
  return Status::Ok();
}

StatusOr<std::shared_ptr<CopyFence>> CudaHostCopyQueue::Mark() {
  TANDEM_ASSIGN_OR_RETURN(cuda::CudaEvent event, cuda::CudaEvent::Create(/*timing=*/false));
  TANDEM_RETURN_IF_ERROR(event.Record(copy_.get()));
  // Copies enqueued after this mark must wait for the ops issued until then.
  ordered_ = false;
  return std::shared_ptr<CopyFence>(std::make_shared<EventFence>(device_, std::move(event)));
}

Status CudaHostCopyQueue::JoinCompute() {
  TANDEM_RETURN_IF_ERROR(after_copies_.Record(copy_.get()));
  TANDEM_RETURN_IF_CUDA_ERROR(cudaStreamWaitEvent(compute_, after_copies_.get(), 0));
  return Status::Ok();
}

}  // namespace tandem::runtime
