// Prefix reuse through the scheduler: a repeated prompt computes only its
// uncached tail; another tenant never hits; host-tier hits are promoted.
#include <gtest/gtest.h>

#include "common/base/clock.h"
#include "common/scheduler/scheduler.h"
#include "tests/common/scheduler/fake_engine.h"
#include "tests/common/scheduler/scheduler_test_util.h"

namespace tandem::scheduler {
namespace {

using testing::FakeEngine;
using testing::MakeTokens;
using testing::Request;
using testing::SmallConfig;
using testing::SmallKv;

// Runs request `id` to completion; returns its first scheduled entry's start position.
int RunToEnd(Scheduler* s, FakeEngine* engine, SequenceParams p) {
  RequestId id = p.id;
  EXPECT_TRUE(s->AddRequest(std::move(p)).ok());
  int first_start = -1;
  int computed = 0;
  for (int i = 0; i < 100 && s->Find(id) != nullptr; ++i) {
    SchedulerOutput out;
    Status st = engine->Step(&out);
    EXPECT_TRUE(st.ok()) << st.ToString();
    for (const auto& e : out.scheduled) {
      if (e.id != id) continue;
      if (first_start < 0) first_start = e.start_position;
      computed += e.num_new_tokens;
    }
  }
  EXPECT_EQ(s->Find(id), nullptr);
  return first_start;
}

TEST(PrefixReuseTest, RepeatedPromptComputesOnlyUncachedTail) {
  FakeClock clock;
  Scheduler s(SmallConfig(), SmallKv(64, 0), clock);
  FakeEngine engine(&s);
  auto prompt = MakeTokens(42, 1);  // 10 full blocks of 4 + 2 tokens
  EXPECT_EQ(RunToEnd(&s, &engine, Request(1, prompt, 3)), 0);
  auto before = s.Counters();
  EXPECT_EQ(RunToEnd(&s, &engine, Request(2, prompt, 3)), 40);
  auto after = s.Counters();
  EXPECT_EQ(after.prefix_hit_tokens - before.prefix_hit_tokens, 40);
  EXPECT_EQ(after.prefix_query_tokens - before.prefix_query_tokens, 42);
  // Same greedy tokens from the cached KV (the fake engine verified all 40 positions).
  EXPECT_EQ(engine.generated().at(1), engine.generated().at(2));
  ASSERT_TRUE(engine.Step().ok());
  ASSERT_EQ(engine.finished().size(), 2u);
  EXPECT_EQ(engine.finished()[0].num_cached_prompt_tokens, 0);
  EXPECT_EQ(engine.finished()[1].num_cached_prompt_tokens, 40);
}

TEST(PrefixReuseTest, BlockAlignedPromptStillComputesItsLastToken) {
  FakeClock clock;
  Scheduler s(SmallConfig(), SmallKv(64, 0), clock);
  FakeEngine engine(&s);
  auto prompt = MakeTokens(16, 2);  // exactly 4 blocks
  RunToEnd(&s, &engine, Request(1, prompt, 2));
  // The last block cannot hit: one token must be computed for logits.
  EXPECT_EQ(RunToEnd(&s, &engine, Request(2, prompt, 2)), 12);
  EXPECT_EQ(engine.generated().at(1), engine.generated().at(2));
}

TEST(PrefixReuseTest, SharedPrefixThenDivergingTail) {
  FakeClock clock;
  Scheduler s(SmallConfig(), SmallKv(64, 0), clock);
  FakeEngine engine(&s);
  auto a = MakeTokens(30, 3);
  auto b = a;
  b[21] += 1;  // differs inside block 5 (tokens 20..23)
  RunToEnd(&s, &engine, Request(1, a, 2));
  EXPECT_EQ(RunToEnd(&s, &engine, Request(2, b, 2)), 20);
}

TEST(PrefixReuseTest, DifferentTenantSaltNeverHits) {
  FakeClock clock;
  Scheduler s(SmallConfig(), SmallKv(64, 16), clock);
  FakeEngine engine(&s);
  auto prompt = MakeTokens(40, 4);
  RunToEnd(&s, &engine, Request(1, prompt, 2, "tenant-a"));
  auto before = s.Counters();
  EXPECT_EQ(RunToEnd(&s, &engine, Request(2, prompt, 2, "tenant-b")), 0);
  EXPECT_EQ(s.Counters().prefix_hit_tokens, before.prefix_hit_tokens);
  // ...while the first tenant still hits.
  EXPECT_EQ(RunToEnd(&s, &engine, Request(3, prompt, 2, "tenant-a")), 36);
}

TEST(PrefixReuseTest, DemotedPrefixIsPromotedFromHostTier) {
  FakeClock clock;
  Scheduler s(SmallConfig(), SmallKv(/*device=*/16, /*host=*/64), clock);
  FakeEngine engine(&s);
  auto prompt = MakeTokens(33, 5);  // 8 full blocks
  RunToEnd(&s, &engine, Request(1, prompt, 2));
  // Other prompts push the cached blocks out of the 16-block device tier.
  for (int i = 0; i < 4; ++i) RunToEnd(&s, &engine, Request(10 + i, MakeTokens(40, 100 + i), 2));
  auto before = s.Counters();
  EXPECT_GE(before.kv.demoted_blocks, 8);
  EXPECT_EQ(RunToEnd(&s, &engine, Request(2, prompt, 2)), 32);
  auto after = s.Counters();
  EXPECT_GT(after.kv.promoted_blocks, before.kv.promoted_blocks);
  // Bit-exact round trip device -> host -> device: the engine verified every cached position.
  EXPECT_EQ(engine.generated().at(1), engine.generated().at(2));
}

TEST(PrefixReuseTest, PrefixCachingOffNeverHits) {
  FakeClock clock;
  auto kv = SmallKv(64, 0);
  kv.enable_prefix_caching = false;
  Scheduler s(SmallConfig(), kv, clock);
  FakeEngine engine(&s);
  auto prompt = MakeTokens(20, 6);
  RunToEnd(&s, &engine, Request(1, prompt, 2));
  EXPECT_EQ(RunToEnd(&s, &engine, Request(2, prompt, 2)), 0);
  EXPECT_EQ(s.Counters().kv.device.cached_blocks, 0);
}

}  // namespace
}  // namespace tandem::scheduler
