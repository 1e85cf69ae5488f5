// Backend::SampleTokens' default path (the CPU backend, and any backend without
// its own): row by row what Sampler::Sample gives for the same row alone, a row
// with no token left fails alone, bad arguments fail the call.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "common/runtime/cpu_backend.h"
#include "common/runtime/sampler.h"

namespace tandem::runtime {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

struct Row {
  SamplingParams params;
  std::vector<TokenId> prompt, output;
  uint64_t seed = 0;
};

std::vector<Row> MakeRows(int vocab) {
  std::vector<Row> rows(10);
  for (size_t i = 0; i < rows.size(); ++i) {
    rows[i].prompt = {1, 5, 5, 9, static_cast<TokenId>(vocab - 1)};
    rows[i].output = {5, 7, 7, 7};
    rows[i].seed = 1000 + i;
  }
  rows[0].params.temperature = 0.0f;
  rows[1].params.temperature = 0.8f;
  rows[2].params.top_k = 5;
  rows[3].params.top_p = 0.5f;
  rows[4].params.min_p = 0.2f;
  rows[5].params.repetition_penalty = 1.7f;
  rows[5].params.temperature = 0.0f;
  rows[6].params.presence_penalty = 1.5f;
  rows[6].params.frequency_penalty = -0.5f;
  rows[7].params.min_tokens = 8;  // eos and stop id 3 masked
  rows[7].params.stop_token_ids = {3};
  rows[7].params.temperature = 0.0f;
  rows[8].params.temperature = 1.3f;
  rows[8].params.repetition_penalty = 0.6f;
  rows[8].params.top_k = 12;
  rows[8].params.top_p = 0.9f;
  rows[9].params.temperature = 0.0f;  // every logit NaN or -inf: no token
  rows[0].params.logprobs = 2;
  rows[0].params.logit_bias = {{static_cast<TokenId>(vocab - 1), 2.0f}};
  rows[1].params.logprobs = 5;
  rows[3].params.logprobs = 0;
  rows[6].params.logit_bias = {{4, 3.5f}, {8, -100.0f}, {vocab + 5, 1.0f}};  // an id past the vocabulary is ignored
  rows[7].params.logprobs = 20;
  rows[9].params.logprobs = 3;
  return rows;
}

SampleRequest Request(const Row& row, const std::vector<TokenId>& eos) {
  return SampleRequest{&row.params, row.prompt, row.output, eos, row.seed};
}

TEST(SampleTokensTest, DefaultPathEqualsSamplerRowByRow) {
  const int vocab = 97;
  std::vector<Row> rows = MakeRows(vocab);
  const std::vector<TokenId> eos = {2};
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.f, 2.f);
  std::vector<float> logits(rows.size() * vocab);
  for (float& x : logits) x = dist(rng);
  logits[7 * vocab + 2] = 50.f;  // row 7: eos and stop id are the best tokens, but masked
  logits[7 * vocab + 3] = 49.f;
  logits[1 * vocab + 20] = std::nanf("");
  for (int v = 0; v < vocab; ++v) logits[9 * vocab + v] = v % 2 ? kNegInf : std::nanf("");

  CpuBackend backend;
  auto buffer = backend.Allocate(DType::kF32, {static_cast<int64_t>(rows.size()), vocab});
  ASSERT_TRUE(buffer.ok());
  ASSERT_TRUE(backend.CopyToDevice(logits.data(), logits.size() * sizeof(float), buffer->tensor()).ok());
  std::vector<SampleRequest> requests;
  for (const Row& r : rows) requests.push_back(Request(r, eos));
  std::vector<SampledToken> out(rows.size());
  ASSERT_TRUE(backend.SampleTokens(buffer->tensor(), requests, out).ok());

  Sampler oracle;
  for (size_t i = 0; i < rows.size(); ++i) {
    std::span<const float> row(logits.data() + i * vocab, vocab);
    StatusOr<TokenId> want = oracle.Sample(row, requests[i]);
    ASSERT_EQ(out[i].status.ok(), want.ok()) << "row " << i << ": " << out[i].status.ToString();
    if (!want.ok()) continue;
    EXPECT_EQ(out[i].token, *want) << "row " << i;
    if (rows[i].params.logprobs < 0) {
      EXPECT_TRUE(out[i].logprobs.top.empty());
      continue;
    }
    SampledLogprobs lp = oracle.Logprobs(rows[i].params, *want);
    EXPECT_EQ(out[i].logprobs.logprob, lp.logprob) << "row " << i;
    ASSERT_EQ(out[i].logprobs.top.size(), static_cast<size_t>(rows[i].params.logprobs)) << "row " << i;
    for (size_t j = 0; j < lp.top.size(); ++j) {
      EXPECT_EQ(out[i].logprobs.top[j].token, lp.top[j].token) << "row " << i;
      EXPECT_EQ(out[i].logprobs.top[j].logprob, lp.top[j].logprob) << "row " << i;
    }
  }
  EXPECT_FALSE(out[9].status.ok());
  EXPECT_EQ(out[9].status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(out[7].token, 2);  // masked by min_tokens
  EXPECT_NE(out[7].token, 3);
}

TEST(SampleTokensTest, BadArgumentsFailTheCall) {
  CpuBackend backend;
  auto buffer = backend.Allocate(DType::kF32, {2, 8});
  ASSERT_TRUE(buffer.ok());
  SamplingParams params;
  std::vector<SampleRequest> two(2, SampleRequest{.params = &params});
  std::vector<SampledToken> out(2);
  EXPECT_EQ(backend.SampleTokens(buffer->tensor(), std::span(two).first(1), std::span(out).first(1)).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(backend.SampleTokens(buffer->tensor(), two, std::span(out).first(1)).code(), StatusCode::kInvalidArgument);
  two[1].params = nullptr;
  EXPECT_EQ(backend.SampleTokens(buffer->tensor(), two, out).code(), StatusCode::kInvalidArgument);
  two[1].params = &params;
  auto ints = backend.Allocate(DType::kI32, {2, 8});
  ASSERT_TRUE(ints.ok());
  EXPECT_EQ(backend.SampleTokens(ints->tensor(), two, out).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(backend.SampleTokens(buffer->tensor(), two, out).ok());
}

}  // namespace
}  // namespace tandem::runtime
