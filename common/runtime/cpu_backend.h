// CpuBackend: the fp32 reference backend. Weights, activations and the KV
// cache (KvLayout dtype F32) live in host memory; every op is a plain loop
// with a fixed summation order per output element, so a row's result never
// depends on the other rows of the batch (batch invariance by construction).
// It is the oracle for the CUDA kernels and the backend of CI and the demo.
// Thread rule: engine thread only (single-threaded, not thread-safe).
#pragma once

#include <cstddef>
#include <vector>

#include "common/runtime/backend.h"

namespace tandem::runtime {

class CpuBackend final : public Backend {
 public:
  CpuBackend() = default;
  ~CpuBackend() override;

  Device device() const override { return Device::kCpu; }
  DType compute_dtype() const override { return DType::kF32; }

  StatusOr<Buffer> Allocate(DType dtype, const std::vector<int64_t>& shape) override;
  Status CopyToDevice(const void* src, size_t num_bytes, Tensor dst) override;
  Status CopyToHost(Tensor src, void* dst, size_t num_bytes) override;
  // Fills dst's own memory, 64 MiB at a time.
  Status FillDevice(Tensor dst, const HostFill& fill) override;

  Status Embedding(Tensor ids, Tensor table, Tensor out) override;
  Status RmsNorm(const RmsNormParams& p) override;
  Status Linear(const LinearParams& p) override;
  Status RopeKvWrite(const RopeKvWriteParams& p) override;
  Status PagedAttention(const PagedAttentionParams& p) override;
  Status SiluAndMul(Tensor gate_up, Tensor out) override;
  Status GatherRows(Tensor src, Tensor indices, Tensor out) override;

  // Buffers allocated and not yet freed (for leak checks in tests).
  int live_buffers() const { return live_buffers_; }

 protected:
  void Free(void* data) override;

 private:
  int live_buffers_ = 0;
  std::vector<float> scores_;  // attention scratch, one query row at a time
};

}  // namespace tandem::runtime
