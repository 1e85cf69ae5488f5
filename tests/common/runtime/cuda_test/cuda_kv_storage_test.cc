// CudaKvTierStorage (device pool + pinned host tier, copies on a copy stream) against
// CpuKvTierStorage (the plain-memory oracle): the same copy list over the same random
// contents leaves both tiers byte-identical, including copies that read what an earlier
// copy wrote, overwrite an earlier copy's source, and merged runs of consecutive blocks;
// with short runs by the copy kernel (the default) and with everything on the copy engines.
#include <gtest/gtest.h>
#include <cuda_runtime_api.h>

#include <cstring>
#include <random>
#include <vector>

#include "common/cuda/cuda_status.h"
#include "common/cuda/device_buffer.h"
#include "common/cuda/kv_tier_storage_cuda.h"
#include "common/kv_cache/kv_tier_storage.h"

namespace tandem::cuda {
namespace {

using kv_cache::BlockCopy;
using kv_cache::KvTier;

constexpr KvTier kD = KvTier::kDevice, kH = KvTier::kHost;

// Runs `copies` (then one out-of-range copy, which must be refused) on both storages from
// the same random contents, for each copy-engine threshold, and compares both tiers.
void ExpectSameAsCpu(const kv_cache::KvLayout& layout, int host_blocks, const std::vector<BlockCopy>& copies) {
  auto cpu = kv_cache::CpuKvTierStorage::Create(layout, layout.num_blocks, host_blocks);
  ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
  std::mt19937 rng(7);
  for (KvTier t : {kD, kH}) {
    const size_t n = (*cpu)->layout(t).TotalBytes();
    for (size_t i = 0; i < n; ++i) (*cpu)->data(t)[i] = static_cast<std::byte>(rng() & 0xff);
  }
  const std::vector<std::byte> device_before((*cpu)->data(kD), (*cpu)->data(kD) + layout.TotalBytes());
  const size_t host_bytes = (*cpu)->layout(kH).TotalBytes();
  const std::vector<std::byte> host_before((*cpu)->data(kH), (*cpu)->data(kH) + host_bytes);
  ASSERT_TRUE((*cpu)->ExecuteCopies(copies).ok());
  auto pool = DeviceBuffer::Allocate(layout.TotalBytes());
  ASSERT_TRUE(pool.ok());
  cudaStream_t compute = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking), cudaSuccess);
  for (size_t engine_min_bytes : {kCopyEngineMinBytes, size_t{0}}) {
    SCOPED_TRACE(engine_min_bytes == 0 ? "copy engines only" : "short runs by the copy kernel");
    ASSERT_EQ(cudaMemcpy(pool->data(), device_before.data(), device_before.size(), cudaMemcpyHostToDevice),
              cudaSuccess);
    auto gpu = CudaKvTierStorage::Create(pool->data(), layout, host_blocks, compute, engine_min_bytes);
    ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
    std::memcpy((*gpu)->HostBlock(0, 0), host_before.data(), host_bytes);
    ASSERT_TRUE((*gpu)->ExecuteCopies(copies).ok());
    const std::vector<BlockCopy> bad = {{kD, 0, kH, host_blocks}};
    EXPECT_EQ((*gpu)->ExecuteCopies(bad).code(), StatusCode::kInvalidArgument);
    ASSERT_TRUE((*gpu)->Synchronize().ok());
    ASSERT_EQ(cudaStreamSynchronize(compute), cudaSuccess);
    std::vector<std::byte> device(layout.TotalBytes());
    ASSERT_EQ(cudaMemcpy(device.data(), pool->data(), device.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(std::memcmp(device.data(), (*cpu)->data(kD), device.size()), 0) << "device tier differs";
    EXPECT_EQ(std::memcmp((*gpu)->HostBlock(0, 0), (*cpu)->data(kH), host_bytes), 0) << "host tier differs";
  }
  cudaStreamDestroy(compute);
}

TEST(CudaKvTierStorageTest, MatchesCpuStorage) {
  if (DeviceCount() == 0) GTEST_SKIP() << "no CUDA device: skipping GPU test";
  kv_cache::KvLayout layout{
      .num_layers = 3, .num_kv_heads = 2, .head_dim = 64, .block_size = 16, .num_blocks = 12, .dtype = DType::kBF16};
  ExpectSameAsCpu(layout, 8,
                  {
                      {kD, 3, kH, 0},
                      {kD, 4, kH, 1},
                      {kD, 5, kH, 2},  // a run of three (merged)
                      {kH, 0, kD, 7},  // reads what the run wrote
                      {kH, 1, kH, 3},  // host -> host
                      {kD, 7, kD, 8},  // device -> device, after the promote
                      {kH, 6, kD, 3},  // overwrites the first copy's source
                      {kD, 1, kH, 6},
                      {kD, 2, kH, 7},  // a run whose second source ...
                      {kD, 2, kD, 1},  // ... is read before this overwrite
                  });
}

// Thousands of scattered copies: more than one kernel launch takes in one direction, the
// same destination written twice in a row (the later must win), directions alternating,
// a run long enough for the copy engines, and random mixes with same-tier copies.
TEST(CudaKvTierStorageTest, ScatteredCopiesMatchCpuStorage) {
  if (DeviceCount() == 0) GTEST_SKIP() << "no CUDA device: skipping GPU test";
  kv_cache::KvLayout layout{
      .num_layers = 2, .num_kv_heads = 1, .head_dim = 16, .block_size = 16, .num_blocks = 3000, .dtype = DType::kBF16};
  const int host_blocks = 2600;  // 1 KB per (layer, block): a copy-engine run is 2048 blocks
  std::mt19937 rng(11);
  std::vector<BlockCopy> copies;
  for (int i = 0; i < 2500; ++i) copies.push_back({kD, (i * 7) % layout.num_blocks, kH, (i * 13) % host_blocks});
  copies.push_back({kD, 5, kH, 9});
  copies.push_back({kD, 6, kH, 9});
  for (int i = 0; i < 2100; ++i) copies.push_back({kH, 100 + i, kD, 200 + i});  // one run of 2100
  for (int i = 0; i < 3000; ++i) {
    const int kind = static_cast<int>(rng() % 8);
    const KvTier src = kind < 3 ? kD : kind < 6 ? kH : (kind == 6 ? kD : kH);
    const KvTier dst = kind < 3 ? kH : kind < 6 ? kD : src;
    auto pick = [&](KvTier t) { return static_cast<BlockId>(rng() % (t == kD ? layout.num_blocks : host_blocks)); };
    copies.push_back({src, pick(src), dst, pick(dst)});
  }
  ExpectSameAsCpu(layout, host_blocks, copies);
}

}  // namespace
}  // namespace tandem::cuda
