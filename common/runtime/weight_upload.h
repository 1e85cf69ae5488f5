// Copies checkpoint tensors to a backend device, converted on the host to the
// backend's compute dtype (bf16/f16/f32 -> f32 for the CPU reference, -> bf16
// for CUDA), after checking their names, dtypes and shapes. Fused projections
// (QKV, gate/up) are uploaded as one tensor of concatenated rows.
// Thread rule: engine thread (uses the backend).
#pragma once

#include <string>
#include <vector>

#include "common/model/weights.h"
#include "common/runtime/backend.h"

namespace tandem::runtime {

// One piece of a (possibly fused) weight: a checkpoint tensor and its expected shape.
struct WeightPart {
  std::string name;
  std::vector<int64_t> shape;
};

// Uploads the parts concatenated along dim 0 (all parts share their other
// dims). NotFound when a name is missing; InvalidArgument naming the tensor
// when its shape differs from the expected one, its dtype is not
// F32/F16/BF16, or its byte size does not match its shape.
StatusOr<Buffer> UploadWeight(Backend* backend, const model::ModelWeights& weights,
                              const std::vector<WeightPart>& parts);

}  // namespace tandem::runtime
