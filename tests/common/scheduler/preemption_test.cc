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
    EXPECT_TRUE(s.AddRequest(Request(i + 1, prompt, 20 + i, "t", i % 2 ? Priority::kBatch
                                                                       : Priority::kInteractive)).ok());
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
          EXPECT_GT(sch.id, *preempted.begin()) << "new request " << sch.id << " overtook preempted "
                                                << *preempted.begin() << " at step " << steps;
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

// A reservation takes blocks when there is room, but a completed one that
// older queued work of its class precedes does not join the batch: it queues
// behind it (preempted at once). A higher class goes straight to the batch.
TEST(PreemptionTest, CompletedReservationQueuesBehindOlderPreemptedWork) {
  FakeClock clock;
  Scheduler s(SmallConfig(64, 8), SmallKv(/*device=*/16, /*host=*/16), clock);
  FakeEngine engine(&s);
  auto batch = [](RequestId id, int prompt, int max_tokens) {
    return Request(id, MakeTokens(prompt, static_cast<int>(id)), max_tokens, "t", Priority::kBatch);
  };
  for (RequestId id = 1; id <= 3; ++id) ASSERT_TRUE(s.AddRequest(batch(id, 8, 16)).ok());
  std::optional<Reservation> late, urgent;
  for (int i = 0; i < 100 && !(late && urgent); ++i) {
    ASSERT_TRUE(engine.Step().ok());
    if (s.Counters().num_swapped + s.Counters().num_waiting == 0) continue;  // nothing queued yet
    if (!late) {
      if (auto r = engine.Reserve(batch(10, 4, 4), 10'000); r.ok()) late = *r;
    } else if (!urgent) {
      if (auto r = engine.Reserve(Request(11, MakeTokens(4, 11), 4), 10'000); r.ok()) urgent = *r;
    }
  }
  ASSERT_TRUE(late && urgent) << "the reservations never found room";
  ASSERT_GT(s.Counters().num_swapped + s.Counters().num_waiting, 0);
  const int64_t preemptions = s.Counters().preemptions;
  ASSERT_TRUE(engine.LandReservation(10, *late).ok());
  EXPECT_NE(s.Find(10)->state, SequenceState::kRunning) << "batch work older than it is queued";
  EXPECT_EQ(s.Counters().preemptions, preemptions + 1);
  ASSERT_TRUE(engine.LandReservation(11, *urgent).ok());
  EXPECT_EQ(s.Find(11)->state, SequenceState::kRunning) << "nothing of its class or higher is queued";
  std::set<RequestId> unfinished = {1, 2, 3, 10, 11};
  bool ten_ran = false;
  for (int i = 0; i < 300 && !unfinished.empty(); ++i) {
    SchedulerOutput out;
    ASSERT_TRUE(engine.Step(&out).ok());
    for (const FinishedSequence& f : out.finished) unfinished.erase(f.id);
    for (const ScheduledSequence& sch : out.scheduled) {
      if (sch.id != 10 || ten_ran) continue;
      ten_ran = true;
      for (RequestId older = 1; older <= 3; ++older) {
        const Sequence* seq = s.Find(older);
        EXPECT_TRUE(seq == nullptr || seq->state == SequenceState::kRunning) << older << " still queued";
      }
    }
  }
  EXPECT_TRUE(unfinished.empty());
  EXPECT_EQ(engine.generated().at(10).size(), 4u);
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
  ASSERT_TRUE(s.AddRequest(Request(1, MakeTokens(4, 1), 40)).ok());     // 11 blocks at its end
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
