// The two scheduler pieces of a KV handoff: held KV (a finished sequence keeps
// its device blocks until ReleaseHeld/Cancel) and the quarantine of the blocks
// an abandoned reservation may still receive remote writes into.
#include <algorithm>
#include <set>

#include <gtest/gtest.h>

#include "common/base/clock.h"
#include "common/scheduler/scheduler.h"
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

SequenceParams Held(RequestId id, std::vector<TokenId> prompt, int max_tokens) {
  SequenceParams p = Request(id, std::move(prompt), max_tokens);
  p.hold_kv_after_finish = true;
  return p;
}

// free + referenced + cached + quarantined = total, per tier.
void ExpectBlocksAddUp(const Scheduler& s) {
  auto c = s.Counters();
  for (const kv_cache::KvTierCounters& t : {c.kv.device, c.kv.host}) {
    EXPECT_EQ(t.free_blocks + t.referenced_blocks + t.cached_blocks + t.quarantined_blocks, t.total_blocks);
  }
  EXPECT_EQ(c.num_quarantined_blocks, c.kv.device.quarantined_blocks);
}

TEST(HeldKvTest, MaxTokensOneHoldsBlocksUntilRelease) {
  FakeClock clock;
  Scheduler s(SmallConfig(64, /*max_seqs=*/1), SmallKv(16, 0), clock);
  FakeEngine engine(&s);
  const auto prompt = MakeTokens(10, 1);
  ASSERT_TRUE(s.AddRequest(Held(1, prompt, 1)).ok());
  ASSERT_TRUE(engine.Step().ok());
  EXPECT_EQ(s.Find(1), nullptr);
  const std::vector<BlockId>* held = s.HeldBlocks(1);
  ASSERT_NE(held, nullptr);
  ASSERT_EQ(held->size(), 3u);  // 10 computed tokens in blocks of 4
  const std::vector<BlockId> blocks = *held;
  auto c = s.Counters();
  EXPECT_EQ(c.num_held, 1);
  EXPECT_EQ(c.num_running, 0);
  EXPECT_EQ(c.kv.device.referenced_blocks, 3);
  ExpectBlocksAddUp(s);

  // The finish is reported as usual; the one batch slot is free for the next request.
  ASSERT_TRUE(s.AddRequest(Request(2, MakeTokens(6, 2), 2)).ok());
  SchedulerOutput out;
  ASSERT_TRUE(engine.Step(&out).ok());
  ASSERT_EQ(out.finished.size(), 1u);
  EXPECT_EQ(out.finished[0].id, 1u);
  EXPECT_EQ(out.finished[0].reason, FinishReason::kLength);
  ASSERT_EQ(out.scheduled.size(), 1u);
  EXPECT_EQ(out.scheduled[0].id, 2u);
  for (int i = 0; i < 5 && s.Find(2) != nullptr; ++i) ASSERT_TRUE(engine.Step().ok());

  // The full blocks are in the prefix cache and shared while still held.
  ASSERT_TRUE(s.AddRequest(Request(3, prompt, 3)).ok());  // still running after the step: its spans stay valid
  ASSERT_TRUE(engine.Step(&out).ok());
  EXPECT_EQ(s.Counters().prefix_hit_tokens, 8);
  ASSERT_EQ(out.scheduled.size(), 1u);
  EXPECT_EQ(out.scheduled[0].start_position, 8);
  EXPECT_EQ(out.scheduled[0].block_table[0], blocks[0]);
  EXPECT_EQ(out.scheduled[0].block_table[1], blocks[1]);
  EXPECT_NE(out.scheduled[0].block_table[2], blocks[2]) << "the partial block is private";
  EXPECT_EQ(s.kv().pool(KvTier::kDevice).RefCount(blocks[0]), 2);
  for (int i = 0; i < 5 && s.Find(3) != nullptr; ++i) ASSERT_TRUE(engine.Step().ok());

  ASSERT_TRUE(engine.VerifyBlocks("tenant-a", prompt, blocks).ok());
  EXPECT_EQ(s.AddRequest(Request(1, prompt, 1)).code(), StatusCode::kAlreadyExists) << "id still held";
  ASSERT_TRUE(s.ReleaseHeld(1).ok());
  EXPECT_EQ(s.ReleaseHeld(1).code(), StatusCode::kNotFound);
  EXPECT_EQ(s.HeldBlocks(1), nullptr);
  c = s.Counters();
  EXPECT_EQ(c.num_held, 0);
  EXPECT_EQ(c.kv.device.referenced_blocks, 0);
  EXPECT_EQ(s.kv().pool(KvTier::kDevice).RefCount(blocks[0]), 0);
  EXPECT_TRUE(s.kv().pool(KvTier::kDevice).HasHash(blocks[0])) << "full blocks stay cached";
  EXPECT_TRUE(s.kv().pool(KvTier::kDevice).IsFree(blocks[2]));
  ExpectBlocksAddUp(s);
  EXPECT_TRUE(s.AddRequest(Request(1, prompt, 1)).ok()) << "the id is free again";
}

TEST(HeldKvTest, StopFinishIsHeldAndCancelReleasesWithoutASecondEnd) {
  FakeClock clock;
  Scheduler s(SmallConfig(), SmallKv(16, 0), clock);
  FakeEngine engine(&s);
  SequenceParams p = Held(1, MakeTokens(9, 3), 5);
  for (TokenId t = 0; t < testing::kFakeVocab; ++t) p.stop_token_ids.push_back(t);  // any token stops
  ASSERT_TRUE(s.AddRequest(std::move(p)).ok());
  ASSERT_TRUE(engine.Step().ok());
  ASSERT_NE(s.HeldBlocks(1), nullptr);
  ASSERT_TRUE(s.Cancel(1).ok());
  EXPECT_EQ(s.HeldBlocks(1), nullptr);
  EXPECT_EQ(s.Cancel(1).code(), StatusCode::kNotFound);
  ASSERT_TRUE(engine.Step().ok());
  ASSERT_EQ(engine.finished().size(), 1u);
  EXPECT_EQ(engine.finished()[0].reason, FinishReason::kStop);
  auto c = s.Counters();
  EXPECT_EQ(c.cancelled, 0);
  EXPECT_EQ(c.kv.device.referenced_blocks, 0);
}

TEST(HeldKvTest, AnAbortedOrCancelledSequenceHoldsNothing) {
  FakeClock clock;
  Scheduler s(SmallConfig(), SmallKv(16, 0), clock);
  FakeEngine engine(&s);
  ASSERT_TRUE(s.AddRequest(Held(1, MakeTokens(9, 3), 5)).ok());
  ASSERT_TRUE(engine.Step().ok());
  ASSERT_TRUE(s.Cancel(1).ok());
  EXPECT_EQ(s.HeldBlocks(1), nullptr);
  EXPECT_EQ(s.Counters().num_held, 0);
  EXPECT_EQ(s.Counters().kv.device.referenced_blocks, 0);
}

TEST(HeldKvTest, CompletedReservationEndingAtOnceIsHeld) {
  FakeClock clock;
  Scheduler s(SmallConfig(), SmallKv(16, 0), clock);
  FakeEngine engine(&s);
  auto r = engine.Reserve(Held(4, MakeTokens(7, 4), 1), 1000);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(engine.LandReservation(4, *r).ok());
  const std::vector<BlockId>* held = s.HeldBlocks(4);
  ASSERT_NE(held, nullptr);
  EXPECT_EQ(*held, r->block_table);
  EXPECT_EQ(s.Counters().num_quarantined_blocks, 0) << "a completed reservation needs no quarantine";
  clock.AdvanceMs(5000);  // past the lease: a held sequence has none
  ASSERT_TRUE(engine.Step().ok());
  ASSERT_NE(s.HeldBlocks(4), nullptr);
  EXPECT_TRUE(engine.VerifyBlocks("tenant-a", MakeTokens(7, 4), *s.HeldBlocks(4)).ok());
  ASSERT_TRUE(s.ReleaseHeld(4).ok());
  EXPECT_EQ(s.Counters().kv.device.referenced_blocks, 0);
}

// Held blocks are neither evicted, demoted nor swapped while other requests
// preempt each other around them, and their content survives.
TEST(HeldKvTest, HeldBlocksSurvivePreemptionAndEviction) {
  FakeClock clock;
  SchedulerConfig cfg = SmallConfig(64, 8);
  Scheduler s(cfg, SmallKv(/*device=*/14, /*host=*/8), clock);
  FakeEngine engine(&s);
  const auto prompt = MakeTokens(16, 5);
  ASSERT_TRUE(s.AddRequest(Held(1, prompt, 1)).ok());
  ASSERT_TRUE(engine.Step().ok());
  const std::vector<BlockId> blocks = *s.HeldBlocks(1);
  ASSERT_EQ(blocks.size(), 4u);
  // 10 device blocks left; four requests of 5 blocks each at their end.
  for (RequestId id = 2; id <= 5; ++id) ASSERT_TRUE(s.AddRequest(Request(id, MakeTokens(8, 100 + id), 12)).ok());
  for (int i = 0; i < 400 && s.Counters().num_running + s.Counters().num_waiting + s.Counters().num_swapped > 0; ++i) {
    SchedulerOutput out;
    ASSERT_TRUE(engine.Step(&out).ok());
    for (BlockId b : blocks) EXPECT_EQ(engine.scheduled_blocks().count(b), 0u) << "held block " << b << " reused";
    for (const auto& copy : out.copies) {
      if (copy.src_tier == KvTier::kDevice) {
        EXPECT_EQ(std::count(blocks.begin(), blocks.end(), copy.src_block), 0) << "held block moved";
      }
      if (copy.dst_tier == KvTier::kDevice) {
        EXPECT_EQ(std::count(blocks.begin(), blocks.end(), copy.dst_block), 0) << "held block overwritten";
      }
    }
    ExpectBlocksAddUp(s);
  }
  auto c = s.Counters();
  EXPECT_GT(c.preemptions, 0) << "the test must put the pool under pressure";
  EXPECT_EQ(c.finished, 5);
  EXPECT_EQ(*s.HeldBlocks(1), blocks);
  EXPECT_TRUE(engine.VerifyBlocks("tenant-a", prompt, blocks).ok());
  ASSERT_TRUE(s.ReleaseHeld(1).ok());
  EXPECT_EQ(s.Counters().kv.device.referenced_blocks, 0);
}

TEST(ReservationQuarantineTest, CancelQuarantinesOnlyTheRemotelyWrittenBlocks) {
  FakeClock clock;
  Scheduler s(SmallConfig(), SmallKv(8, 0), clock);
  FakeEngine engine(&s);
  auto prompt = MakeTokens(16, 6);
  ASSERT_TRUE(s.AddRequest(Request(1, std::vector<TokenId>(prompt.begin(), prompt.begin() + 8), 1)).ok());
  ASSERT_TRUE(engine.Step().ok());  // blocks 0-1 of the prompt are cached now
  auto r = engine.Reserve(Request(2, prompt, 4), 10'000);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->first_block_to_fill, 2);
  ASSERT_EQ(r->block_table.size(), 4u);
  ASSERT_TRUE(s.Cancel(2).ok());
  auto c = s.Counters();
  EXPECT_EQ(c.num_quarantined_blocks, 2);
  EXPECT_EQ(c.kv.device.referenced_blocks, 0);
  EXPECT_EQ(c.kv.device.cached_blocks, 2) << "the reused prefix goes back to the cache at once";
  EXPECT_EQ(c.kv.device.free_blocks, 4);
  ExpectBlocksAddUp(s);
  std::vector<BlockId> quarantined = s.kv().QuarantinedBlocks();
  std::sort(quarantined.begin(), quarantined.end());
  std::vector<BlockId> remote(r->block_table.begin() + 2, r->block_table.end());
  std::sort(remote.begin(), remote.end());
  EXPECT_EQ(quarantined, remote);

  // A request needing all 8 blocks waits out the quarantine; it never gets those blocks early.
  ASSERT_TRUE(s.AddRequest(Request(3, MakeTokens(30, 7), 1)).ok());
  for (int ms = 0; ms < 2999; ms += 500) {
    SchedulerOutput out;
    ASSERT_TRUE(engine.Step(&out).ok());
    EXPECT_TRUE(out.scheduled.empty()) << "at " << ms << " ms";
    clock.AdvanceMs(std::min(500, 2999 - ms));
  }
  EXPECT_EQ(s.Counters().num_quarantined_blocks, 2);
  clock.AdvanceMs(1);
  SchedulerOutput out;
  ASSERT_TRUE(engine.Step(&out).ok());
  ASSERT_EQ(out.scheduled.size(), 1u);
  EXPECT_EQ(out.scheduled[0].id, 3u);
  EXPECT_EQ(s.Counters().num_quarantined_blocks, 0);
  ExpectBlocksAddUp(s);
}

TEST(ReservationQuarantineTest, LeaseExpiryQuarantinesTheWholeReservation) {
  FakeClock clock;
  SchedulerConfig cfg = SmallConfig();
  cfg.reservation_quarantine_ms = 200;
  Scheduler s(cfg, SmallKv(16, 0), clock);
  auto r = s.Reserve(Request(7, MakeTokens(10, 1), 5), /*lease_ms=*/100);
  ASSERT_TRUE(r.ok());
  clock.AdvanceMs(100);
  SchedulerOutput out = s.Schedule();
  ASSERT_EQ(out.finished.size(), 1u);
  EXPECT_EQ(out.finished[0].reason, FinishReason::kLeaseExpired);
  EXPECT_EQ(s.Counters().num_quarantined_blocks, 3);
  EXPECT_EQ(s.Counters().kv.device.free_blocks, 13);
  ExpectBlocksAddUp(s);
  // A new reservation cannot get them either.
  auto big = s.Reserve(Request(8, MakeTokens(60, 2), 1), 100);
  EXPECT_EQ(big.status().code(), StatusCode::kResourceExhausted);
  clock.AdvanceMs(200);
  big = s.Reserve(Request(8, MakeTokens(60, 2), 1), 100);
  ASSERT_TRUE(big.ok()) << "Reserve releases due quarantines itself";
  EXPECT_EQ(s.Counters().num_quarantined_blocks, 0);
}

TEST(ReservationQuarantineTest, CompletedOrUnquarantinedReservationsFreeAtOnce) {
  FakeClock clock;
  Scheduler s(SmallConfig(), SmallKv(16, 0), clock);
  FakeEngine engine(&s);
  auto r = engine.Reserve(Request(1, MakeTokens(10, 1), 3), 1000);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(engine.LandReservation(1, *r).ok());
  ASSERT_TRUE(s.Cancel(1).ok());  // running now: a local end
  EXPECT_EQ(s.Counters().num_quarantined_blocks, 0);
  EXPECT_EQ(s.Counters().kv.device.referenced_blocks, 0);

  SchedulerConfig cfg = SmallConfig();
  cfg.reservation_quarantine_ms = 0;
  Scheduler off(cfg, SmallKv(16, 0), clock);
  ASSERT_TRUE(off.Reserve(Request(2, MakeTokens(10, 1), 3), 1000).ok());
  ASSERT_TRUE(off.Cancel(2).ok());
  EXPECT_EQ(off.Counters().num_quarantined_blocks, 0);
  EXPECT_EQ(off.Counters().kv.device.free_blocks, 16);
}

// Running sequences under pressure preempt each other rather than take
// quarantined blocks, and all finish once the quarantine ends.
TEST(ReservationQuarantineTest, PreemptionNeverTakesQuarantinedBlocks) {
  FakeClock clock;
  SchedulerConfig cfg = SmallConfig(64, 8);
  Scheduler s(cfg, SmallKv(/*device=*/16, /*host=*/8), clock);
  FakeEngine engine(&s);
  auto r = engine.Reserve(Request(9, MakeTokens(24, 9), 4), 1000);  // 6 blocks
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(s.Cancel(9).ok());
  ASSERT_EQ(s.Counters().num_quarantined_blocks, 6);
  const std::set<BlockId> quarantined(r->block_table.begin(), r->block_table.end());
  for (RequestId id = 1; id <= 3; ++id) ASSERT_TRUE(s.AddRequest(Request(id, MakeTokens(8, id), 12)).ok());
  for (int i = 0; i < 30; ++i) {
    SchedulerOutput out;
    ASSERT_TRUE(engine.Step(&out).ok());
    for (BlockId b : engine.scheduled_blocks()) EXPECT_EQ(quarantined.count(b), 0u) << "block " << b;
    for (const auto& copy : out.copies) {
      if (copy.dst_tier == KvTier::kDevice) {
        EXPECT_EQ(quarantined.count(copy.dst_block), 0u) << "copy into " << copy.dst_block;
      }
    }
    ExpectBlocksAddUp(s);
    clock.AdvanceMs(10);
  }
  EXPECT_GT(s.Counters().preemptions, 0);
  clock.AdvanceMs(3000);
  ASSERT_TRUE(engine.Step().ok());
  for (int i = 0; i < 200 && s.Counters().finished < 3; ++i) ASSERT_TRUE(engine.Step().ok());
  auto c = s.Counters();
  EXPECT_EQ(c.finished, 3);
  EXPECT_EQ(c.num_quarantined_blocks, 0);
  EXPECT_EQ(c.kv.device.referenced_blocks, 0);
}

}  // namespace
}  // namespace tandem::scheduler
