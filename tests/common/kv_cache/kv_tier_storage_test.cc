#include "common/kv_cache/kv_tier_storage.h"

#include <cstring>

#include <gtest/gtest.h>

namespace tandem::kv_cache {
namespace {

KvLayout Layout() {
  KvLayout l;
  l.num_layers = 3;
  l.num_kv_heads = 2;
  l.head_dim = 4;
  l.block_size = 4;
  l.dtype = DType::kF32;
  return l;
}

// Fills every float of a tier with a value that names (tier, layer, block, offset).
void Fill(CpuKvTierStorage* s, KvTier tier) {
  const KvLayout& l = s->layout(tier);
  float* p = reinterpret_cast<float*>(s->data(tier));
  for (size_t i = 0; i < l.TotalBytes() / 4; ++i) p[i] = static_cast<float>(i) + 100000.0f * static_cast<int>(tier);
}

float At(const CpuKvTierStorage& s, KvTier tier, int layer, int block, int kv, int head, int slot, int d) {
  const float* p = reinterpret_cast<const float*>(s.data(tier));
  return p[s.layout(tier).ElementOffset(layer, block, kv, head, slot) + d];
}

TEST(CpuKvTierStorageTest, CopiesEveryLayerOfABlockBetweenTiers) {
  auto st = CpuKvTierStorage::Create(Layout(), 5, 3);
  ASSERT_TRUE(st.ok());
  auto& s = **st;
  EXPECT_EQ(s.layout(KvTier::kDevice).num_blocks, 5);
  EXPECT_EQ(s.layout(KvTier::kHost).num_blocks, 3);
  Fill(&s, KvTier::kDevice);
  Fill(&s, KvTier::kHost);
  std::vector<float> expect;
  for (int layer = 0; layer < 3; ++layer)
    for (int kv = 0; kv < 2; ++kv)
      for (int head = 0; head < 2; ++head)
        for (int slot = 0; slot < 4; ++slot)
          for (int d = 0; d < 4; ++d) expect.push_back(At(s, KvTier::kDevice, layer, 4, kv, head, slot, d));
  float untouched = At(s, KvTier::kHost, 1, 0, 1, 1, 3, 3);
  std::vector<BlockCopy> copies = {{KvTier::kDevice, 4, KvTier::kHost, 1}};
  ASSERT_TRUE(s.ExecuteCopies(copies).ok());
  size_t i = 0;
  for (int layer = 0; layer < 3; ++layer)
    for (int kv = 0; kv < 2; ++kv)
      for (int head = 0; head < 2; ++head)
        for (int slot = 0; slot < 4; ++slot)
          for (int d = 0; d < 4; ++d) ASSERT_EQ(At(s, KvTier::kHost, layer, 1, kv, head, slot, d), expect[i++]);
  EXPECT_EQ(At(s, KvTier::kHost, 1, 0, 1, 1, 3, 3), untouched);
}

TEST(CpuKvTierStorageTest, CopiesRunInListOrder) {
  auto st = CpuKvTierStorage::Create(Layout(), 2, 2);
  ASSERT_TRUE(st.ok());
  auto& s = **st;
  Fill(&s, KvTier::kDevice);
  Fill(&s, KvTier::kHost);
  float d0 = At(s, KvTier::kDevice, 2, 0, 0, 0, 0, 0);
  float h1 = At(s, KvTier::kHost, 2, 1, 0, 0, 0, 0);
  // Demote device 0 to host 0, then reuse device 0 for host 1's content.
  std::vector<BlockCopy> copies = {{KvTier::kDevice, 0, KvTier::kHost, 0}, {KvTier::kHost, 1, KvTier::kDevice, 0}};
  ASSERT_TRUE(s.ExecuteCopies(copies).ok());
  EXPECT_EQ(At(s, KvTier::kHost, 2, 0, 0, 0, 0, 0), d0);
  EXPECT_EQ(At(s, KvTier::kDevice, 2, 0, 0, 0, 0, 0), h1);
}

TEST(CpuKvTierStorageTest, RejectsOutOfRangeBlocksAndBadLayouts) {
  auto st = CpuKvTierStorage::Create(Layout(), 2, 0);
  ASSERT_TRUE(st.ok());
  std::vector<BlockCopy> bad = {{KvTier::kDevice, 0, KvTier::kHost, 0}};
  EXPECT_EQ((*st)->ExecuteCopies(bad).code(), StatusCode::kInvalidArgument);
  bad = {{KvTier::kDevice, 2, KvTier::kDevice, 0}};
  EXPECT_EQ((*st)->ExecuteCopies(bad).code(), StatusCode::kInvalidArgument);
  KvLayout l = Layout();
  l.block_size = 3;
  EXPECT_FALSE(CpuKvTierStorage::Create(l, 1, 1).ok());
  EXPECT_FALSE(CpuKvTierStorage::Create(Layout(), -1, 1).ok());
}

}  // namespace
}  // namespace tandem::kv_cache
