// Cache events of KvCacheManager (through CacheEventLog and CacheReportBuffer),
// checked against the manager's own lookups: a reader that applies every
// drained report must hold exactly the hashes MatchPrefix finds.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "common/kv_cache/cache_event_log.h"
#include "common/kv_cache/cache_report_buffer.h"
#include "common/kv_cache/kv_cache_manager.h"

namespace tandem::kv_cache {
namespace {

using HashSet = std::set<std::string>;  // hex, for readable failures

KvCacheConfig Config(int device, int host, CacheEventLog* log) {
  KvCacheConfig c;
  c.block_size = 4;
  c.num_device_blocks = device;
  c.num_host_blocks = host;
  c.model_id = "m";
  c.event_log = log;
  return c;
}

std::vector<BlockHash> Hashes(int n, const std::string& salt) {
  std::vector<TokenId> tokens;
  for (int i = 0; i < 4 * n; ++i) tokens.push_back(i * 7 + 1);
  std::vector<BlockHash> h;
  ExtendBlockHashes(salt, "m", 4, tokens, &h);
  return h;
}

HashSet Hex(const std::vector<BlockHash>& hashes) {
  HashSet out;
  for (const BlockHash& h : hashes) out.insert(h.ToHex());
  return out;
}

// The oracle: which of `universe` the manager can match right now (one-hash prefixes).
HashSet Present(const KvCacheManager& kv, const std::vector<BlockHash>& universe) {
  HashSet out;
  for (const BlockHash& h : universe) {
    if (kv.MatchPrefix(std::span<const BlockHash>(&h, 1)) == 1) out.insert(h.ToHex());
  }
  return out;
}

// A reader (the router's view): reset replaces, deltas apply.
void Apply(const CacheEvents& events, HashSet* view) {
  if (events.reset) view->clear();
  for (const BlockHash& h : events.removed) view->erase(h.ToHex());
  for (const BlockHash& h : events.stored) view->insert(h.ToHex());
}

TEST(CacheEventLogTest, StoredWhenCachedRemovedWhenDropped) {
  CacheEventLog log;
  KvCacheManager kv(Config(3, 0, &log));
  auto h = Hashes(2, "a");
  std::vector<BlockId> a;
  ASSERT_TRUE(kv.AllocateSlots(8, &a));
  EXPECT_TRUE(DrainCacheEvents(log, kv).empty());  // allocation alone stores nothing
  kv.CacheBlocks(h, a, 0);
  CacheEvents e = DrainCacheEvents(log, kv);
  EXPECT_FALSE(e.reset);
  EXPECT_EQ(Hex(e.stored), Hex(h));
  EXPECT_TRUE(e.removed.empty());
  kv.Release(KvTier::kDevice, &a);  // referenced -> cached: still present, no event
  EXPECT_TRUE(DrainCacheEvents(log, kv).empty());
  // Needs all 3 blocks: the two cached ones are evicted (no host tier: dropped).
  ASSERT_TRUE(kv.AllocateSlots(12, &a));
  e = DrainCacheEvents(log, kv);
  EXPECT_TRUE(e.stored.empty());
  EXPECT_EQ(Hex(e.removed), Hex(h));
  EXPECT_TRUE(Present(kv, h).empty());
}

TEST(CacheEventLogTest, TierMovesRecordNothingAndLastTierDropRemoves) {
  CacheEventLog log;
  KvCacheManager kv(Config(2, 2, &log));
  auto h = Hashes(2, "a");
  std::vector<BlockId> a, b;
  ASSERT_TRUE(kv.AllocateSlots(8, &a));
  kv.CacheBlocks(h, a, 0);
  kv.Release(KvTier::kDevice, &a);
  EXPECT_EQ(Hex(DrainCacheEvents(log, kv).stored), Hex(h));
  ASSERT_TRUE(kv.AllocateSlots(8, &b));  // demotes both to host: still present
  EXPECT_EQ(kv.Counters().demoted_blocks, 2);
  EXPECT_TRUE(DrainCacheEvents(log, kv).empty());
  kv.Release(KvTier::kDevice, &b);
  ASSERT_EQ(kv.AcquirePrefix(h, 2, &a), 2);  // promoted: on both tiers, still one event-free hash
  EXPECT_TRUE(DrainCacheEvents(log, kv).empty());
  EXPECT_EQ(Hex(kv.CachedHashes()), Hex(h));
  EXPECT_EQ(kv.CachedHashes().size(), 2u);  // each hash once
  // Fill the host tier with other content: the host copies of h are dropped,
  // but the device still holds h (referenced by `a`), so nothing is removed.
  auto other = Hashes(2, "b");
  std::vector<BlockId> c;
  kv.Release(KvTier::kDevice, &a);
  ASSERT_TRUE(kv.AllocateSlots(8, &c));  // evicts h from device -> already on host: no demote copy
  EXPECT_TRUE(DrainCacheEvents(log, kv).empty());
  kv.CacheBlocks(other, c, 0);
  kv.Release(KvTier::kDevice, &c);
  EXPECT_EQ(Hex(DrainCacheEvents(log, kv).stored), Hex(other));
  ASSERT_TRUE(kv.AllocateSlots(8, &a));  // demotes `other` to host, which drops h there
  CacheEvents e = DrainCacheEvents(log, kv);
  EXPECT_EQ(Hex(e.removed), Hex(h));
  EXPECT_TRUE(e.stored.empty());
  EXPECT_EQ(Present(kv, h), HashSet());
  EXPECT_EQ(Present(kv, other), Hex(other));
}

TEST(CacheEventLogTest, StoreThenRemoveBetweenDrainsCancels) {
  CacheEventLog log;
  KvCacheManager kv(Config(2, 0, &log));
  auto h = Hashes(2, "a");
  std::vector<BlockId> a;
  ASSERT_TRUE(kv.AllocateSlots(8, &a));
  kv.CacheBlocks(h, a, 0);
  kv.Release(KvTier::kDevice, &a);
  ASSERT_TRUE(kv.AllocateSlots(4, &a));  // drops one of them
  CacheEvents e = DrainCacheEvents(log, kv);
  EXPECT_TRUE(e.removed.empty());
  EXPECT_EQ(Hex(e.stored), Present(kv, h));
  EXPECT_EQ(e.stored.size(), 1u);
}

TEST(CacheEventLogTest, OverflowGivesResetWithTheFullSet) {
  CacheEventLog log(/*max_pending=*/3);
  KvCacheManager kv(Config(16, 8, &log));
  auto h = Hashes(6, "a");
  std::vector<BlockId> a;
  ASSERT_TRUE(kv.AllocateSlots(24, &a));
  kv.CacheBlocks(h, a, 0);
  EXPECT_TRUE(log.reset_needed());
  EXPECT_EQ(log.num_pending(), 0u);  // dropped, not kept
  CacheEvents e = DrainCacheEvents(log, kv);
  EXPECT_TRUE(e.reset);
  EXPECT_TRUE(e.removed.empty());
  EXPECT_EQ(Hex(e.stored), Present(kv, h));
  EXPECT_EQ(Hex(e.stored), Hex(h));
  EXPECT_FALSE(log.reset_needed());
  EXPECT_TRUE(DrainCacheEvents(log, kv).empty());  // back to deltas
}

TEST(CacheReportBufferTest, FullRequestSplitsOverTakesAndKeepsOrder) {
  CacheEventLog log;
  KvCacheManager kv(Config(8, 0, &log));
  CacheReportBuffer buffer;
  auto h = Hashes(5, "a");
  std::vector<BlockId> a;
  ASSERT_TRUE(kv.AllocateSlots(20, &a));
  kv.CacheBlocks(h, a, 0);
  buffer.Publish(log, kv);
  buffer.RequestFull();
  EXPECT_FALSE(buffer.Take(2).has_value());  // not published yet
  buffer.Publish(log, kv);
  HashSet view = {"stale"};
  auto r = buffer.Take(2);
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(r->reset);
  EXPECT_EQ(r->size(), 2u);
  Apply(*r, &view);
  EXPECT_EQ(view.count("stale"), 0u);
  // A removal of a not-yet-sent hash and a new store interleave with the rest.
  kv.Release(KvTier::kDevice, &a);
  ASSERT_TRUE(kv.AllocateSlots(28, &a));  // 7 blocks: 3 free + 4 of the 5 cached ones
  buffer.Publish(log, kv);
  while (auto more = buffer.Take(2)) {
    EXPECT_FALSE(more->reset);
    Apply(*more, &view);
  }
  EXPECT_EQ(view, Present(kv, h));
  EXPECT_EQ(view.size(), 1u);
}

// Random operations on a two-tier manager; after each publish a reader applies
// randomly sized Takes and must end with exactly what MatchPrefix finds.
TEST(CacheReportBufferTest, ReaderMatchesManagerUnderRandomOps) {
  for (size_t log_bound : {size_t{4}, kDefaultMaxPendingCacheEvents}) {
    CacheEventLog log(log_bound);
    KvCacheManager kv(Config(12, 6, &log));
    CacheReportBuffer buffer(/*max_pending=*/8);
    std::mt19937 rng(static_cast<uint32_t>(log_bound));
    std::vector<std::vector<BlockHash>> prompts;
    std::vector<BlockHash> universe;
    for (int p = 0; p < 6; ++p) {
      prompts.push_back(Hashes(1 + p % 4, "t" + std::to_string(p)));
      universe.insert(universe.end(), prompts.back().begin(), prompts.back().end());
    }
    std::vector<std::vector<BlockId>> tables;
    HashSet view;
    bool resets_seen = false;
    for (int op = 0; op < 100000; ++op) {
      const int kind = static_cast<int>(rng() % 6);
      const auto& prompt = prompts[rng() % prompts.size()];
      if (kind <= 1) {  // a sequence: prefix hit, allocate the rest, cache its blocks
        std::vector<BlockId> t;
        kv.AcquirePrefix(prompt, static_cast<int>(prompt.size()), &t);
        if (kv.AllocateSlots(static_cast<int>(prompt.size()) * 4, &t)) {
          kv.CacheBlocks(prompt, t, 0);
          tables.push_back(std::move(t));
        } else {
          kv.Release(KvTier::kDevice, &t);
        }
      } else if (kind == 2 && !tables.empty()) {
        size_t i = rng() % tables.size();
        kv.Release(KvTier::kDevice, &tables[i]);
        tables.erase(tables.begin() + static_cast<std::ptrdiff_t>(i));
      } else if (kind == 3 && !tables.empty()) {  // preemption round trip
        size_t i = rng() % tables.size();
        if (kv.SwapOut(&tables[i]) && !kv.SwapIn(&tables[i])) {
          kv.Release(KvTier::kHost, &tables[i]);
          tables.erase(tables.begin() + static_cast<std::ptrdiff_t>(i));
        }
      } else if (kind == 4) {  // a heartbeat that does not take everything
        if (rng() % 500 == 0) buffer.RequestFull();
        buffer.Publish(log, kv);
        if (auto r = buffer.Take(1 + rng() % 3)) {
          resets_seen |= r->reset;
          Apply(*r, &view);
        }
      } else {  // heartbeats until the buffer is empty: the reader is exact
        kv.TakeCopies();
        buffer.Publish(log, kv);
        while (auto r = buffer.Take(1 + rng() % 3)) {
          resets_seen |= r->reset;
          Apply(*r, &view);
        }
        ASSERT_EQ(view, Present(kv, universe)) << "op " << op << ", log bound " << log_bound;
      }
    }
    buffer.Publish(log, kv);
    while (auto r = buffer.Take(5)) Apply(*r, &view);
    EXPECT_EQ(view, Present(kv, universe)) << "log bound " << log_bound;
    EXPECT_EQ(Hex(kv.CachedHashes()), Present(kv, universe));
    EXPECT_TRUE(resets_seen);
    ASSERT_TRUE(kv.pool(KvTier::kDevice).CheckConsistency().ok());
  }
}

}  // namespace
}  // namespace tandem::kv_cache
