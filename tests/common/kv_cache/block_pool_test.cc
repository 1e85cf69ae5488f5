#include "common/kv_cache/block_pool.h"

#include <gtest/gtest.h>

namespace tandem::kv_cache {
namespace {

BlockHash H(int i) {
  std::vector<TokenId> t = {i, i, i, i};
  return HashBlock(BlockHash{}, "s", "m", t);
}

TEST(BlockPoolTest, AllocatesContiguousRunsAndExtendsAfterHint) {
  BlockPool pool(16);
  std::vector<BlockId> a, b;
  ASSERT_TRUE(pool.AllocateFree(3, kInvalidBlock, &a));
  EXPECT_EQ(a, (std::vector<BlockId>{0, 1, 2}));
  ASSERT_TRUE(pool.AllocateFree(2, kInvalidBlock, &b));
  EXPECT_EQ(b, (std::vector<BlockId>{3, 4}));
  // 'a' grows: 3 is taken, so its next block is the first run that fits.
  ASSERT_TRUE(pool.AllocateFree(2, a.back(), &a));
  EXPECT_EQ(a, (std::vector<BlockId>{0, 1, 2, 5, 6}));
  ASSERT_TRUE(pool.AllocateFree(1, a.back(), &a));  // extends the run after 6
  EXPECT_EQ(a.back(), 7);
  EXPECT_EQ(pool.NumFree(), 8);
  EXPECT_TRUE(pool.CheckConsistency().ok());
}

TEST(BlockPoolTest, PrefersOneRunOverFragments) {
  BlockPool pool(12);
  std::vector<BlockId> all;
  ASSERT_TRUE(pool.AllocateFree(12, kInvalidBlock, &all));
  for (BlockId b : {1, 3, 4, 8, 9, 10}) pool.Unref(b);  // free runs: [1], [3,4], [8,9,10]
  std::vector<BlockId> got;
  ASSERT_TRUE(pool.AllocateFree(3, kInvalidBlock, &got));
  EXPECT_EQ(got, (std::vector<BlockId>{8, 9, 10}));
  got.clear();
  ASSERT_TRUE(pool.AllocateFree(3, kInvalidBlock, &got));  // no run of 3: ascending
  EXPECT_EQ(got, (std::vector<BlockId>{1, 3, 4}));
  EXPECT_FALSE(pool.AllocateFree(1, kInvalidBlock, &got));
  EXPECT_EQ(got.size(), 3u);
}

TEST(BlockPoolTest, FailedAllocationChangesNothing) {
  BlockPool pool(4);
  std::vector<BlockId> got;
  EXPECT_FALSE(pool.AllocateFree(5, kInvalidBlock, &got));
  EXPECT_TRUE(got.empty());
  EXPECT_EQ(pool.NumFree(), 4);
}

TEST(BlockPoolTest, HashedBlocksAreCachedInLruOrderAndReusable) {
  BlockPool pool(4);
  std::vector<BlockId> t;
  ASSERT_TRUE(pool.AllocateFree(3, kInvalidBlock, &t));
  ASSERT_TRUE(pool.SetHash(t[0], H(0)));
  ASSERT_TRUE(pool.SetHash(t[1], H(1)));
  EXPECT_FALSE(pool.SetHash(t[2], H(1)));  // another block holds this content
  EXPECT_FALSE(pool.SetHash(t[0], H(5)));  // already hashed
  pool.Unref(t[1]);
  pool.Unref(t[0]);
  pool.Unref(t[2]);
  EXPECT_EQ(pool.NumCached(), 2);
  EXPECT_EQ(pool.NumFree(), 2);
  EXPECT_EQ(pool.NumReferenced(), 0);
  // A hit takes a cached block out of the LRU.
  ASSERT_EQ(pool.Lookup(H(1)), t[1]);
  pool.Ref(t[1]);
  EXPECT_EQ(pool.NumCached(), 1);
  pool.Unref(t[1]);  // back at the most recent end: t[0] is now the oldest
  auto evicted = pool.EvictLru();
  ASSERT_TRUE(evicted.has_value());
  EXPECT_EQ(evicted->first, t[0]);
  EXPECT_EQ(evicted->second, H(0));
  EXPECT_FALSE(pool.Lookup(H(0)).has_value());
  EXPECT_EQ(pool.EvictLru()->first, t[1]);
  EXPECT_FALSE(pool.EvictLru().has_value());
  EXPECT_EQ(pool.NumFree(), 4);
  EXPECT_TRUE(pool.CheckConsistency().ok());
}

TEST(BlockPoolTest, SharedBlockNeedsEveryReferenceDropped) {
  BlockPool pool(2);
  std::vector<BlockId> t;
  ASSERT_TRUE(pool.AllocateFree(1, kInvalidBlock, &t));
  ASSERT_TRUE(pool.SetHash(t[0], H(0)));
  pool.Ref(t[0]);
  EXPECT_EQ(pool.RefCount(t[0]), 2);
  pool.Unref(t[0]);
  EXPECT_EQ(pool.NumReferenced(), 1);
  pool.Unref(t[0]);
  EXPECT_EQ(pool.NumCached(), 1);
}

TEST(BlockPoolDeathTest, DoubleFreeAborts) {
  BlockPool pool(2);
  std::vector<BlockId> t;
  ASSERT_TRUE(pool.AllocateFree(1, kInvalidBlock, &t));
  pool.Unref(t[0]);
  EXPECT_DEATH(pool.Unref(t[0]), "double free");
  EXPECT_DEATH(pool.Ref(t[0]), "Ref of free block");
}

}  // namespace
}  // namespace tandem::kv_cache
