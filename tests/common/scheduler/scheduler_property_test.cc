// Property test: 10^6 random operations on the scheduler and its two-tier KV
// cache (add, step = allocate/share/prefix-hit/evict/demote/promote/preempt/
// resume/free, reserve, land, lease expiry with quarantine, cancel, held KV and
// its release, bad appends), with invariants checked after every one against an
// independent oracle: the reference counts implied by the block tables of all
// live sequences, the held KV and the quarantine.
// The FakeEngine also checks the content of every cached KV position it reads.
#include <map>
#include <random>
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

class Harness {
 public:
  Harness(SchedulerConfig cfg, kv_cache::KvCacheConfig kv, uint64_t seed)
      : sched_(cfg, kv, clock_), engine_(&sched_), rng_(seed) {
    for (int i = 0; i < 6; ++i) prefixes_.push_back(MakeTokens(4 * i + (i % 2), 1000 + i));
  }

  // One random operation; returns a description for failure messages.
  const char* Op() {
    int r = Uniform(0, 99);
    if (r < 32) return Step();
    if (r < 50) return Add();
    if (r < 52) return ReleaseOne();
    if (r < 59) return CancelOne();
    if (r < 67) return ReserveOne();
    if (r < 77) return LandOne();
    if (r < 85) {
      clock_.AdvanceMs(Uniform(1, 8));
      return "advance clock";
    }
    return BadAppend();
  }

  // The invariants; a failure names the first broken one.
  ::testing::AssertionResult Check() {
    const auto& kv = sched_.kv();
    for (KvTier tier : {KvTier::kDevice, KvTier::kHost}) {
      Status st = kv.pool(tier).CheckConsistency();
      if (!st.ok()) return ::testing::AssertionFailure() << st.ToString();
    }
    // Oracle: every reference is held by exactly one block table entry.
    std::map<BlockId, int> refs[2];
    int live_seqs = 0;
    int64_t num_held = 0;
    auto add_held = [&](RequestId id) {
      const std::vector<BlockId>* held = sched_.HeldBlocks(id);
      if (held == nullptr) return;
      ++num_held;
      for (BlockId b : *held) ++refs[0][b];
    };
    for (RequestId id : held_) {
      if (sched_.HeldBlocks(id) == nullptr) return ::testing::AssertionFailure() << "held " << id << " lost";
      add_held(id);
    }
    for (BlockId b : kv.QuarantinedBlocks()) ++refs[0][b];
    for (RequestId id : live_) {
      const Sequence* seq = sched_.Find(id);
      if (seq == nullptr) {  // ended; reported at the next step
        add_held(id);
        continue;
      }
      ++live_seqs;
      KvTier tier = seq->state == SequenceState::kSwapped ? KvTier::kHost : KvTier::kDevice;
      if (seq->state == SequenceState::kWaiting && !seq->block_table.empty()) {
        return ::testing::AssertionFailure() << "waiting request " << id << " holds blocks";
      }
      if (seq->state == SequenceState::kRunning &&
          static_cast<int>(seq->block_table.size()) * block_size() < seq->num_computed_tokens) {
        return ::testing::AssertionFailure() << "request " << id << " table too short";
      }
      for (BlockId b : seq->block_table) ++refs[static_cast<int>(tier)][b];
    }
    auto c = sched_.Counters();
    if (c.num_held != num_held) {
      return ::testing::AssertionFailure() << c.num_held << " held, the oracle finds " << num_held;
    }
    if (c.num_running + c.reservations_active > sched_.config().max_num_seqs) {
      return ::testing::AssertionFailure() << "more running + reserved than max_num_seqs";
    }
    if (c.num_running + c.num_waiting + c.num_swapped + c.reservations_active != live_seqs) {
      return ::testing::AssertionFailure() << "scheduler holds sequences nobody owns";
    }
    const kv_cache::KvTierCounters* tc[2] = {&c.kv.device, &c.kv.host};
    for (int t = 0; t < 2; ++t) {
      const auto& pool = kv.pool(static_cast<KvTier>(t));
      if (tc[t]->free_blocks + tc[t]->referenced_blocks + tc[t]->cached_blocks + tc[t]->quarantined_blocks !=
          tc[t]->total_blocks) {
        return ::testing::AssertionFailure() << "free + referenced + cached + quarantined != total in tier " << t;
      }
      if (static_cast<int64_t>(refs[t].size()) != tc[t]->referenced_blocks + tc[t]->quarantined_blocks) {
        return ::testing::AssertionFailure() << "tier " << t << ": " << refs[t].size() << " blocks in tables vs "
                                             << tc[t]->referenced_blocks << " referenced";
      }
      for (BlockId b = 0; b < pool.num_blocks(); ++b) {
        auto it = refs[t].find(b);
        int expect = it == refs[t].end() ? 0 : it->second;
        if (pool.RefCount(b) != expect) {
          return ::testing::AssertionFailure()
                 << "tier " << t << " block " << b << " refcount " << pool.RefCount(b) << ", tables hold " << expect;
        }
        if (expect > 1 && !pool.HasHash(b)) {
          return ::testing::AssertionFailure() << "unhashed block " << b << " shared";
        }
      }
    }
    return ::testing::AssertionSuccess();
  }

  // Cancels everything, waits out the quarantine, steps once, and expects no
  // block still referenced.
  void Drain() {
    for (RequestId id : std::set<RequestId>(live_)) {
      if (sched_.Find(id) != nullptr || sched_.HeldBlocks(id) != nullptr) {
        ASSERT_TRUE(sched_.Cancel(id).ok());
      }
    }
    for (RequestId id : held_) ASSERT_TRUE(sched_.ReleaseHeld(id).ok());
    live_.clear();
    held_.clear();
    clock_.AdvanceMs(sched_.config().reservation_quarantine_ms);
    ASSERT_TRUE(engine_.Step().ok());
    auto c = sched_.Counters();
    EXPECT_EQ(c.num_held, 0);
    EXPECT_EQ(c.num_quarantined_blocks, 0);
    EXPECT_EQ(c.kv.device.referenced_blocks, 0);
    EXPECT_EQ(c.kv.host.referenced_blocks, 0);
    EXPECT_EQ(c.reservations_active, 0);
    EXPECT_EQ(c.num_running + c.num_waiting + c.num_swapped, 0);
  }

  SchedulerCounters Counters() const { return sched_.Counters(); }
  uint64_t verified_positions() const { return engine_.num_verified_positions(); }
  int64_t releases() const { return releases_; }

 private:
  int Uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  int block_size() const { return sched_.kv().config().block_size; }

  RequestId PickLive() {
    if (live_.empty()) return 999'999'999;
    auto it = live_.begin();
    std::advance(it, Uniform(0, static_cast<int>(live_.size()) - 1));
    return *it;
  }

  SequenceParams RandomRequest() {
    SequenceParams p;
    p.id = next_id_++;
    p.tenant_salt = Uniform(0, 3) == 0 ? "tenant-b" : "tenant-a";
    p.prompt_tokens = prefixes_[Uniform(0, static_cast<int>(prefixes_.size()) - 1)];
    auto tail = MakeTokens(Uniform(p.prompt_tokens.empty() ? 1 : 0, 20), Uniform(0, 40));
    p.prompt_tokens.insert(p.prompt_tokens.end(), tail.begin(), tail.end());
    p.max_tokens = Uniform(1, 24);
    p.priority = Uniform(0, 1) ? Priority::kBatch : Priority::kInteractive;
    if (Uniform(0, 9) == 0) p.stop_token_ids = {Uniform(0, testing::kFakeVocab - 1)};
    p.hold_kv_after_finish = Uniform(0, 4) == 0;
    return p;
  }

  const char* Step() {
    SchedulerOutput out;
    Status st = engine_.Step(&out);
    EXPECT_TRUE(st.ok()) << st.ToString();
    for (const auto& f : out.finished) {
      live_.erase(f.id);
      if (sched_.HeldBlocks(f.id) != nullptr) held_.insert(f.id);
    }
    const auto& cfg = sched_.config();
    EXPECT_LE(static_cast<int>(out.scheduled.size()), cfg.max_num_seqs);
    EXPECT_LE(out.num_batched_tokens, cfg.max_num_batched_tokens);
    return "step";
  }

  const char* Add() {
    SequenceParams p = RandomRequest();
    RequestId id = p.id;
    if (sched_.AddRequest(std::move(p)).ok()) live_.insert(id);
    return "add";
  }

  const char* CancelOne() {
    RequestId id = PickLive();
    Status st = sched_.Cancel(id);
    EXPECT_EQ(st.ok(), sched_.Find(id) == nullptr && live_.count(id) && st.ok());
    live_.erase(id);
    return "cancel";
  }

  // Lets go of one held KV, by ReleaseHeld or by Cancel.
  const char* ReleaseOne() {
    if (held_.empty()) return "release (none)";
    auto it = held_.begin();
    std::advance(it, Uniform(0, static_cast<int>(held_.size()) - 1));
    Status st = Uniform(0, 1) ? sched_.ReleaseHeld(*it) : sched_.Cancel(*it);
    EXPECT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(sched_.HeldBlocks(*it), nullptr);
    held_.erase(it);
    ++releases_;
    return "release held";
  }

  const char* ReserveOne() {
    SequenceParams p = RandomRequest();
    RequestId id = p.id;
    auto r = engine_.Reserve(std::move(p), Uniform(1, 30));
    if (r.ok()) {
      live_.insert(id);
      reservations_[id] = *r;
    }
    return "reserve";
  }

  const char* LandOne() {
    if (reservations_.empty()) return "land (none)";
    auto it = reservations_.begin();
    std::advance(it, Uniform(0, static_cast<int>(reservations_.size()) - 1));
    const Sequence* seq = sched_.Find(it->first);
    if (seq != nullptr && seq->state == SequenceState::kReserved) {
      Status st = engine_.LandReservation(it->first, it->second);
      EXPECT_TRUE(st.ok()) << st.ToString();
    }
    reservations_.erase(it);
    return "land";
  }

  const char* BadAppend() {
    // Between steps no sequence has logits pending: AppendToken must refuse and change nothing.
    RequestId id = PickLive();
    auto r = sched_.AppendToken(id, 1);
    EXPECT_FALSE(r.ok());
    return "bad append";
  }

  FakeClock clock_;
  Scheduler sched_;
  FakeEngine engine_;
  std::mt19937_64 rng_;
  std::vector<std::vector<TokenId>> prefixes_;
  std::set<RequestId> live_;
  std::set<RequestId> held_;  // finished, KV still held
  int64_t releases_ = 0;      // held KV let go by ReleaseOne
  std::map<RequestId, Reservation> reservations_;
  RequestId next_id_ = 1;
};

SchedulerConfig PropertyConfig(PreemptionMode mode) {
  SchedulerConfig c;
  c.max_num_batched_tokens = 32;
  c.max_num_seqs = 8;
  c.max_prefill_chunk_tokens = 12;
  c.max_model_len = 96;
  c.max_waiting_requests = 24;
  c.reservation_quarantine_ms = 20;
  c.preemption_mode = mode;
  return c;
}

void RunOps(Harness* h, int num_ops) {
  for (int i = 0; i < num_ops; ++i) {
    const char* op = h->Op();
    ASSERT_TRUE(h->Check()) << "after operation " << i << " (" << op << ")";
    if (::testing::Test::HasFailure()) FAIL() << "after operation " << i << " (" << op << ")";
  }
  h->Drain();
}

TEST(SchedulerPropertyTest, SwapWithHostTier500kOps) {
  Harness h(PropertyConfig(PreemptionMode::kSwap), testing::SmallKv(48, 32), 1);
  RunOps(&h, 500'000);
  auto c = h.Counters();
  // Every kind of operation happened.
  EXPECT_GT(c.prefix_hit_tokens, 0);
  EXPECT_GT(c.kv.demoted_blocks, 0);
  EXPECT_GT(c.kv.promoted_blocks, 0);
  EXPECT_GT(c.swaps_out, 0);
  EXPECT_GT(c.swaps_in, 0);
  EXPECT_GT(c.lease_expiries, 0);
  EXPECT_GT(c.reservations_total, c.lease_expiries);
  EXPECT_GT(c.cancelled, 0);
  EXPECT_GT(c.finished, 0);
  EXPECT_GT(c.rejected, 0);
  EXPECT_GT(h.verified_positions(), 0u);
  EXPECT_GT(h.releases(), 0);
}

TEST(SchedulerPropertyTest, Recompute250kOps) {
  Harness h(PropertyConfig(PreemptionMode::kRecompute), testing::SmallKv(40, 24), 2);
  RunOps(&h, 250'000);
  auto c = h.Counters();
  EXPECT_GT(c.preemptions_recompute, 0);
  EXPECT_EQ(c.preemptions_swap, 0);
  EXPECT_GT(c.kv.promoted_blocks, 0);
}

TEST(SchedulerPropertyTest, SwapWithoutHostTierFallsBack250kOps) {
  Harness h(PropertyConfig(PreemptionMode::kSwap), testing::SmallKv(40, 0), 3);
  RunOps(&h, 250'000);
  auto c = h.Counters();
  EXPECT_GT(c.preemptions_recompute, 0);
  EXPECT_EQ(c.swaps_out, 0);
  EXPECT_GT(c.kv.dropped_blocks, 0);
}

}  // namespace
}  // namespace tandem::scheduler
