// Sampler: picks next tokens from fp32 logits on the host, following
// SamplingParams (see sampling_params.h for the exact semantics and order).
// Reproducible: the random draw for a sequence is a pure function of its
// seed and the number of tokens it has output, never of the batch.
// Thread rule: one Sampler per thread (it keeps scratch buffers).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/base/ids.h"
#include "common/base/status.h"
#include "common/runtime/sampling_params.h"

namespace tandem::runtime {

// One sequence's view for a sampling step. Spans must stay valid for the call.
struct SampleRequest {
  const SamplingParams* params = nullptr;    // validated
  std::span<const TokenId> prompt_tokens{};  // for the repetition penalty
  std::span<const TokenId> output_tokens{};  // generated so far; its size is the step index
  std::span<const TokenId> eos_token_ids{};  // the model's eos ids
  uint64_t seed = 0;                         // params->seed, or the engine's per-request seed
  // Structured output: the tokens the grammar allows next, (vocab + 31) / 32 words, bit
  // (t % 32) of word t / 32 set = token t allowed; the others get -inf after the penalties,
  // logit_bias and the min_tokens mask. Empty: no mask.
  std::span<const uint32_t> allowed_tokens{};
};

struct TokenLogprob {
  TokenId token = -1;
  float logprob = 0;  // -inf for a token the processing masked
};

// A sampled token's logprob and the most likely tokens' (SamplingParams::logprobs).
struct SampledLogprobs {
  float logprob = 0;
  std::vector<TokenLogprob> top;  // highest first, lowest id on ties; params.logprobs entries
};

class Sampler {
 public:
  // The next token from `logits` [vocab]. NaN counts as -inf.
  // InvalidArgument when no token is left to pick (every logit -inf or masked).
  StatusOr<TokenId> Sample(std::span<const float> logits, const SampleRequest& request);

  // The logprobs of `token` and the params.logprobs most likely tokens, from the
  // logits the last Sample call processed (see sampling_params.h: after penalties,
  // logit_bias and masks, divided by a temperature > 0). REQUIRES: that call
  // succeeded and params.logprobs >= 0.
  SampledLogprobs Logprobs(const SamplingParams& params, TokenId token);

  // The logprob of `token` and the `k` most likely tokens' in `logits` divided by
  // `temperature` when > 0 (-inf stays -inf). Prompt logprobs use the raw logits (0).
  static SampledLogprobs RowLogprobs(std::span<const float> logits, float temperature, TokenId token, int k);

  // Sample for each row of `logits` [requests.size(), vocab] (row-major).
  StatusOr<std::vector<TokenId>> SampleBatch(std::span<const float> logits, int vocab_size,
                                             std::span<const SampleRequest> requests);

  // Steps 1-2 of the semantics (penalties, logit_bias, min_tokens mask), in place.
  static void ProcessLogits(std::span<float> logits, const SampleRequest& request);

  // The uniform draw in [0, 1) used at output step `step` of a sequence seeded `seed`.
  static double UniformForStep(uint64_t seed, uint64_t step);

 private:
  // A draw at temperature > 0; `best` is the argmax of work_.
  TokenId Draw(const SamplingParams& params, int32_t best, double uniform);

  std::vector<float> work_;     // processed logits
  std::vector<int32_t> order_;  // candidate token ids, most likely first
  std::vector<double> probs_;   // their probabilities
};

}  // namespace tandem::runtime
