// Copies one checkpoint tensor to a backend device, converted on the host to
// the backend's compute dtype (bf16/f16/f32 -> f32 for the CPU reference,
// -> bf16 for CUDA), after checking its name, dtype and shape.
// Thread rule: engine thread (uses the backend).
#pragma once

#include <string>
#include <vector>

#include "common/model/weights.h"
#include "common/runtime/backend.h"

namespace tandem::runtime {

// NotFound when `name` is missing; InvalidArgument naming the tensor when its
// shape differs from `shape`, its dtype is not F32/F16/BF16, or its byte size
// does not match its shape.
StatusOr<Buffer> UploadWeight(Backend* backend, const model::ModelWeights& weights, const std::string& name,
                              const std::vector<int64_t>& shape);

// Uploads host fp32 values (e.g. RoPE frequencies) as an F32 tensor of `shape`.
StatusOr<Buffer> UploadF32(Backend* backend, const std::vector<float>& values, const std::vector<int64_t>& shape);

}  // namespace tandem::runtime
