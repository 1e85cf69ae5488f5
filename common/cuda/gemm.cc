#include "common/cuda/gemm.h"

#include <climits>

#include "common/cuda/cuda_status.h"

namespace tandem::cuda {

CublasHandle::~CublasHandle() {
  if (handle_ != nullptr) cublasDestroy(handle_);
}

StatusOr<CublasHandle> CublasHandle::Create() {
  CublasHandle h;
  TANDEM_RETURN_IF_CUBLAS_ERROR(cublasCreate(&h.handle_));
  return h;
}

Status GemmBf16(const CublasHandle& handle, const GemmParams& p, cudaStream_t stream) {
  if (handle.get() == nullptr) return InvalidArgumentError("GemmBf16: null cuBLAS handle");
  if (p.x == nullptr || p.w == nullptr || p.y == nullptr) return InvalidArgumentError("GemmBf16: null x, w or y");
  if (p.m <= 0 || p.n <= 0 || p.k <= 0 || p.m > INT_MAX || p.n > INT_MAX || p.k > INT_MAX)
    return InvalidArgumentError("GemmBf16: sizes must be in [1, INT_MAX]");
  cudaDataType_t y_type;
  if (p.y_dtype == DType::kBF16) {
    y_type = CUDA_R_16BF;
  } else if (p.y_dtype == DType::kF32) {
    y_type = CUDA_R_32F;
  } else {
    return InvalidArgumentError("GemmBf16: y_dtype must be bf16 or f32");
  }
  // cublasSetStream resets a workspace set with cublasSetWorkspace (needed for CUDA-graph
  // capture), so only switch streams when the handle is bound to another one.
  cudaStream_t bound = nullptr;
  TANDEM_RETURN_IF_CUBLAS_ERROR(cublasGetStream(handle.get(), &bound));
  if (bound != stream) TANDEM_RETURN_IF_CUBLAS_ERROR(cublasSetStream(handle.get(), stream));
  // Column-major view: yᵀ[n, m] = w[n, k] · xᵀ[k, m]; row-major w is a column-major
  // [k, n] matrix, so it enters transposed.
  const int m = static_cast<int>(p.n), n = static_cast<int>(p.m), k = static_cast<int>(p.k);
  TANDEM_RETURN_IF_CUBLAS_ERROR(cublasGemmEx(handle.get(), CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &p.alpha, p.w,
                                             CUDA_R_16BF, k, p.x, CUDA_R_16BF, k, &p.beta, p.y, y_type, m,
                                             CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  return Status::Ok();
}

}  // namespace tandem::cuda
