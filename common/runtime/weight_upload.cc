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

// Appends the tensor's values, as fp32, to `out`.
Status AppendAsF32(const model::ModelWeights& weights, const WeightPart& part, std::vector<float>* out) {
  TANDEM_ASSIGN_OR_RETURN(model::TensorView view, weights.Get(part.name));
  if (view.shape != part.shape) {
    return InvalidArgumentError(fmt::format("tensor {}: shape {}, expected {}", part.name, ShapeString(view.shape),
                                            ShapeString(part.shape)));
  }
  if (view.dtype != DType::kF32 && view.dtype != DType::kF16 && view.dtype != DType::kBF16) {
    return InvalidArgumentError(fmt::format("tensor {}: unsupported dtype {}", part.name, DTypeName(view.dtype)));
  }
  size_t count = 1;
  for (int64_t d : part.shape) count *= static_cast<size_t>(d);
  if (view.data == nullptr || view.num_bytes != count * DTypeSize(view.dtype)) {
    return InvalidArgumentError(
        fmt::format("tensor {}: {} bytes for shape {}", part.name, view.num_bytes, ShapeString(part.shape)));
  }
  out->reserve(out->size() + count);
  for (size_t i = 0; i < count; ++i) out->push_back(ElementAsF32(view, i));
  return Status::Ok();
}

}  // namespace

StatusOr<Buffer> UploadWeight(Backend* backend, const model::ModelWeights& weights,
                              const std::vector<WeightPart>& parts) {
  TANDEM_CHECK(!parts.empty());
  std::vector<int64_t> shape = parts[0].shape;
  std::vector<float> host;
  for (size_t i = 0; i < parts.size(); ++i) {
    const auto& s = parts[i].shape;
    TANDEM_CHECK(!s.empty() && s.size() == shape.size() && std::equal(s.begin() + 1, s.end(), shape.begin() + 1))
        << "fused parts must agree past dim 0: " << parts[i].name;
    if (i > 0) shape[0] += s[0];
    TANDEM_RETURN_IF_ERROR(AppendAsF32(weights, parts[i], &host));
  }
  const DType target = backend->compute_dtype();
  TANDEM_ASSIGN_OR_RETURN(Buffer buffer, backend->Allocate(target, shape));
  if (target == DType::kF32) {
    TANDEM_RETURN_IF_ERROR(backend->CopyToDevice(host.data(), host.size() * 4, buffer.tensor()));
  } else if (target == DType::kBF16) {
    std::vector<uint16_t> narrow(host.size());
    for (size_t i = 0; i < host.size(); ++i) narrow[i] = F32ToBF16(host[i]);
    TANDEM_RETURN_IF_ERROR(backend->CopyToDevice(narrow.data(), narrow.size() * 2, buffer.tensor()));
  } else {
    return InvalidArgumentError(fmt::format("backend compute dtype {} is not supported", DTypeName(target)));
  }
  return buffer;
}

}  // namespace tandem::runtime
