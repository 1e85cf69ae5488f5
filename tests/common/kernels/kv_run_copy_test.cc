// Run-copy kernel: every alignment case (co-aligned 16-byte vectors, heads and
// tails, never co-aligned bytes), runs longer than a tile, empty runs, one
// launch at capacity; the oracle is memcpy on the host, and every byte outside
// the runs must keep its poison.
#include "common/kernels/kv_run_copy.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>

#include "tests/common/kernels/gpu_test_util.h"

namespace tandem::kernels {
namespace {

using testing::Download;
using testing::Poisoned;
using testing::Upload;

TEST(RunCopyTest, RunsLandByteExactAndNothingElseChanges) {
  TANDEM_SKIP_WITHOUT_GPU();
  constexpr size_t kBytes = 4 << 20;
  std::mt19937 rng(5);
  std::vector<uint8_t> src(kBytes);
  for (auto& b : src) b = static_cast<uint8_t>(rng());
  cuda::DeviceBuffer d_src = Upload(src);
  cuda::DeviceBuffer d_dst = Poisoned<uint8_t>(kBytes);
  std::vector<uint8_t> expect(kBytes, 0xff);
  auto p = std::make_unique<RunCopyParams>();
  p->count = 0;
  // Disjoint destination slots of 64 KiB; sources anywhere.
  auto add = [&](uint64_t src_off, uint64_t dst_off, uint64_t bytes) {
    p->src[p->count] = d_src.as<std::byte>() + src_off;
    p->dst[p->count] = d_dst.as<std::byte>() + dst_off;
    p->bytes[p->count] = static_cast<int64_t>(bytes);
    ++p->count;
    std::memcpy(expect.data() + dst_off, src.data() + src_off, bytes);
  };
  add(0, 0, 65536);                  // aligned, two tiles
  add(16 + 3, 65536 + 3, 40000);     // co-aligned with a head and a tail
  add(5, 2 * 65536 + 9, 30001);      // never co-aligned: bytes
  add(100, 3 * 65536, 1);            // one byte
  add(200, 4 * 65536, 0);            // empty: skipped
  add(1 << 20, 5 * 65536, 3 << 18);  // long run (768 KiB, 24 tiles) over slots 5..16
  ASSERT_TRUE(LaunchRunCopy(*p, nullptr).ok());
  EXPECT_EQ(Download<uint8_t>(d_dst, kBytes), expect);
}

TEST(RunCopyTest, AFullLaunchOfShortRuns) {
  TANDEM_SKIP_WITHOUT_GPU();
  constexpr size_t kRun = 1000, kStride = 1024;
  const size_t bytes = kRunCopyMaxRuns * kStride;
  std::vector<uint8_t> src(bytes);
  for (size_t i = 0; i < bytes; ++i) src[i] = static_cast<uint8_t>(i * 7 + 3);
  cuda::DeviceBuffer d_src = Upload(src);
  cuda::DeviceBuffer d_dst = Poisoned<uint8_t>(bytes);
  std::vector<uint8_t> expect(bytes, 0xff);
  auto p = std::make_unique<RunCopyParams>();
  p->count = kRunCopyMaxRuns;
  for (int i = 0; i < kRunCopyMaxRuns; ++i) {  // run i goes to slot (i * 37) % n: a permutation
    const size_t from = i * kStride, to = ((i * 37) % kRunCopyMaxRuns) * kStride;
    p->src[i] = d_src.as<std::byte>() + from;
    p->dst[i] = d_dst.as<std::byte>() + to;
    p->bytes[i] = kRun;
    std::memcpy(expect.data() + to, src.data() + from, kRun);
  }
  ASSERT_TRUE(LaunchRunCopy(*p, nullptr).ok());
  EXPECT_EQ(Download<uint8_t>(d_dst, bytes), expect);
}

TEST(RunCopyTest, RefusesBadParams) {
  auto p = std::make_unique<RunCopyParams>();
  p->count = kRunCopyMaxRuns + 1;
  EXPECT_EQ(LaunchRunCopy(*p, nullptr).code(), StatusCode::kInvalidArgument);
  p->count = 1;
  p->src[0] = nullptr;
  p->dst[0] = nullptr;
  p->bytes[0] = 8;
  EXPECT_EQ(LaunchRunCopy(*p, nullptr).code(), StatusCode::kInvalidArgument);
  p->bytes[0] = -1;
  EXPECT_EQ(LaunchRunCopy(*p, nullptr).code(), StatusCode::kInvalidArgument);
  p->bytes[0] = 0;
  EXPECT_TRUE(LaunchRunCopy(*p, nullptr).ok()) << "nothing to copy";
}

}  // namespace
}  // namespace tandem::kernels
