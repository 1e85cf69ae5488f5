// LaunchApplyTokenMask: structured output's allowed-token masks (common/grammar) applied to
// logits rows before token selection: a token whose bit is clear gets -inf, the same as
// Sampler::ProcessLogits does on the host. Only the rows with a mask are listed.
// Thread rule: the launcher only queues work on the given stream.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "common/base/status.h"

namespace tandem::kernels {

struct TokenMaskParams {
  float* logits = nullptr;  // [num_logits_rows, logits_stride], updated in place
  int64_t logits_stride = 0;
  int num_logits_rows = 0;
  int vocab = 0;
  const int32_t* rows = nullptr;    // [num_rows] logits row of each mask, distinct, in [0, num_logits_rows)
  const uint32_t* masks = nullptr;  // [num_rows, mask_words]: bit (t % 32) of word t / 32 set = token t allowed
  int num_rows = 0;
  int mask_words = 0;  // (vocab + 31) / 32
};

// Errors: InvalidArgument on null pointers or bad sizes; Internal on a launch failure.
Status LaunchApplyTokenMask(const TokenMaskParams& params, cudaStream_t stream);

}  // namespace tandem::kernels
