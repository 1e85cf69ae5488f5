// The engine on the CUDA backend (bf16, CUDA graphs for decode steps, pinned
// host tier) against the same engine on the CPU fp32 backend, and a moved
// seeded request against its uninterrupted run. Skips where there is no GPU.
#include <gtest/gtest.h>

#include "common/engine/backend_factory.h"
#include "common/engine/engine.h"
#include "tests/common/engine/engine_test_util.h"

namespace tandem::engine {
namespace {

std::unique_ptr<Engine> MakeCudaEngine(const EngineConfig& config) {
  auto backend = MakeBackend("cuda", 0);
  if (!backend.ok()) return nullptr;
  auto engine = Engine::Create(config, std::move(*backend));
  TANDEM_CHECK(engine.ok()) << engine.status().ToString();
  return std::move(*engine);
}

std::vector<TokenId> Prompt(int len, int salt) {
  std::vector<TokenId> p(len);
  for (int i = 0; i < len; ++i) p[i] = 3 + (i * 37 + salt * 101) % 300;
  return p;
}

// qwen3's fixture has no near-ties in its first tokens (checked against CPU
// with bf16-rounded weights), so bf16 greedy output must match fp32 exactly.
TEST(EngineCudaTest, GreedyMatchesCpuWithGraphsAndPreemption) {
  std::string dir = testing::GoldenDir("qwen3");
  EngineConfig config = testing::SmallConfig(dir);
  std::vector<std::vector<TokenId>> prompts = {testing::ReadGoldenIds(dir, "prompt_ids"), Prompt(5, 1), Prompt(17, 2),
                                               Prompt(40, 3)};
  auto cpu = testing::MakeEngine(config);
  auto gpu = MakeCudaEngine(config);
  if (gpu == nullptr) GTEST_SKIP() << "SKIPPED: no CUDA GPU";
  for (size_t i = 0; i < prompts.size(); ++i) {
    cpu->Submit(testing::Greedy(i + 1, prompts[i], 6));
    gpu->Submit(testing::Greedy(i + 1, prompts[i], 6));
  }
  auto expected = testing::RunToCompletion(*cpu, prompts.size());
  auto got = testing::RunToCompletion(*gpu, prompts.size());
  EXPECT_EQ(got[1].tokens, testing::ReadGoldenIds(dir, "decode_ids")) << "HF greedy tokens";
  int equal = 0;
  for (auto& [id, r] : expected) equal += got[id].tokens == r.tokens;
  EXPECT_GE(equal, 3) << "bf16 may split from fp32 on a near-tie, but not on most prompts";

  // Few device blocks: 40 tokens each outgrow 6 blocks, so running sequences are swapped
  // through the pinned host tier; output must equal a roomy GPU run.
  EngineConfig tight = config;
  tight.num_device_blocks = 6;
  auto roomy = MakeCudaEngine(config);
  auto squeezed = MakeCudaEngine(tight);
  for (size_t i = 0; i < prompts.size(); ++i) {
    roomy->Submit(testing::Greedy(i + 1, prompts[i], 40));
    squeezed->Submit(testing::Greedy(i + 1, prompts[i], 40));
  }
  auto unpreempted = testing::RunToCompletion(*roomy, prompts.size());
  auto after = testing::RunToCompletion(*squeezed, prompts.size());
  for (auto& [id, r] : unpreempted) EXPECT_EQ(after[id].tokens, r.tokens) << "request " << id;
  EXPECT_GT(squeezed->Counters().preemptions, 0);
  EXPECT_EQ(squeezed->Counters().kv.device.referenced_blocks, 0);
}

// RELIABILITY.md F10 on the CUDA sampler: a seeded request with penalties, moved after
// k tokens (prompt + those tokens, num_output_tokens_in_prompt = k), continues with the
// uninterrupted run's draws (engine_moved_request_test.cc is the CPU twin).
TEST(EngineCudaTest, SeededDrawsContinueAfterAMove) {
  EngineConfig config = testing::SmallConfig(testing::GoldenDir("qwen3"));
  constexpr int kTokens = 16;
  const EngineRequest request = testing::SeededWithPenalties(1, Prompt(12, 4), kTokens, 99);
  auto run = [&](const EngineRequest& r) -> std::vector<TokenId> {
    auto engine = MakeCudaEngine(config);
    if (engine == nullptr) return {};
    engine->Submit(r);
    return testing::RunToCompletion(*engine, 1)[r.id].tokens;
  };
  const std::vector<TokenId> full = run(request);
  if (full.empty()) GTEST_SKIP() << "SKIPPED: no CUDA GPU";
  ASSERT_EQ(full.size(), static_cast<size_t>(kTokens));
  for (size_t k : {1, 9}) {
    std::vector<TokenId> joined(full.begin(), full.begin() + k);
    const std::vector<TokenId> rest = run(testing::Moved(request, 2, joined));
    joined.insert(joined.end(), rest.begin(), rest.end());
    EXPECT_EQ(joined, full) << "moved after " << k << " tokens";
  }
}

}  // namespace
}  // namespace tandem::engine
