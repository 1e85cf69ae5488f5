// Prompt logprobs (echo with logprobs) against Hugging Face: for every prompt position after
// the first, the engine's logprob of the prompt token equals log_softmax of transformers'
// logits at the position before it (tests/data/golden, frozen from the GPU machine), and its
// top tokens are transformers' most likely ones. Computed in chunks that fit the step's
// prompt-logits budget, never from the prefix cache, next to requests that sample only.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "common/engine/engine.h"
#include "tests/common/engine/engine_test_util.h"

namespace tandem::engine {
namespace {

using runtime::testing::GoldenData;
using testing::RunToCompletion;

// log_softmax of `row` in double.
std::vector<double> LogSoftmax(std::span<const float> row) {
  const double max = *std::max_element(row.begin(), row.end());
  double sum = 0;
  for (float x : row) sum += std::exp(x - max);
  std::vector<double> out(row.size());
  for (size_t i = 0; i < row.size(); ++i) out[i] = row[i] - max - std::log(sum);
  return out;
}

void ExpectMatchesTransformers(const GoldenData& golden, const std::vector<runtime::SampledLogprobs>& got, int k) {
  const int vocab = golden.config.vocab_size;
  ASSERT_EQ(got.size(), golden.prompt.size() - 1);
  for (size_t p = 0; p + 1 < golden.prompt.size(); ++p) {
    const std::vector<double> ref =
        LogSoftmax(std::span<const float>(golden.prefill_ref).subspan(p * vocab, vocab));
    EXPECT_NEAR(got[p].logprob, ref[golden.prompt[p + 1]], 2e-3) << "position " << p + 1;
    ASSERT_EQ(got[p].top.size(), static_cast<size_t>(k));
    std::vector<int> order(vocab);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return ref[a] > ref[b]; });
    for (int j = 0; j < k; ++j) {
      EXPECT_NEAR(got[p].top[j].logprob, ref[order[j]], 2e-3) << "position " << p + 1 << " top " << j;
      // The same token unless transformers' values of the neighbours are within the tolerance.
      const bool tie = (j > 0 && ref[order[j - 1]] - ref[order[j]] < 4e-3) ||
                       (j + 1 < vocab && ref[order[j]] - ref[order[j + 1]] < 4e-3);
      if (!tie) EXPECT_EQ(got[p].top[j].token, order[j]) << "position " << p + 1 << " top " << j;
    }
  }
}

EngineRequest WithPromptLogprobs(RequestId id, const std::vector<TokenId>& prompt, int k) {
  EngineRequest r = testing::Greedy(id, prompt, 3);
  r.sampling.prompt_logprobs = k;
  return r;
}

class EnginePromptLogprobsTest : public ::testing::TestWithParam<std::string> {};

TEST_P(EnginePromptLogprobsTest, EqualTransformersInChunksBesideOtherRequests) {
  const GoldenData golden(GetParam());
  EngineConfig config = testing::SmallConfig(testing::GoldenDir(GetParam()));
  config.scheduler.max_prompt_logits_tokens = 8;  // a 21-token prompt takes three steps of rows
  auto engine = testing::MakeEngine(config);
  const std::vector<TokenId> prompt(golden.prompt.begin(), golden.prompt.end());
  // A plain request first: its blocks enter the prefix cache, which prompt logprobs must not use.
  engine->Submit(testing::Greedy(1, prompt, 3));
  const auto plain = RunToCompletion(*engine, 1);
  engine->Submit(WithPromptLogprobs(2, prompt, 5));
  engine->Submit(testing::Greedy(3, std::vector<TokenId>(prompt.begin(), prompt.begin() + 9), 4));
  std::vector<runtime::SampledLogprobs> got;
  std::map<RequestId, std::vector<TokenId>> tokens;
  int done = 0;
  for (int step = 0; step < 200 && done < 2; ++step) {
    std::vector<EngineOutput> outputs;
    engine->StepOnce(&outputs);
    for (EngineOutput& out : outputs) {
      if (out.id != 2) EXPECT_TRUE(out.prompt_logprobs.empty());
      if (!out.prompt_logprobs.empty()) {
        EXPECT_TRUE(got.empty()) << "prompt logprobs come once";
        EXPECT_EQ(tokens[out.id].size(), 0u) << "with the first token";
        got = std::move(out.prompt_logprobs);
      }
      tokens[out.id].insert(tokens[out.id].end(), out.tokens.begin(), out.tokens.end());
      if (out.finished) {
        EXPECT_TRUE(out.status.ok()) << out.status.ToString();
        if (out.id == 2) EXPECT_EQ(out.num_cached_tokens, 0) << "computed, not from the prefix cache";
        ++done;
      }
    }
  }
  ASSERT_EQ(done, 2);
  ExpectMatchesTransformers(golden, got, 5);
  EXPECT_EQ(tokens[2], plain.at(1).tokens) << "the same greedy continuation as without prompt logprobs";
}

TEST_P(EnginePromptLogprobsTest, RefusedWhereTheBudgetIsZero) {
  EngineConfig config = testing::SmallConfig(testing::GoldenDir(GetParam()));
  config.scheduler.max_prompt_logits_tokens = 0;
  auto engine = testing::MakeEngine(config);
  engine->Submit(WithPromptLogprobs(1, {3, 4, 5}, 0));
  const auto results = RunToCompletion(*engine, 1);
  EXPECT_EQ(results.at(1).final.status.code(), StatusCode::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(Families, EnginePromptLogprobsTest, ::testing::Values("llama", "qwen2", "qwen3"));

}  // namespace
}  // namespace tandem::engine
