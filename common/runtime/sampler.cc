#include "common/runtime/sampler.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <unordered_map>

namespace tandem::runtime {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Argmax with the lowest id on ties; -1 when nothing is finite.
int32_t Argmax(std::span<const float> logits) {
  int32_t best = -1;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] != kNegInf && (best < 0 || logits[i] > logits[best])) best = static_cast<int32_t>(i);
  }
  return best;
}

}  // namespace

double Sampler::UniformForStep(uint64_t seed, uint64_t step) {
  uint64_t bits = SplitMix64(SplitMix64(seed) ^ SplitMix64(step + 0x5bd1e995ULL));
  return static_cast<double>(bits >> 11) * 0x1.0p-53;  // 53 random bits
}

void Sampler::ProcessLogits(std::span<float> logits, const SampleRequest& r) {
  const SamplingParams& p = *r.params;
  const auto vocab = static_cast<TokenId>(logits.size());
  for (float& l : logits) {
    if (std::isnan(l)) l = kNegInf;
  }
  if (p.repetition_penalty != 1.0f) {
    std::vector<bool> seen(logits.size(), false);
    for (auto tokens : {r.prompt_tokens, r.output_tokens}) {
      for (TokenId t : tokens) {
        if (t < 0 || t >= vocab || seen[t]) continue;
        seen[t] = true;
        logits[t] = logits[t] > 0 ? logits[t] / p.repetition_penalty : logits[t] * p.repetition_penalty;
      }
    }
  }
  if (p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f) {
    std::unordered_map<TokenId, int> counts;
    for (TokenId t : r.output_tokens) {
      if (t >= 0 && t < vocab) ++counts[t];
    }
    for (const auto& [t, c] : counts) logits[t] -= p.frequency_penalty * c + p.presence_penalty;
  }
  for (const auto& [t, bias] : p.logit_bias) {
    if (t >= 0 && t < vocab) logits[t] += bias;
  }
  if (static_cast<int>(r.output_tokens.size()) < p.min_tokens) {
    auto mask = [&](std::span<const TokenId> ids) {
      for (TokenId t : ids) {
        if (t >= 0 && t < vocab) logits[t] = kNegInf;
      }
    };
    if (!p.ignore_eos) mask(r.eos_token_ids);
    mask(p.stop_token_ids);
  }
  if (!r.allowed_tokens.empty()) {
    for (TokenId t = 0; t < vocab; ++t) {
      if ((r.allowed_tokens[t / 32] >> (t % 32) & 1u) == 0) logits[t] = kNegInf;
    }
  }
}

TokenId Sampler::Draw(const SamplingParams& p, int32_t best, double uniform) {
  // Candidates: every finite token. Sorted (most likely first, lowest id on
  // ties) only when top_k or top_p needs the order.
  order_.clear();
  for (size_t i = 0; i < work_.size(); ++i) {
    if (work_[i] != kNegInf) order_.push_back(static_cast<int32_t>(i));
  }
  auto more_likely = [&](int32_t a, int32_t b) { return work_[a] > work_[b] || (work_[a] == work_[b] && a < b); };
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < order_.size()) {
    // Keep every token whose logit reaches the k-th largest (ties at the boundary stay, as in HF).
    std::nth_element(order_.begin(), order_.begin() + (p.top_k - 1), order_.end(), more_likely);
    const float kth = work_[order_[p.top_k - 1]];
    order_.erase(std::remove_if(order_.begin(), order_.end(), [&](int32_t t) { return work_[t] < kth; }), order_.end());
  }
  if (p.top_k > 0 || p.top_p < 1.0f) std::sort(order_.begin(), order_.end(), more_likely);
  size_t keep = order_.size();
  // Unnormalized softmax of logits / temperature, in double; the best token has 1.
  probs_.resize(keep);
  const double inv_t = 1.0 / static_cast<double>(p.temperature), max_logit = work_[best] * inv_t;
  double sum = 0.0;
  for (size_t i = 0; i < keep; ++i) sum += (probs_[i] = std::exp(work_[order_[i]] * inv_t - max_logit));
  // top_p: the shortest (sorted) prefix whose mass reaches top_p.
  if (p.top_p < 1.0f) {
    double mass = 0.0;
    size_t kept = 0;
    while (kept < keep && (kept == 0 || mass < p.top_p * sum)) mass += probs_[kept++];
    while (kept < keep && probs_[kept] == probs_[kept - 1]) ++kept;  // boundary ties stay
    keep = kept;
  }
  // min_p: relative to the best token, whose weight is 1.
  double total = 0.0;
  for (size_t i = 0; i < keep; ++i) {
    if (probs_[i] < p.min_p) probs_[i] = 0.0;
    total += probs_[i];
  }
  const double target = uniform * total;
  double acc = 0.0;
  int32_t last = best;
  for (size_t i = 0; i < keep; ++i) {
    if (probs_[i] == 0.0) continue;
    acc += probs_[i];
    last = order_[i];
    if (target < acc) return last;
  }
  return last;  // rounding at the very top of the range
}

StatusOr<TokenId> Sampler::Sample(std::span<const float> logits, const SampleRequest& r) {
  TANDEM_CHECK(r.params != nullptr) << "SampleRequest without params";
  work_.assign(logits.begin(), logits.end());
  ProcessLogits(work_, r);
  const int32_t best = Argmax(work_);
  if (best < 0) return InvalidArgumentError("sampling: every token is masked or -inf");
  if (r.params->temperature == 0.0f) return best;
  return Draw(*r.params, best, UniformForStep(r.seed, r.output_tokens.size()));
}

SampledLogprobs Sampler::Logprobs(const SamplingParams& params, TokenId token) {
  TANDEM_CHECK(Argmax(work_) >= 0 && params.logprobs >= 0) << "Logprobs without a sampled row";
  return RowLogprobs(work_, params.temperature, token, params.logprobs);
}

SampledLogprobs Sampler::RowLogprobs(std::span<const float> logits, float temperature, TokenId token, int k) {
  const double inv_t = temperature > 0.0f ? 1.0 / static_cast<double>(temperature) : 1.0;
  SampledLogprobs out;
  const int32_t best = Argmax(logits);
  if (best < 0) {
    out.logprob = kNegInf;
    return out;
  }
  const double max_scaled = logits[best] * inv_t;
  double sum = 0.0;
  for (float l : logits) {
    if (l != kNegInf) sum += std::exp(l * inv_t - max_scaled);
  }
  const double log_z = max_scaled + std::log(sum);
  auto logprob = [&](TokenId t) {
    return logits[t] == kNegInf ? kNegInf : static_cast<float>(logits[t] * inv_t - log_z);
  };
  out.logprob = token >= 0 && static_cast<size_t>(token) < logits.size() ? logprob(token) : kNegInf;
  const size_t top = std::min<size_t>(static_cast<size_t>(std::max(k, 0)), logits.size());
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + top, order.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  for (size_t i = 0; i < top; ++i) out.top.push_back(TokenLogprob{order[i], logprob(order[i])});
  return out;
}

StatusOr<std::vector<TokenId>> Sampler::SampleBatch(std::span<const float> logits, int vocab_size,
                                                    std::span<const SampleRequest> requests) {
  if (vocab_size <= 0 || logits.size() != requests.size() * static_cast<size_t>(vocab_size)) {
    return InvalidArgumentError(
        fmt::format("SampleBatch: {} logits for {} rows of {}", logits.size(), requests.size(), vocab_size));
  }
  std::vector<TokenId> tokens(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    StatusOr<TokenId> token = Sample(logits.subspan(i * vocab_size, vocab_size), requests[i]);
    if (!token.ok()) return token.status().WithContext(fmt::format("row {}", i));
    tokens[i] = *token;
  }
  return tokens;
}

}  // namespace tandem::runtime
