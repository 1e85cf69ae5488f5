// Preemption: swap and recompute give the same greedy tokens as an
// uninterrupted run (fake model); under KV pressure several times the pool
// every request finishes, in an order that makes progress (the oldest is never
// preempted, a preempted request comes back before newer ones, reservations
// wait behind it); the oldest request alone waits for blocks held elsewhere.
#include <algorithm>
#include <map>
#include <optional>
#include <set>

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
  int steps = 0;
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
    EXPECT_TRUE(
        s.AddRequest(Request(i + 1, prompt, 20 + i, "t", i % 2 ? Priority::kBatch : Priority::kInteractive)).ok());
  }
  RunResult r;
  for (; r.steps < 2000; ++r.steps) {
    auto c = s.Counters();
    if (c.num_running + c.num_waiting + c.num_swapped == 0) break;
    Status st = engine.Step();
    EXPECT_TRUE(st.ok()) << st.ToString();
    if (!st.ok()) break;
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
  RunResult swap = RunWorkload(tight, SmallKv(/*device=*/20, /*host=*/64));
  EXPECT_GT(swap.counters.preemptions_swap, 0);
  EXPECT_GT(swap.counters.swaps_in, 0);
  EXPECT_EQ(swap.counters.finished, 10);
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

// L6 in small: 24 requests that together need 10x the device tier, with a host
// tier that holds only a few of them. Every one generates all its tokens; the
// oldest live request is never the one preempted; a preempted request is back
// before any newer one is first admitted; and the output equals a roomy run.
TEST(PreemptionTest, PressureSeveralTimesThePoolFinishesEveryRequestInOrder) {
  constexpr int kRequests = 24, kMaxTokens = 120;
  auto run = [&](int device, int host, std::map<RequestId, std::vector<TokenId>>* generated) {
    FakeClock clock;
    Scheduler s(SmallConfig(/*budget=*/64, /*max_seqs=*/16, /*chunk=*/32), SmallKv(device, host), clock);
    FakeEngine engine(&s);
    for (RequestId id = 1; id <= kRequests; ++id) {
      ASSERT_TRUE(s.AddRequest(Request(id, MakeTokens(8, static_cast<int>(id)), kMaxTokens)).ok());
    }
    std::set<RequestId> live, seen, preempted;
    for (RequestId id = 1; id <= kRequests; ++id) live.insert(id);
    int steps = 0;
    for (; steps < 20000 && !live.empty(); ++steps) {
      SchedulerOutput out;
      ASSERT_TRUE(engine.Step(&out).ok());
      for (const FinishedSequence& f : out.finished) live.erase(f.id);
      for (const PreemptedSequence& p : out.preempted) {
        EXPECT_NE(p.id, *live.begin()) << "the oldest live request was preempted at step " << steps;
        preempted.insert(p.id);
      }
      for (const ScheduledSequence& sch : out.scheduled) {
        if (preempted.erase(sch.id) > 0) continue;  // resumed
        if (seen.insert(sch.id).second && !preempted.empty()) {
          EXPECT_GT(sch.id, *preempted.begin())
              << "new request " << sch.id << " overtook preempted " << *preempted.begin() << " at step " << steps;
        }
      }
    }
    auto c = s.Counters();
    EXPECT_EQ(c.finished, kRequests) << "after " << steps << " steps";
    EXPECT_EQ(c.kv.device.referenced_blocks + c.kv.host.referenced_blocks, 0);
    *generated = engine.generated();
    if (device < 1000) {
      EXPECT_GT(c.preemptions_swap, 0);
      EXPECT_GT(c.preemptions_recompute, 0) << "the host tier must run full too";
      std::printf("%d steps, %lld preemptions (%lld swap, %lld recompute)\n", steps,
                  static_cast<long long>(c.preemptions), static_cast<long long>(c.preemptions_swap),
                  static_cast<long long>(c.preemptions_recompute));
    }
  };
  std::map<RequestId, std::vector<TokenId>> roomy, tight;
  run(/*device=*/2000, /*host=*/0, &roomy);
  // Each request needs 32 blocks of 4 tokens at its end; 24 of them need 768.
  run(/*device=*/80, /*host=*/48, &tight);
  ASSERT_EQ(tight.size(), static_cast<size_t>(kRequests));
  for (const auto& [id, tokens] : tight) EXPECT_EQ(tokens.size(), static_cast<size_t>(kMaxTokens)) << id;
  EXPECT_EQ(tight, roomy);
}

// Preemption follows (class, arrival), not arrival alone: an older batch sequence
// gives its blocks to a newer interactive one, which is never preempted and
// finishes first; the batch one comes back and finishes too.
TEST(PreemptionTest, OlderBatchSequenceIsPreemptedBeforeANewerInteractiveOne) {
  FakeClock clock;
  // Each request needs 8 blocks of 4 tokens at its end; the device holds 12.
  Scheduler s(SmallConfig(64, 8), SmallKv(/*device=*/12, /*host=*/16), clock);
  FakeEngine engine(&s);
  ASSERT_TRUE(s.AddRequest(Request(1, MakeTokens(8, 1), 24, "t", Priority::kBatch)).ok());
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(engine.Step().ok());
  ASSERT_TRUE(s.AddRequest(Request(2, MakeTokens(8, 2), 24, "t", Priority::kInteractive)).ok());
  std::vector<RequestId> preempted, finished;
  for (int i = 0; i < 300 && finished.size() < 2; ++i) {
    SchedulerOutput out;
    ASSERT_TRUE(engine.Step(&out).ok());
    for (const PreemptedSequence& p : out.preempted) preempted.push_back(p.id);
    for (const FinishedSequence& f : out.finished) finished.push_back(f.id);
  }
  ASSERT_FALSE(preempted.empty()) << "the test must run out of blocks";
  for (RequestId id : preempted) EXPECT_EQ(id, 1u) << "the interactive sequence was preempted";
  EXPECT_EQ(finished, (std::vector<RequestId>{2, 1}));
  EXPECT_EQ(engine.generated().at(1).size(), 24u);
  EXPECT_EQ(s.Counters().kv.device.referenced_blocks + s.Counters().kv.host.referenced_blocks, 0);
}

// A reservation takes blocks when there is room, but a completed one that
// older queued work of its class precedes does not join the batch: it is
// swapped out at once and runs only after that work is back. A higher class
// goes straight to the batch. Requests 1-3 (batch class) need 18 of the 16
// device blocks at their end, so the newest, 3, is swapped out first.
TEST(PreemptionTest, CompletedReservationQueuesBehindOlderPreemptedWork) {
  auto batch = [](RequestId id, int prompt, int max_tokens) {
    return Request(id, MakeTokens(prompt, static_cast<int>(id)), max_tokens, "t", Priority::kBatch);
  };
  // Oracle for requests 1-3: the same three without reservations beside them.
  std::map<RequestId, std::vector<TokenId>> alone;
  {
    FakeClock clock;
    Scheduler s(SmallConfig(64, 8), SmallKv(/*device=*/16, /*host=*/16), clock);
    FakeEngine engine(&s);
    for (RequestId id = 1; id <= 3; ++id) ASSERT_TRUE(s.AddRequest(batch(id, 8, 16)).ok());
    for (int i = 0; i < 300 && s.Counters().finished < 3; ++i) ASSERT_TRUE(engine.Step().ok());
    alone = engine.generated();
  }

  FakeClock clock;
  Scheduler s(SmallConfig(64, 8), SmallKv(/*device=*/16, /*host=*/16), clock);
  FakeEngine engine(&s);
  for (RequestId id = 1; id <= 3; ++id) ASSERT_TRUE(s.AddRequest(batch(id, 8, 16)).ok());
  std::vector<PreemptedSequence> first_preempted;
  for (int i = 0; i < 100 && first_preempted.empty(); ++i) {
    SchedulerOutput out;
    ASSERT_TRUE(engine.Step(&out).ok());
    first_preempted = out.preempted;
  }
  ASSERT_EQ(first_preempted.size(), 1u);
  EXPECT_EQ(first_preempted[0].id, 3);
  EXPECT_EQ(first_preempted[0].mode, PreemptionMode::kSwap);
  ASSERT_EQ(s.Find(3)->state, SequenceState::kSwapped);

  // A batch-class reservation while 3 is swapped out: it gets blocks now...
  auto late = engine.Reserve(batch(10, 4, 4), 10'000);
  ASSERT_TRUE(late.ok()) << late.status().ToString();
  const int64_t preemptions = s.Counters().preemptions;
  ASSERT_TRUE(engine.LandReservation(10, *late).ok());
  // ...but once its KV has landed it queues behind 3, swapped (the host has room).
  EXPECT_EQ(s.Find(10)->state, SequenceState::kSwapped);
  EXPECT_EQ(s.Counters().preemptions, preemptions + 1);
  // An interactive reservation is before all of them: it joins the batch.
  auto urgent = engine.Reserve(Request(11, MakeTokens(4, 11), 4), 10'000);
  ASSERT_TRUE(urgent.ok()) << urgent.status().ToString();
  ASSERT_TRUE(engine.LandReservation(11, *urgent).ok());
  EXPECT_EQ(s.Find(11)->state, SequenceState::kRunning);
  EXPECT_EQ(s.Counters().preemptions, preemptions + 1);

  // The next step reports 10's preemption; then every request finishes, 11
  // scheduled at once, 10 only after 3 has been swapped back in (a later step,
  // or later in the same step's batch). `order` numbers the scheduled entries.
  std::set<RequestId> unfinished = {1, 2, 3, 10, 11};
  int order = 0, first_step_of_11 = -1;
  std::map<RequestId, int> first_scheduled;
  for (int i = 0; i < 300 && !unfinished.empty(); ++i) {
    SchedulerOutput out;
    ASSERT_TRUE(engine.Step(&out).ok());
    if (i == 0) {
      ASSERT_EQ(out.preempted.size(), 1u);
      EXPECT_EQ(out.preempted[0].id, 10);
      EXPECT_EQ(out.preempted[0].mode, PreemptionMode::kSwap);
    } else {
      EXPECT_TRUE(out.preempted.empty()) << "step " << i;
    }
    for (const FinishedSequence& f : out.finished) unfinished.erase(f.id);
    for (const ScheduledSequence& sch : out.scheduled) {
      first_scheduled.emplace(sch.id, order++);
      if (sch.id == 11 && first_step_of_11 < 0) first_step_of_11 = i;
    }
  }
  EXPECT_TRUE(unfinished.empty());
  EXPECT_EQ(first_step_of_11, 0);
  ASSERT_TRUE(first_scheduled.contains(3) && first_scheduled.contains(10));
  EXPECT_GT(first_scheduled[10], first_scheduled[3]);
  EXPECT_EQ(engine.generated().at(10).size(), 4u);
  EXPECT_EQ(engine.generated().at(11).size(), 4u);
  for (RequestId id = 1; id <= 3; ++id) EXPECT_EQ(engine.generated().at(id), alone.at(id)) << id;
  EXPECT_EQ(s.Counters().kv.device.referenced_blocks + s.Counters().kv.host.referenced_blocks, 0);
}

// The oldest request alone, short of blocks that a reservation holds, waits
// (keeps its blocks, schedules nothing) instead of failing, and finishes once
// the reservation is gone.
TEST(PreemptionTest, OldestAloneWaitsForBlocksHeldByAReservation) {
  FakeClock clock;
  SchedulerConfig cfg = SmallConfig(64, 8);
  cfg.reservation_quarantine_ms = 100;
  Scheduler s(cfg, SmallKv(/*device=*/16, /*host=*/16), clock);
  FakeEngine engine(&s);
  ASSERT_TRUE(s.Reserve(Request(9, MakeTokens(40, 9), 4), 10'000).ok());  // 10 blocks
  ASSERT_TRUE(s.AddRequest(Request(1, MakeTokens(4, 1), 40)).ok());       // 11 blocks at its end
  int idle_steps = 0;
  for (int i = 0; i < 60; ++i) {
    SchedulerOutput out;
    ASSERT_TRUE(engine.Step(&out).ok());
    EXPECT_TRUE(out.preempted.empty());
    idle_steps += out.scheduled.empty();
  }
  EXPECT_GT(idle_steps, 30) << "request 1 must have run out of blocks";
  ASSERT_NE(s.Find(1), nullptr);
  EXPECT_EQ(s.Find(1)->state, SequenceState::kRunning);
  ASSERT_TRUE(s.Cancel(9).ok());
  clock.AdvanceMs(100);
  for (int i = 0; i < 60 && s.Find(1) != nullptr; ++i) ASSERT_TRUE(engine.Step().ok());
  EXPECT_EQ(s.Find(1), nullptr);
  EXPECT_EQ(engine.generated().at(1).size(), 40u);
  EXPECT_EQ(s.Counters().finished, 1);
}

}  // namespace
}  // namespace tandem::scheduler
