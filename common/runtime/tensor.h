// Tensor: a small non-owning view of a dense, row-major array that lives on a
// backend's device (host memory for the CPU backend, GPU memory for CUDA).
// The model code only passes tensors between backend ops; it never reads or
// writes their elements on the host (use Backend::CopyToHost/CopyToDevice).
// Thread rule: plain value type; the memory it points to has its owner's rule.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "common/base/check.h"
#include "common/base/dtype.h"

namespace tandem::runtime {

enum class Device : uint8_t { kCpu = 0, kCuda = 1 };

inline constexpr int kMaxTensorDims = 4;

struct Tensor {
  void* data = nullptr;  // device pointer; null for an absent optional tensor
  DType dtype = DType::kF32;
  Device device = Device::kCpu;
  int ndim = 0;
  std::array<int64_t, kMaxTensorDims> shape{};  // dims [0, ndim) are meaningful

  Tensor() = default;
  Tensor(void* data, DType dtype, Device device, std::initializer_list<int64_t> dims);

  bool defined() const { return data != nullptr; }
  int64_t dim(int i) const {
    TANDEM_CHECK(i >= 0 && i < ndim) << "dim " << i << " of a " << ndim << "-d tensor";
    return shape[i];
  }
  int64_t NumElements() const;
  size_t NumBytes() const { return static_cast<size_t>(NumElements()) * DTypeSize(dtype); }

  // Typed pointer. Only backends dereference it.
  template <typename T>
  T* As() const {
    return static_cast<T*>(data);
  }

  // Rows [begin, begin + count) along dim 0 (contiguous). REQUIRES: in range.
  Tensor Rows(int64_t begin, int64_t count) const;
  // Same bytes, new shape. REQUIRES: same number of elements.
  Tensor Reshape(std::initializer_list<int64_t> dims) const;

  // "f32[4, 64]@cpu".
  std::string DebugString() const;
};

}  // namespace tandem::runtime
