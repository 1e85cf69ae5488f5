// A request moved to another engine mid-generation (the router re-dispatches it
// with its output so far appended to the prompt and num_output_tokens_in_prompt
// set) continues exactly as the uninterrupted run: the seeded draws, the
// penalties and min_tokens count the moved tokens as output (RELIABILITY.md F10).
#include <gtest/gtest.h>

#include <algorithm>

#include "common/engine/engine.h"
#include "tests/common/engine/engine_test_util.h"

namespace tandem::engine {
namespace {

using testing::MakeEngine;
using testing::Moved;
using testing::RunToCompletion;
using testing::SmallConfig;

std::vector<TokenId> Prompt(int len, int salt) {
  std::vector<TokenId> p(len);
  for (int i = 0; i < len; ++i) p[i] = 3 + (i * 37 + salt * 101) % 300;
  return p;
}

// The tokens `request` generates alone in a fresh engine.
std::vector<TokenId> RunAlone(const std::string& dir, const EngineRequest& request) {
  auto engine = MakeEngine(SmallConfig(dir));
  engine->Submit(request);
  return RunToCompletion(*engine, 1)[request.id].tokens;
}

// The first k tokens of `tokens` followed by `rest`.
std::vector<TokenId> Joined(const std::vector<TokenId>& tokens, size_t k, const std::vector<TokenId>& rest) {
  std::vector<TokenId> out(tokens.begin(), tokens.begin() + k);
  out.insert(out.end(), rest.begin(), rest.end());
  return out;
}

TEST(EngineMovedRequestTest, SeededDrawsAndPenaltiesContinueAfterAMove) {
  const std::string dir = testing::GoldenDir("qwen2");
  constexpr int kTokens = 24;
  const EngineRequest request = testing::SeededWithPenalties(1, Prompt(10, 3), kTokens, 4321);
  const std::vector<TokenId> full = RunAlone(dir, request);
  ASSERT_EQ(full.size(), static_cast<size_t>(kTokens));
  for (size_t k : {1, 7, 16, kTokens - 1}) {
    const std::vector<TokenId> done(full.begin(), full.begin() + k);
    EXPECT_EQ(Joined(full, k, RunAlone(dir, Moved(request, 2, done))), full) << "moved after " << k << " tokens";
  }
  // The same continuation that treats the moved tokens as prompt draws other tokens.
  const std::vector<TokenId> done(full.begin(), full.begin() + 7);
  EngineRequest as_prompt = Moved(request, 3, done);
  as_prompt.sampling.num_output_tokens_in_prompt = 0;
  EXPECT_NE(Joined(full, 7, RunAlone(dir, as_prompt)), full);
}

// Greedy, with a stop token s that the uninterrupted run first picks at output position
// `at` and min_tokens = at: the run stops there, and so must a request moved after k < at
// tokens (its min_tokens counts the moved tokens; counting from 0 again would mask s).
TEST(EngineMovedRequestTest, MinTokensCountsTheMovedTokens) {
  const std::string dir = testing::GoldenDir("llama");
  const std::vector<TokenId> prompt = testing::ReadGoldenIds(dir, "prompt_ids");
  const std::vector<TokenId> greedy = testing::ReadGoldenIds(dir, "decode_ids");
  size_t at = 3;
  while (at < greedy.size() && std::count(greedy.begin(), greedy.begin() + at, greedy[at]) > 0) ++at;
  ASSERT_LT(at, greedy.size()) << "the fixture's greedy tokens repeat too much for this test";
  EngineRequest request = testing::Greedy(1, prompt, static_cast<int>(greedy.size()));
  request.sampling.stop_token_ids = {greedy[at]};
  request.sampling.min_tokens = static_cast<int>(at);
  const std::vector<TokenId> until_stop(greedy.begin(), greedy.begin() + at + 1);
  ASSERT_EQ(RunAlone(dir, request), until_stop);
  const std::vector<TokenId> done(greedy.begin(), greedy.begin() + 2);
  EXPECT_EQ(Joined(greedy, 2, RunAlone(dir, Moved(request, 2, done))), until_stop);
  EngineRequest as_prompt = Moved(request, 3, done);
  as_prompt.sampling.num_output_tokens_in_prompt = 0;
  EXPECT_NE(Joined(greedy, 2, RunAlone(dir, as_prompt)), until_stop) << "s masked past min_tokens";
}

TEST(EngineMovedRequestTest, MovedTokensMustLeaveAPrompt) {
  auto engine = MakeEngine(SmallConfig(testing::GoldenDir("qwen2")));
  EngineRequest request = testing::SeededWithPenalties(1, Prompt(4, 1), 8, 1);
  request.sampling.num_output_tokens_in_prompt = 4;
  engine->Submit(request);
  auto results = RunToCompletion(*engine, 1);
  EXPECT_EQ(results[1].final.finish_reason, scheduler::FinishReason::kRejected);
  EXPECT_EQ(results[1].final.status.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(results[1].tokens.empty());
}

}  // namespace
}  // namespace tandem::engine
