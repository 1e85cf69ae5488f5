#include "common/runtime/tensor.h"

#include <fmt/format.h>

namespace tandem::runtime {

Tensor::Tensor(void* data, DType dtype, Device device, std::initializer_list<int64_t> dims)
    : data(data), dtype(dtype), device(device) {
  TANDEM_CHECK(dims.size() <= kMaxTensorDims) << "too many dims: " << dims.size();
  for (int64_t d : dims) {
    TANDEM_CHECK(d >= 0) << "negative dim " << d;
    shape[ndim++] = d;
  }
}

int64_t Tensor::NumElements() const {
  int64_t n = 1;
  for (int i = 0; i < ndim; ++i) n *= shape[i];
  return n;
}

Tensor Tensor::Rows(int64_t begin, int64_t count) const {
  TANDEM_CHECK(ndim >= 1 && begin >= 0 && count >= 0 && begin + count <= shape[0])
      << "rows [" << begin << ", " << begin + count << ") of " << DebugString();
  Tensor t = *this;
  size_t row_bytes = shape[0] == 0 ? 0 : NumBytes() / static_cast<size_t>(shape[0]);
  t.data = static_cast<char*>(data) + static_cast<size_t>(begin) * row_bytes;
  t.shape[0] = count;
  return t;
}

Tensor Tensor::Reshape(std::initializer_list<int64_t> dims) const {
  Tensor t(data, dtype, device, dims);
  TANDEM_CHECK_EQ(t.NumElements(), NumElements()) << "reshape of " << DebugString();
  return t;
}

std::string Tensor::DebugString() const {
  std::string dims;
  for (int i = 0; i < ndim; ++i) dims += (i ? ", " : "") + std::to_string(shape[i]);
  std::string_view type = DTypeName(dtype);
  return fmt::format("{}[{}]@{}", type, dims, device == Device::kCpu ? "cpu" : "cuda");
}

}  // namespace tandem::runtime
