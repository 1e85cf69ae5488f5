// Shape and dtype checks for the ops in ops.h, shared by every backend so
// all of them reject the same mistakes with the same message. Each returns
// InvalidArgument naming the op and the offending tensor.
// Thread rule: pure functions.
#pragma once

#include "common/base/status.h"
#include "common/runtime/ops.h"

namespace tandem::runtime {

// `act` is the backend's activation dtype.
Status CheckEmbedding(const Tensor& ids, const Tensor& table, const Tensor& out, DType act);
Status CheckRmsNorm(const RmsNormParams& p, DType act);
Status CheckLinear(const LinearParams& p, DType act);
Status CheckRopeKvWrite(const RopeKvWriteParams& p, DType act);
Status CheckPagedAttention(const PagedAttentionParams& p, DType act);
Status CheckSiluAndMul(const Tensor& gate_up, const Tensor& out, DType act);
Status CheckGatherRows(const Tensor& src, const Tensor& indices, const Tensor& out);

}  // namespace tandem::runtime
