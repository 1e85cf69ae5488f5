#include "common/runtime/sampling_params.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace tandem::runtime {
namespace {

bool InRange(float v, float lo, float hi) { return std::isfinite(v) && v >= lo && v <= hi; }

}  // namespace

Status SamplingParams::Validate() const {
  if (!InRange(temperature, 0.0f, 100.0f)) {
    return InvalidArgumentError(fmt::format("temperature must be in [0, 100], got {}", temperature));
  }
  if (top_k < 0) return InvalidArgumentError(fmt::format("top_k must be >= 0 (0 disables), got {}", top_k));
  if (!InRange(top_p, 0.0f, 1.0f) || top_p == 0.0f) {
    return InvalidArgumentError(fmt::format("top_p must be in (0, 1], got {}", top_p));
  }
  if (!InRange(min_p, 0.0f, 1.0f)) return InvalidArgumentError(fmt::format("min_p must be in [0, 1], got {}", min_p));
  if (!InRange(repetition_penalty, 0.0f, 100.0f) || repetition_penalty == 0.0f) {
    return InvalidArgumentError(fmt::format("repetition_penalty must be in (0, 100], got {}", repetition_penalty));
  }
  if (!InRange(presence_penalty, -2.0f, 2.0f)) {
    return InvalidArgumentError(fmt::format("presence_penalty must be in [-2, 2], got {}", presence_penalty));
  }
  if (!InRange(frequency_penalty, -2.0f, 2.0f)) {
    return InvalidArgumentError(fmt::format("frequency_penalty must be in [-2, 2], got {}", frequency_penalty));
  }
  if (max_tokens < 1) return InvalidArgumentError(fmt::format("max_tokens must be >= 1, got {}", max_tokens));
  if (num_output_tokens_in_prompt < 0) {
    return InvalidArgumentError(
        fmt::format("num_output_tokens_in_prompt must be >= 0, got {}", num_output_tokens_in_prompt));
  }
  if (min_tokens < 0 || int64_t{min_tokens} > int64_t{max_tokens} + num_output_tokens_in_prompt) {
    return InvalidArgumentError(
        fmt::format("min_tokens must be in [0, max_tokens + num_output_tokens_in_prompt], got {}", min_tokens));
  }
  if (logprobs < -1 || logprobs > kMaxTopLogprobs) {
    return InvalidArgumentError(fmt::format("logprobs must be in [-1, {}], got {}", kMaxTopLogprobs, logprobs));
  }
  if (prompt_logprobs < -1 || prompt_logprobs > kMaxTopLogprobs) {
    return InvalidArgumentError(
        fmt::format("prompt_logprobs must be in [-1, {}], got {}", kMaxTopLogprobs, prompt_logprobs));
  }
  if (structured_output.size() > kMaxStructuredOutputBytes) {
    return InvalidArgumentError(fmt::format("structured_output must be at most {} bytes, got {}",
                                            kMaxStructuredOutputBytes, structured_output.size()));
  }
  if (logit_bias.size() > static_cast<size_t>(kMaxLogitBias)) {
    return InvalidArgumentError(fmt::format("logit_bias: at most {} tokens, got {}", kMaxLogitBias, logit_bias.size()));
  }
  std::vector<TokenId> biased;
  for (const auto& [t, bias] : logit_bias) {
    if (t < 0) return InvalidArgumentError(fmt::format("logit_bias: negative id {}", t));
    if (!InRange(bias, -100.0f, 100.0f)) {
      return InvalidArgumentError(fmt::format("logit_bias: bias of token {} must be in [-100, 100], got {}", t, bias));
    }
    biased.push_back(t);
  }
  std::sort(biased.begin(), biased.end());
  if (std::adjacent_find(biased.begin(), biased.end()) != biased.end()) {
    return InvalidArgumentError("logit_bias: a token id is listed twice");
  }
  for (TokenId t : stop_token_ids) {
    if (t < 0) return InvalidArgumentError(fmt::format("stop_token_ids: negative id {}", t));
  }
  return Status::Ok();
}

StatusOr<int> EffectiveMaxTokens(const SamplingParams& params, int prompt_len, int max_model_len) {
  if (prompt_len < 0 || prompt_len >= max_model_len) {
    return InvalidArgumentError(
        fmt::format("prompt of {} tokens leaves no room in a model length of {}", prompt_len, max_model_len));
  }
  return std::min(params.max_tokens, max_model_len - prompt_len);
}

}  // namespace tandem::runtime
