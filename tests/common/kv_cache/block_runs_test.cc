#include "common/kv_cache/block_runs.h"

#include <gtest/gtest.h>

#include "common/kv_cache/kv_cache_manager.h"

namespace tandem::kv_cache {
namespace {

TEST(BlockRunsTest, SplitsIntoMaximalRuns) {
  std::vector<BlockId> table = {4, 5, 6, 9, 2, 3, 10};
  std::vector<BlockRun> expect = {{0, 4, 3}, {3, 9, 1}, {4, 2, 2}, {6, 10, 1}};
  EXPECT_EQ(BlockRuns(table), expect);
  EXPECT_TRUE(BlockRuns({}).empty());
}

TEST(BlockRunsTest, FreshRequestsGetOneRunEach) {
  KvCacheConfig c;
  c.block_size = 16;
  c.num_device_blocks = 64;
  c.model_id = "m";
  KvCacheManager kv(c);
  std::vector<BlockId> a, b;
  ASSERT_TRUE(kv.AllocateSlots(100, &a));  // 7 blocks
  ASSERT_TRUE(kv.AllocateSlots(300, &b));  // 19 blocks
  EXPECT_EQ(BlockRuns(a).size(), 1u);
  EXPECT_EQ(BlockRuns(b).size(), 1u);
  // Growing 'a' past b's run starts a second run, then keeps extending it.
  ASSERT_TRUE(kv.AllocateSlots(16 * 9, &a));
  ASSERT_TRUE(kv.AllocateSlots(16 * 12, &a));
  EXPECT_EQ(BlockRuns(a).size(), 2u);
  EXPECT_EQ(BlockRuns(a)[1].num_blocks, 5);
}

TEST(BlockRunsTest, PairedRunsBreakWhereEitherSideJumps) {
  const std::vector<BlockId> src = {4, 5, 6, 7, 9, 10};
  const std::vector<BlockId> dst = {0, 1, 5, 6, 7, 8};
  const std::vector<BlockRunPair> expect = {{0, 4, 0, 2}, {2, 6, 5, 2}, {4, 9, 7, 2}};
  EXPECT_EQ(PairedBlockRuns(src, dst), expect);
  EXPECT_TRUE(PairedBlockRuns({}, {}).empty());
  const std::vector<BlockId> one = {3};
  EXPECT_EQ(PairedBlockRuns(one, one), (std::vector<BlockRunPair>{{0, 3, 3, 1}}));
}

}  // namespace
}  // namespace tandem::kv_cache
