// Embedding gather: out[t] = table[ids[t]] (also usable as a generic bf16 row gather,
// e.g. picking the last token of each sequence before the final norm and LM head).
// Thread rule: launchers only queue work on the given stream.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "common/base/status.h"

namespace tandem::kernels {

struct EmbeddingParams {
  const int32_t* ids = nullptr;          // [num_tokens] row indices into table
  const __nv_bfloat16* table = nullptr;  // [num_rows, hidden]
  __nv_bfloat16* out = nullptr;          // [num_tokens, hidden]
  int num_tokens = 0;
  int num_rows = 0;          // vocab size; ids outside [0, num_rows) give zero rows
  int hidden = 0;            // multiple of 8 (16-byte rows)
  float* out_f32 = nullptr;  // instead of out: fp32 rows (exact copies)
};

// Errors: InvalidArgument on null pointers or bad sizes; Internal on a launch failure.
Status LaunchEmbedding(const EmbeddingParams& params, cudaStream_t stream);

}  // namespace tandem::kernels
