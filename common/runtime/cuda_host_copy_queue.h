// CudaHostCopyQueue: HostCopyQueue on one GPU. Copies run on their own stream,
// each batch after an event recorded on the compute stream, so they overlap the
// ops issued after them; fences are events on the copy stream. JoinCompute makes
// the compute stream wait for the copy stream. Enqueue inside a graph step is
// FailedPrecondition (the recorded ops have not been issued yet).
// Thread rule: as HostCopyQueue (fences' Ready() from any thread).
#pragma once

#include <cuda_runtime_api.h>

#include <memory>

#include "common/cuda/stream.h"
#include "common/runtime/backend.h"

namespace tandem::runtime {

class CudaBackend;

class CudaHostCopyQueue final : public HostCopyQueue {
 public:
  // `backend` must outlive this.
  static StatusOr<std::unique_ptr<CudaHostCopyQueue>> Create(const CudaBackend& backend);

  // Non-pinned `dst` works but the call then waits for the copy.
  Status Enqueue(Tensor src, void* dst, size_t num_bytes) override;
  StatusOr<std::shared_ptr<CopyFence>> Mark() override;
  Status JoinCompute() override;

 private:
  explicit CudaHostCopyQueue(const CudaBackend& backend);

  const CudaBackend& backend_;
  int device_;
  cudaStream_t compute_;
  cuda::CudaStream copy_;
  cuda::CudaEvent after_compute_;  // recorded on compute_ before a batch of copies
  cuda::CudaEvent after_copies_;   // recorded on copy_ by JoinCompute
  bool ordered_ = false;           // copy_ already waits for the ops issued so far
};

}  // namespace tandem::runtime
