// CudaHostCopyQueue: HostCopyQueue on one GPU. Copies run on their own stream;
// with after_compute each batch waits for an event recorded on the compute
// stream, so they overlap the ops issued after them; fences are events on the
// copy stream. JoinCompute makes the compute stream wait for the copy stream.
// With after_compute, Enqueue inside a graph step is FailedPrecondition (the
// recorded ops have not been issued yet).
// Thread rule: as HostCopyQueue (fences' Ready() from any thread). Every call
// makes the queue's device current, so any owner thread works.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>

#include "common/cuda/stream.h"
#include "common/runtime/backend.h"

namespace tandem::runtime {

class CudaBackend;

// A CopyFence on a CUDA event.
class CudaEventFence final : public CopyFence {
 public:
  // Records a new event on `stream` of `device`.
  static StatusOr<std::shared_ptr<CopyFence>> Record(int device, cudaStream_t stream);
  CudaEventFence(int device, cuda::CudaEvent event) : device_(device), event_(std::move(event)) {}
  bool Ready() override;

 private:
  int device_;
  cuda::CudaEvent event_;
};

class CudaHostCopyQueue final : public HostCopyQueue {
 public:
  // `backend` must outlive this.
  static StatusOr<std::unique_ptr<CudaHostCopyQueue>> Create(const CudaBackend& backend, CopyQueueOptions options = {});

  // Non-pinned host memory works but the call then waits for the copy.
  Status Enqueue(Tensor src, void* dst, size_t num_bytes) override;
  Status EnqueueToDevice(const void* src, Tensor dst, size_t num_bytes) override;
  StatusOr<std::shared_ptr<CopyFence>> Mark() override;
  Status JoinCompute() override;

 private:
  CudaHostCopyQueue(const CudaBackend& backend, CopyQueueOptions options);
  // Makes the copy stream wait for the compute stream's ops once per batch (after_compute).
  Status OrderAfterCompute();

  const CudaBackend& backend_;
  CopyQueueOptions options_;
  int device_;
  cudaStream_t compute_;
  cuda::CudaStream copy_;
  cuda::CudaEvent after_compute_;  // recorded on compute_ before a batch of copies
  cuda::CudaEvent after_copies_;   // recorded on copy_ by JoinCompute
  bool ordered_ = false;           // copy_ already waits for the ops issued so far
};

}  // namespace tandem::runtime
