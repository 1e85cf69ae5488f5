#include "common/kv_cache/kv_cache_manager.h"

#include <gtest/gtest.h>

namespace tandem::kv_cache {
namespace {

KvCacheConfig Config(int device, int host) {
  KvCacheConfig c;
  c.block_size = 4;
  c.num_device_blocks = device;
  c.num_host_blocks = host;
  c.model_id = "m";
  return c;
}

std::vector<BlockHash> Hashes(int n, const char* salt = "s") {
  std::vector<TokenId> tokens;
  for (int i = 0; i < 4 * n; ++i) tokens.push_back(i * 7 + 1);
  std::vector<BlockHash> h;
  ExtendBlockHashes(salt, "m", 4, tokens, &h);
  return h;
}

TEST(KvCacheConfigTest, Validate) {
  EXPECT_TRUE(Config(4, 0).Validate().ok());
  EXPECT_FALSE(Config(0, 0).Validate().ok());
  EXPECT_FALSE(Config(4, -1).Validate().ok());
  auto c = Config(4, 0);
  c.block_size = 6;
  EXPECT_FALSE(c.Validate().ok());
}

TEST(KvCacheManagerTest, CachedPrefixIsSharedBetweenTables) {
  KvCacheManager kv(Config(8, 0));
  auto h = Hashes(3);
  std::vector<BlockId> a;
  ASSERT_TRUE(kv.AllocateSlots(14, &a));  // 4 blocks
  EXPECT_EQ(a, (std::vector<BlockId>{0, 1, 2, 3}));
  kv.CacheBlocks(h, a, 0);
  EXPECT_EQ(kv.MatchPrefix(h), 3);
  EXPECT_EQ(kv.MatchPrefix(Hashes(3, "other")), 0);
  std::vector<BlockId> b;
  EXPECT_EQ(kv.AcquirePrefix(h, 2, &b), 2);  // capped by max_blocks
  EXPECT_EQ(b, (std::vector<BlockId>{0, 1}));
  EXPECT_EQ(kv.pool(KvTier::kDevice).RefCount(0), 2);
  kv.Release(KvTier::kDevice, &a);
  EXPECT_TRUE(a.empty());
  auto c = kv.Counters();
  EXPECT_EQ(c.device.referenced_blocks, 2);
  EXPECT_EQ(c.device.cached_blocks, 1);  // block 2 (hashed, unreferenced)
  EXPECT_EQ(c.device.free_blocks, 5);
  kv.Release(KvTier::kDevice, &b);
  EXPECT_EQ(kv.Counters().device.cached_blocks, 3);
  EXPECT_TRUE(kv.TakeCopies().empty());
}

TEST(KvCacheManagerTest, EvictionDemotesToHostAndHitPromotesBack) {
  KvCacheManager kv(Config(4, 4));
  auto h = Hashes(2);
  std::vector<BlockId> a;
  ASSERT_TRUE(kv.AllocateSlots(8, &a));
  kv.CacheBlocks(h, a, 0);
  kv.Release(KvTier::kDevice, &a);  // blocks 0,1 cached on device
  std::vector<BlockId> b;
  ASSERT_TRUE(kv.AllocateSlots(16, &b));  // all 4 device blocks: evicts 0 and 1
  auto copies = kv.TakeCopies();
  ASSERT_EQ(copies.size(), 2u);
  EXPECT_EQ(copies[0].src_tier, KvTier::kDevice);
  EXPECT_EQ(copies[0].dst_tier, KvTier::kHost);
  EXPECT_EQ(copies[0].src_block, 0);
  EXPECT_EQ(copies[1].src_block, 1);
  EXPECT_EQ(kv.Counters().demoted_blocks, 2);
  EXPECT_EQ(kv.Counters().host.cached_blocks, 2);
  EXPECT_EQ(kv.MatchPrefix(h), 2);  // found in the host tier
  kv.Release(KvTier::kDevice, &b);
  std::vector<BlockId> c;
  EXPECT_EQ(kv.AcquirePrefix(h, 2, &c), 2);
  copies = kv.TakeCopies();
  ASSERT_EQ(copies.size(), 2u);
  EXPECT_EQ(copies[0], (BlockCopy{KvTier::kHost, copies[0].src_block, KvTier::kDevice, c[0]}));
  EXPECT_EQ(copies[1].dst_block, c[1]);
  EXPECT_EQ(kv.Counters().promoted_blocks, 2);
  // Promoted blocks are content-addressed on the device again.
  EXPECT_EQ(kv.pool(KvTier::kDevice).Lookup(h[0]), c[0]);
}

TEST(KvCacheManagerTest, WithoutHostTierEvictionDrops) {
  KvCacheManager kv(Config(2, 0));
  auto h = Hashes(2);
  std::vector<BlockId> a;
  ASSERT_TRUE(kv.AllocateSlots(8, &a));
  kv.CacheBlocks(h, a, 0);
  kv.Release(KvTier::kDevice, &a);
  ASSERT_TRUE(kv.AllocateSlots(5, &a));
  EXPECT_TRUE(kv.TakeCopies().empty());
  EXPECT_EQ(kv.Counters().dropped_blocks, 2);
  EXPECT_EQ(kv.MatchPrefix(h), 0);
}

TEST(KvCacheManagerTest, AllocationFailureChangesNothing) {
  KvCacheManager kv(Config(4, 0));
  std::vector<BlockId> a, b;
  ASSERT_TRUE(kv.AllocateSlots(12, &a));
  EXPECT_FALSE(kv.AllocateSlots(8, &b));
  EXPECT_TRUE(b.empty());
  EXPECT_TRUE(kv.AllocateSlots(12, &a));  // already covered
  EXPECT_EQ(a.size(), 3u);
  EXPECT_EQ(kv.Counters().device.free_blocks, 1);
}

TEST(KvCacheManagerTest, SwapOutAndInMoveTheTable) {
  KvCacheManager kv(Config(4, 3));
  std::vector<BlockId> a;
  ASSERT_TRUE(kv.AllocateSlots(12, &a));
  std::vector<BlockId> too_big;
  ASSERT_TRUE(kv.AllocateSlots(4, &too_big));
  std::vector<BlockId> device_before = a;
  ASSERT_TRUE(kv.SwapOut(&a));
  auto copies = kv.TakeCopies();
  ASSERT_EQ(copies.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(copies[i], (BlockCopy{KvTier::kDevice, device_before[i], KvTier::kHost, a[i]}));
  }
  auto c = kv.Counters();
  EXPECT_EQ(c.device.referenced_blocks, 1);
  EXPECT_EQ(c.host.referenced_blocks, 3);
  EXPECT_EQ(c.swapped_out_blocks, 3);
  EXPECT_FALSE(kv.SwapOut(&too_big));  // host full
  std::vector<BlockId> host_before = a;
  ASSERT_TRUE(kv.SwapIn(&a));
  copies = kv.TakeCopies();
  ASSERT_EQ(copies.size(), 3u);
  EXPECT_EQ(copies[2], (BlockCopy{KvTier::kHost, host_before[2], KvTier::kDevice, a[2]}));
  c = kv.Counters();
  EXPECT_EQ(c.device.referenced_blocks, 4);
  EXPECT_EQ(c.host.referenced_blocks, 0);
  EXPECT_EQ(c.swapped_in_blocks, 3);
}

}  // namespace
}  // namespace tandem::kv_cache
