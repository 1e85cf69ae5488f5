#include "common/proto/kv_layout_convert.h"

#include <gtest/gtest.h>

namespace tandem::proto {
namespace {

kv_cache::KvLayout Sample() {
  kv_cache::KvLayout layout;
  layout.num_layers = 28;
  layout.num_kv_heads = 8;
  layout.head_dim = 128;
  layout.block_size = 16;
  layout.num_blocks = 4096;
  layout.dtype = DType::kBF16;
  return layout;
}

TEST(KvLayoutConvertTest, RoundTripsEverythingButNumBlocks) {
  KvLayoutInfo info = ToKvLayoutInfo(Sample());
  EXPECT_EQ(info.layout_version(), kv_cache::kKvLayoutVersion);
  EXPECT_EQ(info.num_layers(), 28);
  EXPECT_EQ(info.dtype(), static_cast<int>(DType::kBF16));
  KvLayoutInfo parsed_info;
  ASSERT_TRUE(parsed_info.ParseFromString(info.SerializeAsString()));
  auto layout = FromKvLayoutInfo(parsed_info);
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  EXPECT_TRUE(layout->Compatible(Sample()));
  EXPECT_EQ(layout->num_blocks, 0);
}

TEST(KvLayoutConvertTest, RefusesBadPeerLayouts) {
  KvLayoutInfo info = ToKvLayoutInfo(Sample());
  info.set_layout_version(kv_cache::kKvLayoutVersion + 1);
  EXPECT_EQ(FromKvLayoutInfo(info).status().code(), StatusCode::kInvalidArgument);
  info = ToKvLayoutInfo(Sample());
  info.set_dtype(99);
  EXPECT_FALSE(FromKvLayoutInfo(info).ok());
  info = ToKvLayoutInfo(Sample());
  info.set_block_size(12);  // not a power of two
  EXPECT_FALSE(FromKvLayoutInfo(info).ok());
  info = ToKvLayoutInfo(Sample());
  info.set_num_layers(0);
  EXPECT_FALSE(FromKvLayoutInfo(info).ok());
  info = ToKvLayoutInfo(Sample());
  info.set_head_dim(1 << 30);
  EXPECT_FALSE(FromKvLayoutInfo(info).ok());
  EXPECT_FALSE(FromKvLayoutInfo(KvLayoutInfo()).ok());  // an empty message
}

}  // namespace
}  // namespace tandem::proto
