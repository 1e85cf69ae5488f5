// RMSNorm over rows, optionally fused with the residual add that precedes it:
//   with residual:  residual = input + residual  (rounded to bf16 when the stream is bf16);
//                   x = residual
//   without:        x = input
//   out = bf16(x * rsqrt(mean(x^2) + eps) * weight)     (all math in fp32)
// Input and residual share one dtype, bf16 or fp32 (the model keeps its residual stream
// in fp32: fewer roundings, closer to the reference).
// Thread rule: launchers only queue work on the given stream.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include "common/base/status.h"

namespace tandem::kernels {

struct RmsNormParams {
  const void* input = nullptr;            // [num_rows, hidden], dtype
  void* residual = nullptr;               // [num_rows, hidden], dtype, in/out; nullptr: plain RMSNorm
  const __nv_bfloat16* weight = nullptr;  // [hidden]
  __nv_bfloat16* out = nullptr;           // [num_rows, hidden]; may alias a bf16 input
  int num_rows = 0;
  int hidden = 0;     // multiple of 8
  float eps = 1e-5f;  // rms_norm_eps of the model config
  bool f32 = false;   // input and residual are fp32 (else bf16)
};

// Errors: InvalidArgument on null pointers or bad sizes; Internal on a launch failure.
Status LaunchRmsNorm(const RmsNormParams& params, cudaStream_t stream);

}  // namespace tandem::kernels
