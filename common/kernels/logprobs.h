// Logprobs on the GPU, next to token selection (sampling.h): per row, the
// log-softmax of logits / temperature, the sampled token's logprob and the
// most likely tokens with theirs, so only (1 + top) small entries per row
// come back to the host, never the logits.
//
// Semantics per row (the host reference is runtime::Sampler::Logprobs):
//   - x = logits (NaN as -inf) times 1 / temperature (temperature <= 0: 1);
//     logprob(t) = x[t] - log Σ exp(x) (-inf for a -inf logit);
//   - entry 0 is the row's token (tokens[row]; -1 gives {-1, -inf});
//   - entries 1..num_top[row] are the num_top[row] largest logits, highest
//     first, lowest id on ties (a row with fewer tokens than that lists
//     -inf ones, lowest ids first). REQUIRES: num_top[row] <= vocab.
// Thread rule: launchers only queue work on the given stream.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "common/base/status.h"

namespace tandem::kernels {

inline constexpr int kMaxLogprobsTop = 20;

struct LogprobEntry {
  int32_t token = -1;
  float logprob = 0.f;
};
static_assert(sizeof(LogprobEntry) == 8, "LogprobEntry is copied byte for byte to the host");

struct LogprobsParams {
  const float* logits = nullptr;  // [num_rows, logits_stride], as the selection kernel saw them
  int64_t logits_stride = 0;      // >= vocab
  const float* temperature = nullptr;  // [num_rows], or null for 1 everywhere
  const int32_t* tokens = nullptr;     // [num_rows] the sampled tokens
  const int32_t* num_top = nullptr;    // [num_rows] top entries wanted, in [0, max_top]; < 0: none (row skipped)
  int max_top = 0;                     // [0, kMaxLogprobsTop]
  LogprobEntry* out = nullptr;         // [num_rows, 1 + max_top]; a skipped row is left as it was
  int num_rows = 0;
  int vocab = 0;
};

// Errors: InvalidArgument on null pointers or bad sizes; Internal on a launch failure.
Status LaunchLogprobs(const LogprobsParams& params, cudaStream_t stream);

}  // namespace tandem::kernels
