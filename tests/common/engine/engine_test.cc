// The engine end to end on the CPU backend, against Hugging Face's greedy
// tokens for the golden fixtures (tests/data/golden), and against itself
// under batching, preemption and prefix caching.
#include "common/engine/engine.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tests/common/engine/engine_test_util.h"

namespace tandem::engine {
namespace {

using testing::Greedy;
using testing::MakeEngine;
using testing::RunToCompletion;
using testing::SmallConfig;

class EngineGoldenTest : public ::testing::TestWithParam<std::string> {};

// HF greedy continuation of the golden prompt, through the whole engine.
TEST_P(EngineGoldenTest, GreedyMatchesTransformers) {
  std::string dir = testing::GoldenDir(GetParam());
  std::vector<TokenId> prompt = testing::ReadGoldenIds(dir, "prompt_ids");
  std::vector<TokenId> expected = testing::ReadGoldenIds(dir, "decode_ids");
  auto engine = MakeEngine(SmallConfig(dir));
  engine->Submit(Greedy(1, prompt, static_cast<int>(expected.size())));
  auto results = RunToCompletion(*engine, 1);
  EXPECT_EQ(results[1].tokens, expected);
  EXPECT_EQ(results[1].final.finish_reason, scheduler::FinishReason::kLength);
  EXPECT_EQ(results[1].final.num_prompt_tokens, static_cast<int>(prompt.size()));
  EXPECT_EQ(results[1].final.num_generated_tokens, static_cast<int>(expected.size()));
}

INSTANTIATE_TEST_SUITE_P(Families, EngineGoldenTest, ::testing::Values("llama", "qwen2", "qwen3"));

std::vector<TokenId> Prompt(int len, int salt) {
  std::vector<TokenId> p(len);
  for (int i = 0; i < len; ++i) p[i] = 3 + (i * 37 + salt * 101) % 300;
  return p;
}

// Reference: each prompt alone in a fresh engine with plenty of blocks.
std::map<RequestId, std::vector<TokenId>> SoloRuns(const std::string& dir,
                                                   const std::vector<std::vector<TokenId>>& prompts, int max_tokens) {
  std::map<RequestId, std::vector<TokenId>> out;
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto engine = MakeEngine(SmallConfig(dir));
    engine->Submit(Greedy(i + 1, prompts[i], max_tokens));
    out[i + 1] = RunToCompletion(*engine, 1)[i + 1].tokens;
  }
  return out;
}

TEST(EngineTest, ConcurrentRequestsMatchSoloRuns) {
  std::string dir = testing::GoldenDir("llama");
  std::vector<std::vector<TokenId>> prompts = {Prompt(1, 1),  Prompt(15, 2), Prompt(16, 3),
                                               Prompt(17, 4), Prompt(70, 5), Prompt(33, 6)};
  auto solo = SoloRuns(dir, prompts, 12);
  auto engine = MakeEngine(SmallConfig(dir));
  for (size_t i = 0; i < prompts.size(); ++i) engine->Submit(Greedy(i + 1, prompts[i], 12));
  auto results = RunToCompletion(*engine, prompts.size());
  for (auto& [id, tokens] : solo) EXPECT_EQ(results[id].tokens, tokens) << "request " << id;
  scheduler::SchedulerCounters c = engine->Counters();
  EXPECT_EQ(c.kv.device.referenced_blocks, 0);
  EXPECT_EQ(c.num_running + c.num_waiting + c.num_swapped, 0);
}

class EnginePreemptionTest : public ::testing::TestWithParam<scheduler::PreemptionMode> {};

// Too few device blocks for all sequences at once: the scheduler preempts
// (swap to host, or recompute) and the greedy output must not change.
TEST_P(EnginePreemptionTest, PreemptedOutputEqualsUninterrupted) {
  std::string dir = testing::GoldenDir("llama");
  std::vector<std::vector<TokenId>> prompts;
  for (int i = 0; i < 6; ++i) prompts.push_back(Prompt(20 + 3 * i, 10 + i));
  auto solo = SoloRuns(dir, prompts, 40);

  EngineConfig config = SmallConfig(dir);
  config.num_device_blocks = 12;  // 6 sequences of ~60 tokens need ~24 blocks
  config.num_host_blocks = 64;
  config.scheduler.preemption_mode = GetParam();
  auto engine = MakeEngine(config);
  for (size_t i = 0; i < prompts.size(); ++i) engine->Submit(Greedy(i + 1, prompts[i], 40));
  auto results = RunToCompletion(*engine, prompts.size());
  for (auto& [id, tokens] : solo) EXPECT_EQ(results[id].tokens, tokens) << "request " << id;
  scheduler::SchedulerCounters c = engine->Counters();
  EXPECT_GT(c.preemptions, 0) << "the test must actually preempt";
  if (GetParam() == scheduler::PreemptionMode::kSwap) {
    EXPECT_GT(c.swaps_out, 0);
  }
  EXPECT_EQ(c.kv.device.referenced_blocks, 0);
  EXPECT_EQ(c.kv.host.referenced_blocks, 0);
}

INSTANTIATE_TEST_SUITE_P(Modes, EnginePreemptionTest,
                         ::testing::Values(scheduler::PreemptionMode::kSwap, scheduler::PreemptionMode::kRecompute));

// The request's class reaches the scheduler: with one batch slot, an interactive
// request submitted last runs before the batch requests queued ahead of it.
TEST(EngineTest, InteractiveRequestOvertakesQueuedBatchRequests) {
  EngineConfig config = SmallConfig(testing::GoldenDir("llama"));
  config.scheduler.max_num_seqs = 1;
  auto engine = MakeEngine(config);
  for (RequestId id : {1, 2, 3}) {
    EngineRequest r = Greedy(id, Prompt(8, static_cast<int>(id)), 3);
    r.priority = id == 3 ? scheduler::Priority::kInteractive : scheduler::Priority::kBatch;
    engine->Submit(std::move(r));
  }
  std::vector<RequestId> finished;
  for (int step = 0; step < 200 && finished.size() < 3; ++step) {
    std::vector<EngineOutput> outputs;
    engine->StepOnce(&outputs);
    for (const EngineOutput& out : outputs) {
      if (out.finished) finished.push_back(out.id);
    }
  }
  EXPECT_EQ(finished, (std::vector<RequestId>{3, 1, 2}));
}

TEST(EngineTest, PrefixCacheIsPerTenant) {
  std::string dir = testing::GoldenDir("qwen3");
  auto engine = MakeEngine(SmallConfig(dir));
  std::vector<TokenId> prompt = Prompt(40, 7);
  engine->Submit(Greedy(1, prompt, 4, "alice"));
  auto first = RunToCompletion(*engine, 1);
  EXPECT_EQ(first[1].final.num_cached_tokens, 0);

  engine->Submit(Greedy(2, prompt, 4, "alice"));
  auto again = RunToCompletion(*engine, 1);
  EXPECT_EQ(again[2].final.num_cached_tokens, 32);  // two full blocks of 16
  EXPECT_EQ(again[2].tokens, first[1].tokens);

  engine->Submit(Greedy(3, prompt, 4, "bob"));
  auto other = RunToCompletion(*engine, 1);
  EXPECT_EQ(other[3].final.num_cached_tokens, 0);
  EXPECT_EQ(other[3].tokens, first[1].tokens);

  // The first token's output already carries the count (a router may end the request
  // before its final output, on a stop string); later token outputs do not.
  engine->Submit(Greedy(4, prompt, 4, "alice"));
  std::vector<int> cached_per_token;
  for (int step = 0; step < 100 && cached_per_token.size() < 4; ++step) {
    std::vector<EngineOutput> outputs;
    engine->StepOnce(&outputs);
    for (const EngineOutput& out : outputs) {
      if (out.id == 4 && !out.tokens.empty()) cached_per_token.push_back(out.num_cached_tokens);
    }
  }
  EXPECT_EQ(cached_per_token, (std::vector<int>{32, 0, 0, 0}));
}

TEST(EngineTest, CancelAndBadRequestsEndCleanly) {
  std::string dir = testing::GoldenDir("llama");
  auto engine = MakeEngine(SmallConfig(dir));
  engine->Submit(Greedy(1, Prompt(30, 1), 50));
  engine->Submit(Greedy(2, {5, 999999}, 4));     // token out of range
  engine->Submit(Greedy(3, Prompt(600, 2), 4));  // longer than max_position_embeddings (512)
  std::vector<EngineOutput> outputs;
  engine->StepOnce(&outputs);
  engine->StepOnce(&outputs);
  engine->Cancel(1);
  for (int i = 0; i < 3; ++i) engine->StepOnce(&outputs);
  std::map<RequestId, EngineOutput> finals;
  for (auto& o : outputs) {
    if (o.finished) {
      EXPECT_EQ(finals.count(o.id), 0u) << "request " << o.id << " ended twice";
      finals[o.id] = o;
    }
  }
  ASSERT_EQ(finals.size(), 3u);
  EXPECT_EQ(finals[1].finish_reason, scheduler::FinishReason::kCancelled);
  EXPECT_EQ(finals[2].finish_reason, scheduler::FinishReason::kRejected);
  EXPECT_EQ(finals[2].status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(finals[3].finish_reason, scheduler::FinishReason::kRejected);
  scheduler::SchedulerCounters c = engine->Counters();
  EXPECT_EQ(c.kv.device.referenced_blocks, 0);
  EXPECT_EQ(c.num_running + c.num_waiting, 0);
}

// A request with hold_kv_after_finish ends as usual (its output and end are
// emitted) but its KV stays referenced until ReleaseHeld, or a Cancel that
// emits no second end.
TEST(EngineTest, HeldKvStaysUntilReleasedOrCancelled) {
  auto engine = MakeEngine(SmallConfig(testing::GoldenDir("llama")));
  EngineRequest first = Greedy(1, Prompt(40, 1), 1);
  first.hold_kv_after_finish = true;
  EngineRequest second = Greedy(2, Prompt(20, 2), 1);
  second.hold_kv_after_finish = true;
  engine->Submit(first);
  engine->Submit(second);
  auto results = RunToCompletion(*engine, 2);
  EXPECT_EQ(results[1].final.finish_reason, scheduler::FinishReason::kLength);
  EXPECT_EQ(results[1].tokens.size(), 1u);
  scheduler::SchedulerCounters c = engine->Counters();
  EXPECT_EQ(c.num_held, 2);
  EXPECT_EQ(c.num_running, 0);
  EXPECT_EQ(c.kv.device.referenced_blocks, 3 + 2);  // 40 and 20 computed tokens in blocks of 16

  engine->ReleaseHeld(1);
  engine->ReleaseHeld(99);  // unknown: ignored
  engine->Cancel(2);
  std::vector<EngineOutput> outputs;
  engine->StepOnce(&outputs);
  engine->StepOnce(&outputs);
  EXPECT_TRUE(outputs.empty()) << "a held request's end was already emitted";
  c = engine->Counters();
  EXPECT_EQ(c.num_held, 0);
  EXPECT_EQ(c.kv.device.referenced_blocks, 0);
}

// A copy of a golden model directory whose config and generation config name `eos` as EOS.
std::string GoldenCopyWithEos(const std::string& family, TokenId eos) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(::testing::TempDir()) / ("tandem-eos-" + family + "-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::copy(testing::GoldenDir(family), dir, fs::copy_options::recursive);
  for (const char* name : {"config.json", "generation_config.json"}) {
    nlohmann::json config = nlohmann::json::parse(std::ifstream(dir / name));
    config["eos_token_id"] = eos;
    std::ofstream(dir / name) << config.dump(2);
  }
  return dir.string();
}

// The model's EOS ends a request with "stop" (EOS is its last token) unless
// ignore_eos; min_tokens keeps EOS from being picked before that many outputs;
// stop_token_ids end a request with ignore_eos too.
TEST(EngineTest, EosIgnoreEosMinTokensAndStopTokenIds) {
  const std::string golden = testing::GoldenDir("llama");
  const std::vector<TokenId> prompt = testing::ReadGoldenIds(golden, "prompt_ids");
  const std::vector<TokenId> greedy = testing::ReadGoldenIds(golden, "decode_ids");
  // EOS := the first greedy token (after the first) that did not come earlier.
  size_t at = 1;
  while (at < greedy.size() && std::count(greedy.begin(), greedy.begin() + at, greedy[at]) > 0) ++at;
  ASSERT_LT(at + 1, greedy.size()) << "the fixture's greedy tokens repeat too much for this test";
  const TokenId eos = greedy[at];
  const std::vector<TokenId> until_eos(greedy.begin(), greedy.begin() + at + 1);
  const std::string dir = GoldenCopyWithEos("llama", eos);
  auto engine = MakeEngine(SmallConfig(dir));
  ASSERT_EQ(engine->eos_token_ids(), std::vector<TokenId>{eos});
  const int n = static_cast<int>(greedy.size());

  EngineRequest stops = Greedy(1, prompt, n);
  stops.sampling.ignore_eos = false;
  EngineRequest ignores = Greedy(2, prompt, n);
  EngineRequest late = Greedy(3, prompt, n);
  late.sampling.ignore_eos = false;
  late.sampling.min_tokens = static_cast<int>(at) + 2;
  EngineRequest stop_id = Greedy(4, prompt, n);
  stop_id.sampling.stop_token_ids = {eos};
  for (auto* r : {&stops, &ignores, &late, &stop_id}) engine->Submit(*r);
  auto results = RunToCompletion(*engine, 4);

  EXPECT_EQ(results[1].tokens, until_eos);
  EXPECT_EQ(results[1].final.finish_reason, scheduler::FinishReason::kStop);
  EXPECT_EQ(results[2].tokens, greedy);
  EXPECT_EQ(results[2].final.finish_reason, scheduler::FinishReason::kLength);
  const std::vector<TokenId>& late_tokens = results[3].tokens;
  ASSERT_GE(late_tokens.size(), at + 2);
  EXPECT_TRUE(std::equal(greedy.begin(), greedy.begin() + at, late_tokens.begin())) << "same until EOS";
  EXPECT_EQ(std::count(late_tokens.begin(), late_tokens.begin() + at + 1, eos), 0) << "EOS before min_tokens";
  EXPECT_EQ(results[4].tokens, until_eos);
  EXPECT_EQ(results[4].final.finish_reason, scheduler::FinishReason::kStop);
  std::filesystem::remove_all(dir);
}

TEST(EngineTest, ReusedIdOfALiveRequestIsRejectedWithoutHarm) {
  auto engine = MakeEngine(SmallConfig(testing::GoldenDir("llama")));
  engine->Submit(Greedy(7, Prompt(20, 1), 6));
  std::vector<EngineOutput> outputs;
  engine->StepOnce(&outputs);
  engine->Submit(Greedy(7, Prompt(5, 2), 6));  // same id while the first is running
  auto results = RunToCompletion(*engine, 2);  // one rejection + the original's end
  for (auto& o : outputs) results[o.id].tokens.insert(results[o.id].tokens.begin(), o.tokens.begin(), o.tokens.end());
  EXPECT_EQ(results[7].final.finish_reason, scheduler::FinishReason::kLength);
  EXPECT_EQ(results[7].tokens.size(), 6u);
}

TEST(EngineTest, SeededSamplingIsReproducibleAcrossBatches) {
  std::string dir = testing::GoldenDir("qwen2");
  auto sampled = [&](bool crowded) {
    auto engine = MakeEngine(SmallConfig(dir));
    EngineRequest r = Greedy(1, Prompt(10, 3), 16);
    r.sampling.temperature = 1.0f;
    r.sampling.top_p = 0.9f;
    r.sampling.seed = 1234;
    engine->Submit(r);
    if (crowded) {
      for (int i = 2; i < 6; ++i) engine->Submit(Greedy(i, Prompt(5 * i, i), 16));
    }
    return RunToCompletion(*engine, crowded ? 5 : 1)[1].tokens;
  };
  EXPECT_EQ(sampled(false), sampled(true));
}

}  // namespace
}  // namespace tandem::engine
