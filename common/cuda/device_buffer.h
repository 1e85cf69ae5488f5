// DeviceBuffer (cudaMalloc) and PinnedBuffer (cudaHostAlloc): move-only owners of raw bytes.
//
// Ownership: the buffer frees its memory in the destructor. Allocation failure is a
// Status (ResourceExhausted), never an abort. Thread rule: not thread-safe; one owner.
#pragma once

#include <cstddef>
#include <utility>

#include "common/base/status.h"

namespace tandem::cuda {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept { Swap(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    DeviceBuffer tmp(std::move(other));
    Swap(tmp);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  // Allocates `bytes` of device memory on the current device (0 bytes gives an empty buffer).
  static StatusOr<DeviceBuffer> Allocate(size_t bytes);

  void* data() const { return data_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  size_t size_bytes() const { return bytes_; }

 private:
  void Swap(DeviceBuffer& o) {
    std::swap(data_, o.data_);
    std::swap(bytes_, o.bytes_);
  }
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  ~PinnedBuffer();
  PinnedBuffer(PinnedBuffer&& other) noexcept { Swap(other); }
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept {
    PinnedBuffer tmp(std::move(other));
    Swap(tmp);
    return *this;
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  // Allocates `bytes` of page-locked host memory (portable across devices), usable by
  // asynchronous copies on any stream.
  static StatusOr<PinnedBuffer> Allocate(size_t bytes);

  void* data() const { return data_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  size_t size_bytes() const { return bytes_; }

 private:
  void Swap(PinnedBuffer& o) {
    std::swap(data_, o.data_);
    std::swap(bytes_, o.bytes_);
  }
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace tandem::cuda
