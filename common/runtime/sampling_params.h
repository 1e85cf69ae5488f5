// SamplingParams: how one request picks its tokens, and the stop / length
// rules around it. Plain struct with defaults; Validate() before use.
//
// Semantics (applied in this order by Sampler):
//  1. Penalties on the raw logits:
//     - repetition_penalty: Hugging Face semantics. For every distinct token
//       in prompt + output: logit > 0 ? logit / penalty : logit * penalty.
//     - presence_penalty, frequency_penalty: OpenAI semantics, output tokens
//       only: logit -= frequency_penalty * count + presence_penalty * (count > 0).
//     logit_bias (OpenAI): logit += bias for each listed token.
//  2. Before min_tokens outputs, stop tokens (eos unless ignore_eos, and
//     stop_token_ids) are masked out.
//  3. temperature == 0: greedy (argmax, lowest id on ties). Otherwise
//     logits / temperature, then top_k, top_p, min_p filtering (Hugging Face
//     warper order; tokens tied with the top-k / top-p boundary are kept),
//     then one draw from the renormalized distribution.
// Logprobs (logprobs >= 0) are the log-softmax of the logits after steps 1-2,
// divided by the temperature when it is > 0 (vLLM's "processed" logprobs): the
// distribution the token was drawn from before top_k / top_p / min_p cut it.
// Randomness is a pure function of (seed, number of output tokens so far,
// num_output_tokens_in_prompt included), so the same seed and logits give the
// same token in any batch and on any node the request moves to.
// Thread rule: plain value type.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "common/base/ids.h"
#include "common/base/status.h"

namespace tandem::runtime {

inline constexpr int kMaxTopLogprobs = 20;
inline constexpr int kMaxLogitBias = 1024;
inline constexpr size_t kMaxStructuredOutputBytes = 64 << 10;

struct SamplingParams {
  // Softmax temperature; 0 means greedy. Range [0, 100].
  float temperature = 1.0f;
  // Keep only the k most likely tokens; 0 disables. Range >= 0.
  int top_k = 0;
  // Keep the smallest set of most likely tokens whose probability reaches top_p. Range (0, 1].
  float top_p = 1.0f;
  // Drop tokens less likely than min_p times the most likely one. Range [0, 1]; 0 disables.
  float min_p = 0.0f;
  // Seed for reproducible sampling. Unset: the engine draws one per request at admission.
  std::optional<uint64_t> seed;
  // Hugging Face repetition penalty over prompt + output tokens; 1 disables. Range (0, 100].
  float repetition_penalty = 1.0f;
  // OpenAI presence penalty over output tokens; 0 disables. Range [-2, 2].
  float presence_penalty = 0.0f;
  // OpenAI frequency penalty over output tokens; 0 disables. Range [-2, 2].
  float frequency_penalty = 0.0f;
  // OpenAI logit_bias: (token id, bias) pairs, ids distinct and >= 0 (ids outside the
  // vocabulary are ignored), bias in [-100, 100], at most kMaxLogitBias pairs.
  std::vector<std::pair<TokenId, float>> logit_bias;
  // Logprobs of each sampled token: -1 none; k in [0, kMaxTopLogprobs]: the sampled
  // token's logprob and the k most likely tokens' (highest first, lowest id on ties).
  int logprobs = -1;
  // Structured output: the response format the output must follow, {"type":"json_object"} or
  // {"type":"json_schema","schema":{...}} (common/grammar/README.md); at most
  // kMaxStructuredOutputBytes. Empty: free text. The engine compiles it against its vocabulary.
  std::string structured_output;
  // Prompt logprobs (echo with logprobs): -1 none; k in [0, kMaxTopLogprobs]: for every
  // prompt position after the first, the raw log-softmax of the logits before it at the
  // prompt's token and its k most likely tokens (no penalties, no temperature).
  int prompt_logprobs = -1;
  // Extra token ids that end generation (in addition to the model's eos ids).
  std::vector<TokenId> stop_token_ids;
  // When true, the model's eos ids do not stop generation (stop_token_ids still do).
  bool ignore_eos = false;
  // Most output tokens. Range >= 1; also capped by the model length (EffectiveMaxTokens).
  int max_tokens = 16;
  // Stop tokens are masked until this many tokens are out (num_output_tokens_in_prompt
  // included). Range [0, max_tokens + num_output_tokens_in_prompt].
  int min_tokens = 0;
  // The last this-many prompt tokens are this request's own earlier output (it moved
  // to this engine mid-generation): they count as output tokens for the draw's step
  // index, presence/frequency penalties and min_tokens, so the continuation samples
  // what one uninterrupted run would. max_tokens does not count them.
  // Range [0, prompt length - 1] (the engine checks the upper bound).
  int num_output_tokens_in_prompt = 0;

  // InvalidArgument naming the field when a value is out of range.
  Status Validate() const;
};

// min(max_tokens, max_model_len - prompt_len). InvalidArgument when the prompt
// leaves no room for even one output token.
StatusOr<int> EffectiveMaxTokens(const SamplingParams& params, int prompt_len, int max_model_len);

}  // namespace tandem::runtime
