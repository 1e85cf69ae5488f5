// CudaKvTierStorage (device pool + pinned host tier, copies on a copy stream) against
// CpuKvTierStorage (the plain-memory oracle): the same copy list over the same random
// contents leaves both tiers byte-identical, including copies that read what an earlier
// copy wrote, overwrite an earlier copy's source, and merged runs of consecutive blocks.
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

TEST(CudaKvTierStorageTest, MatchesCpuStorage) {
  if (DeviceCount() == 0) GTEST_SKIP() << "no CUDA device: skipping GPU test";
  kv_cache::KvLayout layout{.num_layers = 3, .num_kv_heads = 2, .head_dim = 64, .block_size = 16,
                            .num_blocks = 12, .dtype = DType::kBF16};
  const int host_blocks = 8;
  auto cpu = kv_cache::CpuKvTierStorage::Create(layout, layout.num_blocks, host_blocks);
  ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
  std::mt19937 rng(7);
  for (KvTier t : {kD, kH}) {
    const size_t n = (*cpu)->layout(t).TotalBytes();
    for (size_t i = 0; i < n; ++i) (*cpu)->data(t)[i] = static_cast<std::byte>(rng() & 0xff);
  }
  auto pool = DeviceBuffer::Allocate(layout.TotalBytes());
  ASSERT_TRUE(pool.ok());
  ASSERT_EQ(cudaMemcpy(pool->data(), (*cpu)->data(kD), layout.TotalBytes(), cudaMemcpyHostToDevice), cudaSuccess);
  cudaStream_t compute = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking), cudaSuccess);
  {
    auto gpu = CudaKvTierStorage::Create(pool->data(), layout, host_blocks, compute);
    ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
    std::memcpy((*gpu)->HostBlock(0, 0), (*cpu)->data(kH), (*gpu)->host_layout().TotalBytes());
    const std::vector<BlockCopy> copies = {
        {kD, 3, kH, 0}, {kD, 4, kH, 1}, {kD, 5, kH, 2},  // a run of three (merged)
        {kH, 0, kD, 7},                                  // reads what the run wrote
        {kH, 1, kH, 3},                                  // host -> host
        {kD, 7, kD, 8},                                  // device -> device, after the promote
        {kH, 6, kD, 3},                                  // overwrites the first copy's source
        {kD, 1, kH, 6}, {kD, 2, kH, 7},                  // a run whose second source ...
        {kD, 2, kD, 1},                                  // ... is read before this overwrite
    };
    ASSERT_TRUE((*cpu)->ExecuteCopies(copies).ok());
    ASSERT_TRUE((*gpu)->ExecuteCopies(copies).ok());
    const std::vector<BlockCopy> bad = {{kD, 0, kH, host_blocks}};
    EXPECT_EQ((*gpu)->ExecuteCopies(bad).code(), StatusCode::kInvalidArgument);
    ASSERT_TRUE((*gpu)->Synchronize().ok());
    ASSERT_EQ(cudaStreamSynchronize(compute), cudaSuccess);
    std::vector<std::byte> device(layout.TotalBytes());
    ASSERT_EQ(cudaMemcpy(device.data(), pool->data(), device.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(std::memcmp(device.data(), (*cpu)->data(kD), device.size()), 0) << "device tier differs";
    EXPECT_EQ(std::memcmp((*gpu)->HostBlock(0, 0), (*cpu)->data(kH), (*gpu)->host_layout().TotalBytes()), 0)
        << "host tier differs";
  }
  cudaStreamDestroy(compute);
}

}  // namespace
}  // namespace tandem::cuda
