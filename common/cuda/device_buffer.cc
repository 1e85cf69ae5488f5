#include "common/cuda/device_buffer.h"

#include <cuda_runtime_api.h>

#include <string>

#include "common/cuda/cuda_status.h"

namespace tandem::cuda {

DeviceBuffer::~DeviceBuffer() {
  if (data_ != nullptr) cudaFree(data_);  // error ignored: nothing to do in a destructor
}

StatusOr<DeviceBuffer> DeviceBuffer::Allocate(size_t bytes) {
  DeviceBuffer buf;
  if (bytes == 0) return buf;
  cudaError_t err = cudaMalloc(&buf.data_, bytes);
  if (err != cudaSuccess) {
    cudaGetLastError();
    buf.data_ = nullptr;
    return ResourceExhaustedError("cudaMalloc(" + std::to_string(bytes) + " bytes): " + cudaGetErrorString(err));
  }
  buf.bytes_ = bytes;
  return buf;
}

PinnedBuffer::~PinnedBuffer() {
  if (data_ != nullptr) cudaFreeHost(data_);
}

StatusOr<PinnedBuffer> PinnedBuffer::Allocate(size_t bytes) {
  PinnedBuffer buf;
  if (bytes == 0) return buf;
  cudaError_t err = cudaHostAlloc(&buf.data_, bytes, cudaHostAllocPortable);
  if (err != cudaSuccess) {
    cudaGetLastError();
    buf.data_ = nullptr;
    return ResourceExhaustedError("cudaHostAlloc(" + std::to_string(bytes) + " bytes): " + cudaGetErrorString(err));
  }
  buf.bytes_ = bytes;
  return buf;
}

}  // namespace tandem::cuda
