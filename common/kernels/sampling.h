// Token selection on the GPU from fp32 logits, without copying logits to the host:
// greedy argmax, and a sampler with temperature, top-k, top-p, min-p and per-request seeds.
//
// Sampler semantics per row (probabilities p = softmax(logits / temperature)):
//   1. temperature <= 0 (or top_k == 1): argmax (lowest index on ties).
//   2. top-k (0 < top_k < vocab): keep tokens whose logit >= the k-th largest logit
//      (ties at the boundary are all kept).
//   3. top-p (top_p < 1): of those, keep the highest-probability tokens whose total mass is
//      >= top_p of the mass kept by step 2 (the smallest such set, boundary ties kept).
//   4. min-p (min_p > 0): keep only tokens with p >= min_p * max(p).
//   5. draw from the kept tokens in proportion to p (Gumbel-max with counter-based noise
//      from (seed, offset, token id): the same inputs give the same token on any run).
// Thread rule: launchers only queue work on the given stream.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "common/base/status.h"

namespace tandem::kernels {

struct ArgmaxParams {
  const float* logits = nullptr;  // [num_rows, logits_stride]
  int64_t logits_stride = 0;      // >= vocab
  int32_t* out_tokens = nullptr;  // [num_rows]
  int num_rows = 0;
  int vocab = 0;
};

// Errors: InvalidArgument on null pointers or bad sizes; Internal on a launch failure.
Status LaunchArgmax(const ArgmaxParams& params, cudaStream_t stream);

struct SamplingParams {
  const float* logits = nullptr;       // [num_rows, logits_stride]
  int64_t logits_stride = 0;           // >= vocab
  int32_t* out_tokens = nullptr;       // [num_rows]
  const float* temperature = nullptr;  // [num_rows]; <= 0 means greedy
  const int32_t* top_k = nullptr;      // [num_rows]; <= 0 or >= vocab means off
  const float* top_p = nullptr;        // [num_rows]; >= 1 means off
  const float* min_p = nullptr;        // [num_rows]; <= 0 means off
  const uint64_t* seeds = nullptr;     // [num_rows] per-request seed
  const uint64_t* offsets = nullptr;   // [num_rows] per-request step counter (fresh noise per step)
  int num_rows = 0;
  int vocab = 0;
};

// Errors: InvalidArgument on null pointers or bad sizes; Internal on a launch failure.
Status LaunchSampling(const SamplingParams& params, cudaStream_t stream);

}  // namespace tandem::kernels
