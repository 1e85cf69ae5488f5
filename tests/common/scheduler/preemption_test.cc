// Preemption: swap and recompute give the same greedy tokens as an
// uninterrupted run (fake model), and the per-request bound holds.
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

struct RunResult {
  std::map<RequestId, std::vector<TokenId>> generated;
  SchedulerCounters counters;
  int max_preemptions_seen = 0;
};

// 10 requests, a few sharing a prefix, run to completion.
RunResult RunWorkload(SchedulerConfig cfg, kv_cache::KvCacheConfig kv) {
  FakeClock clock;
  Scheduler s(cfg, kv, clock);
  FakeEngine engine(&s);
  auto shared = MakeTokens(12, 77);
  for (int i = 0; i < 10; ++i) {
    auto prompt = MakeTokens(5 + 3 * i, i);
    if (i % 3 == 0) prompt.insert(prompt.begin(), shared.begin(), shared.end());
    EXPECT_TRUE(s.AddRequest(Request(i + 1, prompt, 20 + i, "t", i % 2 ? Priority::kBatch
                                                                       : Priority::kInteractive)).ok());
  }
  RunResult r;
  for (int step = 0; step < 2000; ++step) {
    auto c = s.Counters();
    if (c.num_running + c.num_waiting + c.num_swapped == 0) break;
    Status st = engine.Step();
    EXPECT_TRUE(st.ok()) << st.ToString();
    if (!st.ok()) break;
    for (RequestId id = 1; id <= 10; ++id) {
      if (const Sequence* seq = s.Find(id)) r.max_preemptions_seen = std::max(r.max_preemptions_seen, seq->num_preemptions);
    }
  }
  r.generated = engine.generated();
  r.counters = s.Counters();
  EXPECT_EQ(r.counters.kv.device.referenced_blocks, 0);
  EXPECT_EQ(r.counters.kv.host.referenced_blocks, 0);
  return r;
}

TEST(PreemptionTest, SwapAndRecomputeGiveSameTokensAsUninterrupted) {
  RunResult roomy = RunWorkload(SmallConfig(64, 16), SmallKv(512, 0));
  EXPECT_EQ(roomy.counters.preemptions, 0);
  ASSERT_EQ(roomy.generated.size(), 10u);

  SchedulerConfig tight = SmallConfig(64, 16);
  tight.max_preemptions_per_request = 1000;
  RunResult swap = RunWorkload(tight, SmallKv(/*device=*/20, /*host=*/64));
  EXPECT_GT(swap.counters.preemptions_swap, 0);
  EXPECT_GT(swap.counters.swaps_in, 0);
  EXPECT_EQ(swap.counters.aborted, 0);
  EXPECT_EQ(swap.generated, roomy.generated);

  tight.preemption_mode = PreemptionMode::kRecompute;
  RunResult recompute = RunWorkload(tight, SmallKv(20, 64));
  EXPECT_GT(recompute.counters.preemptions_recompute, 0);
  EXPECT_EQ(recompute.counters.preemptions_swap, 0);
  EXPECT_EQ(recompute.generated, roomy.generated);

  // Swap requested but no host tier: falls back to recompute.
  tight.preemption_mode = PreemptionMode::kSwap;
  RunResult fallback = RunWorkload(tight, SmallKv(20, 0));
  EXPECT_GT(fallback.counters.preemptions_recompute, 0);
  EXPECT_EQ(fallback.counters.preemptions_swap, 0);
  EXPECT_EQ(fallback.generated, roomy.generated);
}

TEST(PreemptionTest, BoundOnPreemptionsPerRequestHolds) {
  SchedulerConfig tight = SmallConfig(64, 16);
  tight.max_preemptions_per_request = 1;
  RunResult r = RunWorkload(tight, SmallKv(20, 64));
  EXPECT_GT(r.counters.preemptions, 0);
  EXPECT_LE(r.max_preemptions_seen, 1);
  // Every request ends: finished normally or, when nothing may be preempted, aborted.
  EXPECT_EQ(r.counters.finished + r.counters.aborted, 10);
}

}  // namespace
}  // namespace tandem::scheduler
