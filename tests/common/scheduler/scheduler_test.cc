// Admission, chunked prefill, priorities, reservations, cancellation.
#include "common/scheduler/scheduler.h"

#include <gtest/gtest.h>

#include "common/base/clock.h"
#include "tests/common/scheduler/fake_engine.h"
#include "tests/common/scheduler/scheduler_test_util.h"

namespace tandem::scheduler {
namespace {

using kv_cache::KvTier;
using testing::FakeEngine;
using testing::MakeTokens;
using testing::Request;
using testing::SmallConfig;
using testing::SmallKv;

void ExpectKvClean(const Scheduler& s) {
  auto c = s.Counters();
  EXPECT_EQ(c.kv.device.referenced_blocks, 0);
  EXPECT_EQ(c.kv.host.referenced_blocks, 0);
  EXPECT_EQ(c.reservations_active, 0);
  EXPECT_EQ(c.num_running + c.num_waiting + c.num_swapped, 0);
}

TEST(SchedulerTest, RejectsRequestsThatCanNeverFitWithReason) {
  FakeClock clock;
  SchedulerConfig cfg = SmallConfig();
  cfg.max_model_len = 100;
  Scheduler s(cfg, SmallKv(/*device=*/8, /*host=*/0), clock);   // 32 tokens of KV
  Status st = s.AddRequest(Request(1, MakeTokens(30, 1), 10));  // 39 tokens of KV
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);           // L5: a 400 at admission, never a queue
  EXPECT_NE(st.message().find("can never fit"), std::string::npos) << st.ToString();
  EXPECT_EQ(s.Reserve(Request(6, MakeTokens(30, 1), 10), 100).status().code(), StatusCode::kInvalidArgument);
  st = s.AddRequest(Request(2, MakeTokens(90, 1), 20));
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("context_length_exceeded"), std::string::npos);
  EXPECT_EQ(s.AddRequest(Request(3, {}, 5)).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.AddRequest(Request(4, MakeTokens(3, 1), 0)).code(), StatusCode::kInvalidArgument);
  // Exactly 32 tokens of KV (29 prompt + 4 generated, the last never fed back) fits.
  ASSERT_TRUE(s.AddRequest(Request(5, MakeTokens(29, 1), 4)).ok());
  EXPECT_EQ(s.AddRequest(Request(5, MakeTokens(3, 1), 1)).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(s.Counters().rejected, 6);
  EXPECT_EQ(s.Counters().num_waiting, 1);
}

TEST(SchedulerTest, RequestThatFitsLaterWaitsThenRuns) {
  FakeClock clock;
  Scheduler s(SmallConfig(), SmallKv(8, 0), clock);
  FakeEngine engine(&s);
  ASSERT_TRUE(s.AddRequest(Request(1, MakeTokens(20, 1), 4)).ok());  // 5 blocks now
  ASSERT_TRUE(s.AddRequest(Request(2, MakeTokens(20, 2), 4)).ok());  // another 5: must wait
  SchedulerOutput out;
  ASSERT_TRUE(engine.Step(&out).ok());
  ASSERT_EQ(out.scheduled.size(), 1u);
  EXPECT_EQ(out.scheduled[0].id, 1u);
  EXPECT_EQ(s.Counters().num_waiting, 1);
  for (int i = 0; i < 20 && s.Find(2) != nullptr; ++i) ASSERT_TRUE(engine.Step().ok());
  EXPECT_EQ(s.Find(2), nullptr);
  ASSERT_EQ(engine.generated().at(2).size(), 4u);
  ExpectKvClean(s);
}

TEST(SchedulerTest, ChunkedPrefillIsMixedWithDecodes) {
  FakeClock clock;
  Scheduler s(SmallConfig(/*budget=*/8, 8, /*chunk=*/6), SmallKv(32, 0), clock);
  FakeEngine engine(&s);
  ASSERT_TRUE(s.AddRequest(Request(1, MakeTokens(3, 1), 10)).ok());
  SchedulerOutput out;
  ASSERT_TRUE(engine.Step(&out).ok());  // 1: whole 3-token prompt, logits
  ASSERT_EQ(out.scheduled.size(), 1u);
  EXPECT_TRUE(out.scheduled[0].needs_logits);
  ASSERT_TRUE(s.AddRequest(Request(2, MakeTokens(20, 2), 2)).ok());
  // Step 2: decode of 1 (1 token) + first chunk of 2 (6 tokens, capped by chunk).
  ASSERT_TRUE(engine.Step(&out).ok());
  ASSERT_EQ(out.scheduled.size(), 2u);
  EXPECT_EQ(out.scheduled[0].id, 1u);
  EXPECT_EQ(out.scheduled[0].start_position, 3);
  EXPECT_EQ(out.scheduled[0].num_new_tokens, 1);
  EXPECT_FALSE(out.scheduled[0].is_prefill);
  EXPECT_EQ(out.scheduled[1].id, 2u);
  EXPECT_EQ(out.scheduled[1].start_position, 0);
  EXPECT_EQ(out.scheduled[1].num_new_tokens, 6);
  EXPECT_FALSE(out.scheduled[1].needs_logits);
  EXPECT_EQ(out.num_batched_tokens, 7);
  int prefill_steps = 1;
  while (s.Find(2) != nullptr && s.Find(2)->num_computed_tokens < 20) {
    ASSERT_TRUE(engine.Step(&out).ok());
    ++prefill_steps;
    EXPECT_LE(out.num_batched_tokens, 8);
  }
  EXPECT_EQ(prefill_steps, 4);  // 6 + 6 + 6 + 2
  EXPECT_TRUE(out.scheduled.back().needs_logits);
}

TEST(SchedulerTest, InteractiveBeforeBatchAndFcfsWithinClass) {
  FakeClock clock;
  Scheduler s(SmallConfig(64, /*max_seqs=*/1), SmallKv(32, 0), clock);
  FakeEngine engine(&s);
  ASSERT_TRUE(s.AddRequest(Request(1, MakeTokens(4, 1), 1, "t", Priority::kBatch)).ok());
  ASSERT_TRUE(s.AddRequest(Request(2, MakeTokens(4, 2), 1, "t", Priority::kBatch)).ok());
  ASSERT_TRUE(s.AddRequest(Request(3, MakeTokens(4, 3), 1, "t", Priority::kInteractive)).ok());
  ASSERT_TRUE(s.AddRequest(Request(4, MakeTokens(4, 4), 1, "t", Priority::kInteractive)).ok());
  std::vector<RequestId> order;
  for (int i = 0; i < 4; ++i) {
    SchedulerOutput out;
    ASSERT_TRUE(engine.Step(&out).ok());
    ASSERT_EQ(out.scheduled.size(), 1u);
    order.push_back(out.scheduled[0].id);
  }
  EXPECT_EQ(order, (std::vector<RequestId>{3, 4, 1, 2}));
}

TEST(SchedulerTest, ReservationLeaseExpiryFreesBlocks) {
  FakeClock clock;
  Scheduler s(SmallConfig(), SmallKv(16, 0), clock);
  auto r = s.Reserve(Request(7, MakeTokens(10, 1), 5), /*lease_ms=*/100);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->block_table.size(), 3u);
  EXPECT_EQ(r->first_block_to_fill, 0);
  EXPECT_EQ(r->lease_deadline, MsToNanos(100));
  EXPECT_EQ(s.Counters().kv.device.referenced_blocks, 3);
  EXPECT_EQ(s.Counters().reservations_active, 1);
  clock.AdvanceMs(99);
  EXPECT_TRUE(s.Schedule().finished.empty());
  clock.AdvanceMs(1);
  SchedulerOutput out = s.Schedule();
  ASSERT_EQ(out.finished.size(), 1u);
  EXPECT_EQ(out.finished[0].reason, FinishReason::kLeaseExpired);
  EXPECT_EQ(out.finished[0].status.code(), StatusCode::kDeadlineExceeded);
  auto c = s.Counters();
  EXPECT_EQ(c.lease_expiries, 1);
  EXPECT_EQ(c.reservations_total, 1);
  EXPECT_EQ(c.kv.device.referenced_blocks, 0);
  // Never computed: nothing cached; a remote writer may still write them for a while.
  EXPECT_EQ(c.kv.device.quarantined_blocks, 3);
  EXPECT_EQ(c.kv.device.free_blocks, 13);
  EXPECT_EQ(s.CompleteReservation(7, 1).status().code(), StatusCode::kNotFound);
  clock.AdvanceMs(SchedulerConfig().reservation_quarantine_ms);
  s.Schedule();
  EXPECT_EQ(s.Counters().kv.device.free_blocks, 16);
}

TEST(SchedulerTest, CompletedReservationDecodesLikeALocalPrefill) {
  FakeClock clock;
  Scheduler remote(SmallConfig(), SmallKv(32, 0), clock);
  FakeEngine remote_engine(&remote);
  auto r = remote_engine.Reserve(Request(1, MakeTokens(13, 5), 6), 0);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->lease_deadline, MsToNanos(SchedulerConfig().default_lease_ms));
  EXPECT_TRUE(remote.Schedule().scheduled.empty());  // reserved: not in the batch yet
  ASSERT_TRUE(remote_engine.LandReservation(1, *r).ok());
  EXPECT_EQ(remote.Counters().reservations_active, 0);
  for (int i = 0; i < 10 && remote.Find(1); ++i) ASSERT_TRUE(remote_engine.Step().ok());

  Scheduler local(SmallConfig(), SmallKv(32, 0), clock);
  FakeEngine local_engine(&local);
  ASSERT_TRUE(local.AddRequest(Request(1, MakeTokens(13, 5), 6)).ok());
  for (int i = 0; i < 10 && local.Find(1); ++i) ASSERT_TRUE(local_engine.Step().ok());
  ASSERT_EQ(remote_engine.generated().at(1).size(), 6u);
  EXPECT_EQ(remote_engine.generated().at(1), local_engine.generated().at(1));
  ExpectKvClean(remote);
}

TEST(SchedulerTest, ReservationReusesLocallyCachedPrefix) {
  FakeClock clock;
  Scheduler s(SmallConfig(), SmallKv(32, 0), clock);
  FakeEngine engine(&s);
  auto prompt = MakeTokens(18, 9);
  ASSERT_TRUE(s.AddRequest(Request(1, prompt, 1)).ok());
  ASSERT_TRUE(engine.Step().ok());
  prompt.resize(14);
  auto r = engine.Reserve(Request(2, prompt, 3), 1000);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->num_cached_tokens, 12);  // 3 full blocks of 4 shared
  EXPECT_EQ(r->first_block_to_fill, 3);
  ASSERT_TRUE(engine.LandReservation(2, *r).ok());  // verifies the cached 12 positions
  EXPECT_EQ(engine.num_verified_positions(), 12u);
}

TEST(SchedulerTest, CancelInEveryPhaseFreesEverything) {
  FakeClock clock;
  SchedulerConfig cfg = SmallConfig(/*budget=*/8, 8, /*chunk=*/8);
  Scheduler s(cfg, SmallKv(16, 32), clock);
  FakeEngine engine(&s);
  ASSERT_TRUE(s.AddRequest(Request(1, MakeTokens(30, 1), 8)).ok());  // mid-prefill after 1 step
  ASSERT_TRUE(engine.Step().ok());
  ASSERT_TRUE(s.Reserve(Request(3, MakeTokens(8, 3), 4), 1000).ok());  // reserved (before anything queues)
  ASSERT_TRUE(s.AddRequest(Request(2, MakeTokens(30, 2), 8)).ok());    // waiting (budget)
  EXPECT_EQ(s.Find(1)->state, SequenceState::kRunning);
  EXPECT_EQ(s.Find(2)->state, SequenceState::kWaiting);
  // Drive until someone gets swapped.
  bool saw_swapped = false;
  for (int i = 0; i < 40 && !saw_swapped; ++i) {
    ASSERT_TRUE(engine.Step().ok());
    for (RequestId id : {1, 2}) {
      if (s.Find(id) && s.Find(id)->state == SequenceState::kSwapped) {
        saw_swapped = true;
        EXPECT_GT(s.Counters().kv.host.referenced_blocks, 0);
        ASSERT_TRUE(s.Cancel(id).ok());
      }
    }
  }
  EXPECT_TRUE(saw_swapped);
  for (RequestId id : {1, 2, 3}) {
    if (s.Find(id)) {
      ASSERT_TRUE(s.Cancel(id).ok());
    }
  }
  EXPECT_EQ(s.Cancel(1).code(), StatusCode::kNotFound);
  SchedulerOutput out = s.Schedule();
  ExpectKvClean(s);
  EXPECT_GE(s.Counters().cancelled, 3);
}

TEST(SchedulerTest, StopTokenAndMaxTokensFinish) {
  FakeClock clock;
  Scheduler s(SmallConfig(), SmallKv(32, 0), clock);
  FakeEngine engine(&s);
  auto prompt = MakeTokens(5, 3);
  ASSERT_TRUE(s.AddRequest(Request(1, prompt, 3)).ok());
  for (int i = 0; i < 5 && s.Find(1); ++i) ASSERT_TRUE(engine.Step().ok());
  ASSERT_TRUE(engine.Step().ok());  // reports what ended since the last step
  ASSERT_EQ(engine.finished().size(), 1u);
  EXPECT_EQ(engine.finished()[0].reason, FinishReason::kLength);
  EXPECT_EQ(engine.finished()[0].num_generated_tokens, 3);
  // Same prompt, the second generated token as a stop token: stops after 2.
  auto stop_at = engine.generated().at(1)[1];
  auto p = Request(2, prompt, 3);
  p.stop_token_ids = {stop_at};
  if (engine.generated().at(1)[0] == stop_at) GTEST_SKIP() << "sampler repeated a token";
  ASSERT_TRUE(s.AddRequest(p).ok());
  for (int i = 0; i < 5 && s.Find(2); ++i) ASSERT_TRUE(engine.Step().ok());
  ASSERT_TRUE(engine.Step().ok());
  ASSERT_EQ(engine.finished().size(), 2u);
  EXPECT_EQ(engine.finished()[1].reason, FinishReason::kStop);
  EXPECT_EQ(engine.finished()[1].num_generated_tokens, 2);
  EXPECT_EQ(s.AppendToken(2, 1).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace tandem::scheduler

namespace tandem::scheduler {
namespace {

TEST(SchedulerTest, CancelBeforeTheForwardPublishesNothingUncomputed) {
  FakeClock clock;
  Scheduler s(testing::SmallConfig(/*budget=*/8, 8, /*chunk=*/8), testing::SmallKv(32, 0), clock);
  auto prompt = testing::MakeTokens(20, 3);
  ASSERT_TRUE(s.AddRequest(testing::Request(1, prompt, 4)).ok());
  (void)s.Schedule();  // chunk [0, 8): computed once the engine runs it
  (void)s.Schedule();  // chunk [8, 16) scheduled, then cancelled before its forward
  ASSERT_TRUE(s.Cancel(1).ok());
  // Only the first chunk's two blocks may be cached.
  EXPECT_EQ(s.Counters().kv.device.cached_blocks, 2);
  ASSERT_TRUE(s.AddRequest(testing::Request(2, prompt, 4)).ok());
  SchedulerOutput out = s.Schedule();
  ASSERT_EQ(out.scheduled.size(), 1u);
  EXPECT_EQ(out.scheduled[0].start_position, 8);
}

}  // namespace
}  // namespace tandem::scheduler
