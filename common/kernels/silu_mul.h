// SiLU-and-mul of the fused gate/up projection: out[t, i] = silu(gate[t, i]) * up[t, i],
// where the input row is [gate (ffn), up (ffn)]. fp32 math, one bf16 rounding.
// Thread rule: launchers only queue work on the given stream.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include "common/base/status.h"

namespace tandem::kernels {

struct SiluMulParams {
  const __nv_bfloat16* gate_up = nullptr;  // [num_tokens, 2 * ffn]
  __nv_bfloat16* out = nullptr;            // [num_tokens, ffn]
  int num_tokens = 0;
  int ffn = 0;  // intermediate size, multiple of 8
};

// Errors: InvalidArgument on null pointers or bad sizes; Internal on a launch failure.
Status LaunchSiluMul(const SiluMulParams& params, cudaStream_t stream);

}  // namespace tandem::kernels
