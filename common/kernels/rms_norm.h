// RMSNorm over rows, optionally fused with the residual add that precedes it:
//   with residual:  residual = bf16(input + residual);  x = residual
//   without:        x = input
//   out = bf16(x * rsqrt(mean(x^2) + eps) * weight)     (all math in fp32)
// Thread rule: launchers only queue work on the given stream.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include "common/base/status.h"

namespace tandem::kernels {

struct RmsNormParams {
  const __nv_bfloat16* input = nullptr;   // [num_rows, hidden]
  __nv_bfloat16* residual = nullptr;      // [num_rows, hidden], in/out; nullptr: plain RMSNorm
  const __nv_bfloat16* weight = nullptr;  // [hidden]
  __nv_bfloat16* out = nullptr;           // [num_rows, hidden]; may alias input
  int num_rows = 0;
  int hidden = 0;                         // multiple of 8
  float eps = 1e-5f;                      // rms_norm_eps of the model config
};

// Errors: InvalidArgument on null pointers or bad sizes; Internal on a launch failure.
Status LaunchRmsNorm(const RmsNormParams& params, cudaStream_t stream);

}  // namespace tandem::kernels
