// CublasHandle (RAII) and GemmBf16: Y = X · Wᵀ with bf16 inputs and fp32 accumulation.
//
// Row-major shapes as in Hugging Face Linear layers:
//   x [m, k] bf16, w [n, k] bf16 (weight [out_features, in_features]), y [m, n] bf16 or fp32.
// Fused projections (QKV, gate/up) are one GEMM over the concatenated weight rows.
// Thread rule: a handle is used by one thread at a time (the engine thread).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <utility>

#include "common/base/dtype.h"
#include "common/base/status.h"

namespace tandem::cuda {

class CublasHandle {
 public:
  CublasHandle() = default;
  ~CublasHandle();
  CublasHandle(CublasHandle&& o) noexcept : handle_(std::exchange(o.handle_, nullptr)) {}
  CublasHandle& operator=(CublasHandle&& o) noexcept {
    std::swap(handle_, o.handle_);
    return *this;
  }
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;

  static StatusOr<CublasHandle> Create();
  cublasHandle_t get() const { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
};

struct GemmParams {
  const void* x = nullptr;       // [m, k] bf16, row-major, leading dimension k
  const void* w = nullptr;       // [n, k] bf16, row-major, leading dimension k
  void* y = nullptr;             // [m, n] row-major, leading dimension n; dtype y_dtype
  int64_t m = 0;                 // rows of x (tokens)
  int64_t n = 0;                 // output features
  int64_t k = 0;                 // input features
  DType y_dtype = DType::kBF16;  // kBF16 or kF32 (fp32 logits for the sampler)
  float alpha = 1.0f;            // y = alpha * x·wᵀ + beta * y
  float beta = 0.0f;
};

// Queues the GEMM on `stream` (the handle is bound to it for this call).
// Errors: InvalidArgument on null pointers, non-positive sizes or an unsupported
// y_dtype; Internal on a cuBLAS failure.
Status GemmBf16(const CublasHandle& handle, const GemmParams& params, cudaStream_t stream);

}  // namespace tandem::cuda
