#include "common/runtime/weight_upload.h"

#include <fmt/format.h>

#include <cstring>

namespace tandem::runtime {
namespace {

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

float ElementAsF32(const model::TensorView& t, size_t i) {
  uint16_t half;
  switch (t.dtype) {
    case DType::kF32: {
      float f;
      std::memcpy(&f, t.data + i * 4, 4);
      return f;
    }
    case DType::kBF16:
      std::memcpy(&half, t.data + i * 2, 2);
      return BF16ToF32(half);
    default:  // kF16, checked by the caller
      std::memcpy(&half, t.data + i * 2, 2);
      return F16ToF32(half);
  }
}

}  // namespace

StatusOr<Buffer> UploadWeight(Backend* backend, const model::ModelWeights& weights, const std::string& name,
                              const std::vector<int64_t>& shape) {
  TANDEM_ASSIGN_OR_RETURN(model::TensorView view, weights.Get(name));
  if (view.shape != shape) {
    return InvalidArgumentError(
        fmt::format("tensor {}: shape {}, expected {}", name, ShapeString(view.shape), ShapeString(shape)));
  }
  if (view.dtype != DType::kF32 && view.dtype != DType::kF16 && view.dtype != DType::kBF16) {
    return InvalidArgumentError(fmt::format("tensor {}: unsupported dtype {}", name, DTypeName(view.dtype)));
  }
  size_t count = 1;
  for (int64_t d : shape) count *= static_cast<size_t>(d);
  if (view.data == nullptr || view.num_bytes != count * DTypeSize(view.dtype)) {
    return InvalidArgumentError(fmt::format("tensor {}: {} bytes for shape {}", name, view.num_bytes, ShapeString(shape)));
  }
  DType target = backend->compute_dtype();
  TANDEM_ASSIGN_OR_RETURN(Buffer buffer, backend->Allocate(target, shape));
  if (target == DType::kF32) {
    std::vector<float> host(count);
    for (size_t i = 0; i < count; ++i) host[i] = ElementAsF32(view, i);
    TANDEM_RETURN_IF_ERROR(backend->CopyToDevice(host.data(), count * 4, buffer.tensor()));
  } else if (target == DType::kBF16) {
    std::vector<uint16_t> host(count);
    for (size_t i = 0; i < count; ++i) host[i] = F32ToBF16(ElementAsF32(view, i));
    TANDEM_RETURN_IF_ERROR(backend->CopyToDevice(host.data(), count * 2, buffer.tensor()));
  } else {
    return InvalidArgumentError(fmt::format("backend compute dtype {} is not supported", DTypeName(target)));
  }
  return buffer;
}

StatusOr<Buffer> UploadF32(Backend* backend, const std::vector<float>& values, const std::vector<int64_t>& shape) {
  TANDEM_ASSIGN_OR_RETURN(Buffer buffer, backend->Allocate(DType::kF32, shape));
  if (buffer.tensor().NumElements() != static_cast<int64_t>(values.size())) {
    return InvalidArgumentError(fmt::format("UploadF32: {} values for shape {}", values.size(), ShapeString(shape)));
  }
  TANDEM_RETURN_IF_ERROR(backend->CopyToDevice(values.data(), values.size() * 4, buffer.tensor()));
  return buffer;
}

}  // namespace tandem::runtime
