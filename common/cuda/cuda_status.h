// Turning CUDA runtime and cuBLAS error codes into Status values.
//
//   TANDEM_RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(...));
// Thread rule: free functions, no state.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "common/base/status.h"

namespace tandem::cuda {

// OK for cudaSuccess, else an internal error naming the call and the CUDA error string.
Status CudaStatus(cudaError_t err, const char* what);
// OK for CUBLAS_STATUS_SUCCESS, else an internal error naming the call and the cuBLAS status.
Status CublasStatus(cublasStatus_t err, const char* what);
// The last launch error (cudaGetLastError, which also clears it) as a Status.
Status LastLaunchStatus(const char* kernel_name);

// Number of visible CUDA devices; 0 when there is no GPU or no driver (never an error).
int DeviceCount();

}  // namespace tandem::cuda

#define TANDEM_RETURN_IF_CUDA_ERROR(expr) TANDEM_RETURN_IF_ERROR(::tandem::cuda::CudaStatus((expr), #expr))
#define TANDEM_RETURN_IF_CUBLAS_ERROR(expr) TANDEM_RETURN_IF_ERROR(::tandem::cuda::CublasStatus((expr), #expr))
