// Sampler and SamplingParams against independent expectations: allowed sets
// for top-k / top-p / min-p computed here from the softmax, empirical
// frequencies against the softmax, exact penalty arithmetic.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <vector>

#include "common/runtime/sampler.h"
#include "common/runtime/sampling_params.h"

namespace tandem::runtime {
namespace {

const std::vector<float> kLogits = {1.0f, 3.0f, 2.5f, -1.0f, 0.0f, 2.9f, -3.0f, 1.5f};

std::vector<double> Softmax(const std::vector<float>& logits, double temperature = 1.0) {
  std::vector<double> p(logits.size());
  double mx = *std::max_element(logits.begin(), logits.end()), sum = 0;
  for (size_t i = 0; i < p.size(); ++i) sum += (p[i] = std::exp((logits[i] - mx) / temperature));
  for (double& x : p) x /= sum;
  return p;
}

// Tokens picked over `draws` seeds at output step 0.
std::map<TokenId, int> Histogram(const SamplingParams& params, int draws, const std::vector<float>& logits = kLogits) {
  Sampler sampler;
  std::map<TokenId, int> counts;
  for (int seed = 0; seed < draws; ++seed) {
    SampleRequest r{.params = &params, .seed = static_cast<uint64_t>(seed)};
    auto t = sampler.Sample(logits, r);
    TANDEM_CHECK(t.ok()) << t.status().ToString();
    ++counts[*t];
  }
  return counts;
}

TEST(SamplerTest, GreedyPicksArgmaxWithLowestIdOnTies) {
  SamplingParams p;
  p.temperature = 0.0f;
  Sampler s;
  EXPECT_EQ(*s.Sample(kLogits, {.params = &p}), 1);
  std::vector<float> tie = {0.0f, 2.0f, 2.0f};
  EXPECT_EQ(*s.Sample(tie, {.params = &p}), 1);
}

TEST(SamplerTest, TinyTemperatureEqualsGreedy) {
  SamplingParams p;
  p.temperature = 1e-3f;
  auto counts = Histogram(p, 300);
  ASSERT_EQ(counts.size(), 1u);
  EXPECT_EQ(counts.begin()->first, 1);
}

TEST(SamplerTest, FrequenciesFollowTheSoftmax) {
  SamplingParams p;
  p.temperature = 0.7f;
  const int draws = 20000;
  auto counts = Histogram(p, draws);
  auto probs = Softmax(kLogits, 0.7);
  for (size_t t = 0; t < probs.size(); ++t) {
    double freq = counts[static_cast<TokenId>(t)] / double(draws);
    EXPECT_NEAR(freq, probs[t], 4 * std::sqrt(probs[t] * (1 - probs[t]) / draws) + 1e-3) << "token " << t;
  }
}

TEST(SamplerTest, TopKNeverPicksOutsideTheKBest) {
  SamplingParams p;
  p.top_k = 3;
  p.temperature = 5.0f;  // flat, so excluded tokens would show up
  auto counts = Histogram(p, 3000);
  std::set<TokenId> picked;
  for (auto& [t, c] : counts) picked.insert(t);
  EXPECT_EQ(picked, (std::set<TokenId>{1, 5, 2}));
}

TEST(SamplerTest, TopKKeepsTiesAtTheBoundaryLikeHf) {
  SamplingParams p;
  p.top_k = 2;
  p.temperature = 5.0f;
  std::vector<float> logits = {3.0f, 2.0f, 2.0f, 1.0f, 0.0f};
  auto counts = Histogram(p, 3000, logits);
  std::set<TokenId> picked;
  for (auto& [t, c] : counts) picked.insert(t);
  EXPECT_EQ(picked, (std::set<TokenId>{0, 1, 2}));
}

TEST(SamplerTest, TopPKeepsTheSmallestSetReachingP) {
  SamplingParams p;
  p.top_p = 0.6f;
  auto probs = Softmax(kLogits);
  std::vector<int> order(probs.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return probs[a] > probs[b]; });
  std::set<TokenId> allowed;
  double mass = 0;
  for (int t : order) {
    if (mass >= 0.6) break;
    allowed.insert(t);
    mass += probs[t];
  }
  ASSERT_GE(allowed.size(), 2u);
  ASSERT_LT(allowed.size(), probs.size());
  auto counts = Histogram(p, 3000);
  std::set<TokenId> picked;
  for (auto& [t, c] : counts) picked.insert(t);
  EXPECT_EQ(picked, allowed);
}

TEST(SamplerTest, MinPDropsTokensBelowTheThreshold) {
  SamplingParams p;
  p.min_p = 0.3f;
  auto probs = Softmax(kLogits);
  double top = *std::max_element(probs.begin(), probs.end());
  std::set<TokenId> allowed;
  for (size_t t = 0; t < probs.size(); ++t) {
    if (probs[t] >= 0.3 * top) allowed.insert(static_cast<TokenId>(t));
  }
  ASSERT_LT(allowed.size(), probs.size());
  auto counts = Histogram(p, 3000);
  std::set<TokenId> picked;
  for (auto& [t, c] : counts) picked.insert(t);
  EXPECT_EQ(picked, allowed);
}

TEST(SamplerTest, SeededDrawsAreReproducibleAcrossBatches) {
  SamplingParams p;
  p.temperature = 1.5f;
  std::vector<TokenId> out_a = {4, 4}, out_b;
  SampleRequest a{.params = &p, .output_tokens = out_a, .seed = 1234};
  SampleRequest b{.params = &p, .output_tokens = out_b, .seed = 99};
  std::vector<float> other = {0.0f, 0.0f, 9.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  Sampler s1, s2;
  auto alone = s1.Sample(kLogits, a);
  std::vector<float> batch(kLogits);
  batch.insert(batch.begin(), other.begin(), other.end());  // A is row 1 of 2
  std::vector<SampleRequest> reqs = {b, a};
  auto batched = s2.SampleBatch(batch, 8, reqs);
  ASSERT_TRUE(alone.ok() && batched.ok());
  EXPECT_EQ((*batched)[1], *alone);
  // Different steps of one seed draw differently (not a constant stream).
  std::set<double> draws;
  for (uint64_t step = 0; step < 50; ++step) draws.insert(Sampler::UniformForStep(1234, step));
  EXPECT_EQ(draws.size(), 50u);
  EXPECT_NE(Sampler::UniformForStep(1, 0), Sampler::UniformForStep(2, 0));
}

TEST(SamplerTest, PenaltiesFollowTheirDocumentedFormulas) {
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  std::vector<TokenId> prompt = {1, 3}, output = {3, 3, 5, 1};
  std::vector<float> logits = kLogits;
  Sampler::ProcessLogits(logits, {.params = &p, .prompt_tokens = prompt, .output_tokens = output});
  // HF repetition over prompt + output (once per token), then OpenAI penalties on output counts.
  EXPECT_FLOAT_EQ(logits[1], 3.0f / 2 - 0.25f * 1 - 0.5f);
  EXPECT_FLOAT_EQ(logits[3], -1.0f * 2 - 0.25f * 2 - 0.5f);
  EXPECT_FLOAT_EQ(logits[5], 2.9f / 2 - 0.25f - 0.5f);
  EXPECT_FLOAT_EQ(logits[0], 1.0f);
  EXPECT_FLOAT_EQ(logits[2], 2.5f);
}

TEST(SamplerTest, MinTokensMasksStopTokensAndCheckFinish) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.min_tokens = 2;
  p.max_tokens = 4;
  p.stop_token_ids = {5};
  std::vector<TokenId> eos = {1}, out = {7};
  Sampler s;
  // 1 (eos) and 5 (stop) are the two best; masked while fewer than 2 outputs.
  EXPECT_EQ(*s.Sample(kLogits, {.params = &p, .output_tokens = out, .eos_token_ids = eos}), 2);
  std::vector<TokenId> out2 = {7, 7};
  EXPECT_EQ(*s.Sample(kLogits, {.params = &p, .output_tokens = out2, .eos_token_ids = eos}), 1);
  EXPECT_EQ(*EffectiveMaxTokens(p, 10, 100), 4);
  EXPECT_EQ(*EffectiveMaxTokens(p, 98, 100), 2);
  EXPECT_FALSE(EffectiveMaxTokens(p, 100, 100).ok());
  std::vector<float> all_masked = {-INFINITY, NAN};
  EXPECT_FALSE(s.Sample(all_masked, {.params = &p, .output_tokens = out2}).ok());
}

// log-softmax of logits / t in double, computed here independently of the sampler.
std::vector<double> LogSoftmax(const std::vector<float>& logits, double t) {
  double mx = -INFINITY, sum = 0;
  for (float l : logits) mx = std::max(mx, l / t);
  for (float l : logits) sum += std::exp(l / t - mx);
  std::vector<double> out;
  for (float l : logits) out.push_back(l / t - mx - std::log(sum));
  return out;
}

TEST(SamplerTest, LogprobsAreTheLogSoftmaxOfTheProcessedLogits) {
  for (float temperature : {0.0f, 0.7f, 1.0f, 1.8f}) {
    SamplingParams p;
    p.temperature = temperature;
    p.logprobs = 3;
    p.logit_bias = {{6, 4.0f}};  // -3 + 4 = 1: processed logits, not raw
    Sampler s;
    auto token = s.Sample(kLogits, {.params = &p, .seed = 5});
    ASSERT_TRUE(token.ok());
    SampledLogprobs lp = s.Logprobs(p, *token);
    std::vector<float> processed = kLogits;
    processed[6] += 4.0f;
    const std::vector<double> want = LogSoftmax(processed, temperature > 0 ? temperature : 1.0);
    EXPECT_NEAR(lp.logprob, want[*token], 1e-6) << "temperature " << temperature;
    // Top 3 of {1, 3, 2.5, -1, 0, 2.9, 1, 1.5}: ids 1, 5, 2.
    ASSERT_EQ(lp.top.size(), 3u);
    const TokenId order[] = {1, 5, 2};
    for (int j = 0; j < 3; ++j) {
      EXPECT_EQ(lp.top[j].token, order[j]);
      EXPECT_NEAR(lp.top[j].logprob, want[order[j]], 1e-6);
    }
  }
}

TEST(SamplerTest, LogprobsBreakTiesByLowestIdAndShowMaskedTokensAsMinusInfinity) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.logprobs = 4;
  p.min_tokens = 1;
  p.stop_token_ids = {0};
  std::vector<float> tie = {5.0f, 2.0f, 2.0f, -INFINITY};
  Sampler s;
  auto token = s.Sample(tie, {.params = &p});
  ASSERT_TRUE(token.ok());
  EXPECT_EQ(*token, 1);  // 0 is masked by min_tokens
  SampledLogprobs lp = s.Logprobs(p, *token);
  EXPECT_NEAR(lp.logprob, std::log(0.5), 1e-6);
  ASSERT_EQ(lp.top.size(), 4u);
  EXPECT_EQ(lp.top[0].token, 1);
  EXPECT_EQ(lp.top[1].token, 2);
  EXPECT_EQ(lp.top[2].token, 0);  // -inf ones after, lowest id first
  EXPECT_EQ(lp.top[3].token, 3);
  EXPECT_EQ(lp.top[2].logprob, -INFINITY);
  EXPECT_EQ(lp.top[3].logprob, -INFINITY);
}

TEST(SamplerTest, LogitBiasOfMinus100IsNeverSampledAndPlus100Always) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.logit_bias = {{1, -100.0f}, {5, -100.0f}};
  auto counts = Histogram(p, 2000);
  EXPECT_EQ(counts.count(1), 0u);
  EXPECT_EQ(counts.count(5), 0u);
  p.logit_bias = {{6, 100.0f}};
  counts = Histogram(p, 200);
  ASSERT_EQ(counts.size(), 1u);
  EXPECT_EQ(counts.begin()->first, 6);
}

TEST(SamplerTest, LogitBiasComesAfterThePenaltiesAndBeforeTheMinTokensMask) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.repetition_penalty = 2.0f;
  p.logit_bias = {{1, 1.0f}, {3, 10.0f}};
  p.min_tokens = 2;
  p.stop_token_ids = {3};
  std::vector<float> logits = kLogits;
  const std::vector<TokenId> prompt = {1};
  SampleRequest r{.params = &p, .prompt_tokens = prompt};
  Sampler::ProcessLogits(logits, r);
  EXPECT_EQ(logits[1], 3.0f / 2.0f + 1.0f);
  EXPECT_EQ(logits[3], -INFINITY);  // masked after the bias
}

TEST(SamplingParamsTest, ValidateNamesBadFields) {
  EXPECT_TRUE(SamplingParams{}.Validate().ok());
  auto bad = [](auto mutate) {
    SamplingParams p;
    mutate(p);
    return p.Validate();
  };
  EXPECT_NE(bad([](SamplingParams& p) { p.temperature = -1; }).message().find("temperature"), std::string::npos);
  EXPECT_NE(bad([](SamplingParams& p) { p.top_p = 0; }).message().find("top_p"), std::string::npos);
  EXPECT_NE(bad([](SamplingParams& p) { p.top_k = -2; }).message().find("top_k"), std::string::npos);
  EXPECT_NE(bad([](SamplingParams& p) { p.min_p = 1.5; }).message().find("min_p"), std::string::npos);
  EXPECT_NE(bad([](SamplingParams& p) { p.repetition_penalty = 0; }).message().find("repetition"), std::string::npos);
  EXPECT_NE(bad([](SamplingParams& p) { p.presence_penalty = 3; }).message().find("presence"), std::string::npos);
  EXPECT_NE(bad([](SamplingParams& p) { p.frequency_penalty = NAN; }).message().find("frequency"), std::string::npos);
  EXPECT_NE(bad([](SamplingParams& p) { p.max_tokens = 0; }).message().find("max_tokens"), std::string::npos);
  EXPECT_NE(bad([](SamplingParams& p) { p.min_tokens = 17; }).message().find("min_tokens"), std::string::npos);
  EXPECT_NE(bad([](SamplingParams& p) { p.logprobs = 21; }).message().find("logprobs"), std::string::npos);
  EXPECT_NE(bad([](SamplingParams& p) { p.logprobs = -2; }).message().find("logprobs"), std::string::npos);
  EXPECT_NE(bad([](SamplingParams& p) { p.logit_bias = {{3, 100.5f}}; }).message().find("logit_bias"),
            std::string::npos);
  EXPECT_NE(bad([](SamplingParams& p) { p.logit_bias = {{3, 1.f}, {3, 2.f}}; }).message().find("twice"),
            std::string::npos);
  EXPECT_NE(bad([](SamplingParams& p) { p.logit_bias = {{-1, 1.f}}; }).message().find("negative"), std::string::npos);
  EXPECT_TRUE(bad([](SamplingParams& p) { p.logprobs = 20, p.logit_bias = {{3, -100.f}}; }).ok());
}

}  // namespace
}  // namespace tandem::runtime
