#include "common/runtime/cpu_backend.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "common/runtime/op_checks.h"

namespace tandem::runtime {
namespace {

constexpr int64_t kMaxAllocBytes = int64_t{1} << 40;

// Dot product with eight independent accumulators (vectorizable, fixed order).
float Dot(const float* a, const float* b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * b[i + j];
  }
  float tail = 0.0f;
  for (; i < n; ++i) tail += a[i] * b[i];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])) + tail;
}

}  // namespace

CpuBackend::~CpuBackend() { TANDEM_CHECK_EQ(live_buffers_, 0) << "CpuBackend destroyed with live buffers"; }

StatusOr<Buffer> CpuBackend::Allocate(DType dtype, const std::vector<int64_t>& shape) {
  if (shape.size() > kMaxTensorDims) return InvalidArgumentError("Allocate: too many dims");
  int64_t bytes = static_cast<int64_t>(DTypeSize(dtype));
  for (int64_t d : shape) {
    if (d < 0 || (d > 0 && bytes > kMaxAllocBytes / d)) {
      return InvalidArgumentError(fmt::format("Allocate: bad shape dim {}", d));
    }
    bytes *= d;
  }
  // calloc: zeroed pages are mapped lazily, so a large KV pool costs nothing
  // until used. At least one byte, so even an empty tensor has a defined pointer.
  const size_t size = bytes > 0 ? static_cast<size_t>(bytes) : 1;
  void* data = std::calloc(size, 1);
  if (data == nullptr) return ResourceExhaustedError(fmt::format("Allocate: {} bytes of host memory", size));
  Tensor t;
  t.data = data;
  t.dtype = dtype;
  t.device = Device::kCpu;
  t.ndim = static_cast<int>(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) t.shape[i] = shape[i];
  ++live_buffers_;
  return Buffer(t, this);
}

void CpuBackend::Free(void* data) {
  std::free(data);
  --live_buffers_;
}

Status CpuBackend::CopyToDevice(const void* src, size_t num_bytes, Tensor dst) {
  if (!dst.defined() || dst.device != Device::kCpu || num_bytes != dst.NumBytes()) {
    return InvalidArgumentError(fmt::format("CopyToDevice: {} bytes into {}", num_bytes, dst.DebugString()));
  }
  if (num_bytes > 0) std::memcpy(dst.data, src, num_bytes);
  return Status::Ok();
}

Status CpuBackend::FillDevice(Tensor dst, const HostFill& fill) {
  if (!dst.defined() || dst.device != Device::kCpu) {
    return InvalidArgumentError(fmt::format("FillDevice: {} is not on the CPU", dst.DebugString()));
  }
  constexpr size_t kChunkBytes = 64 << 20;
  const size_t total = dst.NumBytes();
  for (size_t offset = 0; offset < total; offset += kChunkBytes) {
    const size_t n = std::min(kChunkBytes, total - offset);
    TANDEM_RETURN_IF_ERROR(fill(offset, std::span<std::byte>(static_cast<std::byte*>(dst.data) + offset, n)));
  }
  return Status::Ok();
}

Status CpuBackend::CopyToHost(Tensor src, void* dst, size_t num_bytes) {
  if (!src.defined() || src.device != Device::kCpu || num_bytes != src.NumBytes()) {
    return InvalidArgumentError(fmt::format("CopyToHost: {} bytes from {}", num_bytes, src.DebugString()));
  }
  if (num_bytes > 0) std::memcpy(dst, src.data, num_bytes);
  return Status::Ok();
}

Status CpuBackend::Embedding(Tensor ids, Tensor table, Tensor out) {
  TANDEM_RETURN_IF_ERROR(CheckEmbedding(ids, table, out, DType::kF32));
  int64_t vocab = table.shape[0], hidden = table.shape[1];
  for (int64_t i = 0; i < ids.shape[0]; ++i) {
    int32_t id = ids.As<int32_t>()[i];
    if (id < 0 || id >= vocab) return InvalidArgumentError(fmt::format("Embedding: token id {} out of range", id));
    std::memcpy(out.As<float>() + i * hidden, table.As<float>() + id * hidden, hidden * sizeof(float));
  }
  return Status::Ok();
}

Status CpuBackend::RmsNorm(const RmsNormParams& p) {
  TANDEM_RETURN_IF_ERROR(CheckRmsNorm(p, DType::kF32));
  int64_t rows = p.x.shape[0], dim = p.x.shape[1];
  const float* w = p.weight.As<float>();
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = p.x.As<float>() + r * dim;
    float* y = p.out.As<float>() + r * dim;
    if (p.residual.defined()) {
      float* res = p.residual.As<float>() + r * dim;
      for (int64_t i = 0; i < dim; ++i) res[i] += x[i];
      x = res;
    }
    float mean_square = Dot(x, x, dim) / static_cast<float>(dim);
    float inv_rms = 1.0f / std::sqrt(mean_square + p.eps);
    for (int64_t i = 0; i < dim; ++i) y[i] = w[i] * (x[i] * inv_rms);
  }
  return Status::Ok();
}

Status CpuBackend::Linear(const LinearParams& p) {
  TANDEM_RETURN_IF_ERROR(CheckLinear(p, DType::kF32));
  return LinearAsOps(p, [](const LinearParams& q) {
    const int64_t n = q.x.shape[0], in = q.x.shape[1], out_features = q.weight.shape[0];
    const float* bias = q.bias.defined() ? q.bias.As<float>() : nullptr;
    // Weight row outer so it stays in cache across the batch rows.
    for (int64_t m = 0; m < out_features; ++m) {
      const float* w = q.weight.As<float>() + m * in;
      const float b = bias ? bias[m] : 0.0f;
      for (int64_t r = 0; r < n; ++r) {
        float& y = q.out.As<float>()[r * out_features + m];
        const float v = Dot(q.x.As<float>() + r * in, w, in) + b;
        y = q.accumulate ? y + v : v;
      }
    }
    return Status::Ok();
  });
}

Status CpuBackend::SiluAndMul(Tensor gate_up, Tensor out) {
  TANDEM_RETURN_IF_ERROR(CheckSiluAndMul(gate_up, out, DType::kF32));
  const int64_t rows = out.shape[0], ffn = out.shape[1];
  for (int64_t r = 0; r < rows; ++r) {
    const float* gate = gate_up.As<float>() + r * 2 * ffn;
    const float* up = gate + ffn;
    float* y = out.As<float>() + r * ffn;
    for (int64_t i = 0; i < ffn; ++i) y[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
  }
  return Status::Ok();
}

Status CpuBackend::GatherRows(Tensor src, Tensor indices, Tensor out) {
  TANDEM_RETURN_IF_ERROR(CheckGatherRows(src, indices, out));
  size_t row_bytes = static_cast<size_t>(src.shape[1]) * DTypeSize(src.dtype);
  for (int64_t i = 0; i < indices.shape[0]; ++i) {
    int32_t row = indices.As<int32_t>()[i];
    if (row < 0 || row >= src.shape[0]) {
      return InvalidArgumentError(fmt::format("GatherRows: row {} out of range", row));
    }
    std::memcpy(static_cast<char*>(out.data) + i * row_bytes, static_cast<const char*>(src.data) + row * row_bytes,
                row_bytes);
  }
  return Status::Ok();
}

}  // namespace tandem::runtime
