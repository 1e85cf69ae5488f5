#include "common/cuda/cuda_status.h"

#include <string>

namespace tandem::cuda {

Status CudaStatus(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return Status::Ok();
  return InternalError(std::string(what) + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
}

Status CublasStatus(cublasStatus_t err, const char* what) {
  if (err == CUBLAS_STATUS_SUCCESS) return Status::Ok();
  return InternalError(std::string(what) + ": " + cublasGetStatusName(err) + " (" + cublasGetStatusString(err) + ")");
}

Status LastLaunchStatus(const char* kernel_name) { return CudaStatus(cudaGetLastError(), kernel_name); }

int DeviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return n;
}

}  // namespace tandem::cuda
