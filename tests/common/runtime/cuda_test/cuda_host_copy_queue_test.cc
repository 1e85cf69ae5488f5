// CudaHostCopyQueue: device->host copies on their own stream, ordered after the
// ops issued before them, fenced by events, and joined back into the compute
// stream so later ops cannot overwrite memory a copy still reads.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "tests/common/runtime/cuda_test/cuda_test_util.h"

namespace tandem::runtime::testing {
namespace {

bool WaitReady(CopyFence& fence) {
  for (int i = 0; i < 20000; ++i) {
    if (fence.Ready()) return true;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return false;
}

TEST(CudaHostCopyQueueTest, CopiesLandInOrderAndJoinProtectsTheSource) {
  TANDEM_SKIP_WITHOUT_GPU();
  std::unique_ptr<CudaBackend> b = MakeCudaBackend();
  constexpr int64_t kBytes = 8 << 20;
  auto dev = b->Allocate(DType::kU8, {kBytes});
  ASSERT_TRUE(dev.ok());
  std::vector<uint8_t> first(kBytes), second(kBytes);
  for (int64_t i = 0; i < kBytes; ++i) {
    first[i] = static_cast<uint8_t>(i * 7 + 1);
    second[i] = static_cast<uint8_t>(i * 13 + 5);
  }
  // Pinned destinations, as a prefill node's staging arena.
  std::vector<uint8_t> out_a(kBytes, 0), out_b(kBytes / 2, 0);
  ASSERT_TRUE(b->PinHostMemory(out_a.data(), out_a.size()).ok());
  ASSERT_TRUE(b->PinHostMemory(out_b.data(), out_b.size()).ok());

  auto queue = b->CreateHostCopyQueue();
  ASSERT_TRUE(queue.ok()) << queue.status().ToString();
  // Issued on the compute stream (async): the copy must wait for it.
  ASSERT_TRUE(b->CopyToDevice(first.data(), kBytes, dev->tensor()).ok());
  ASSERT_TRUE((*queue)->Enqueue(dev->tensor(), out_a.data(), kBytes).ok());
  auto fence_a = (*queue)->Mark();
  ASSERT_TRUE(fence_a.ok());
  // The second half of the buffer, copied after a later mark.
  Tensor half = dev->tensor().Rows(kBytes / 2, kBytes / 2);
  ASSERT_TRUE((*queue)->Enqueue(half, out_b.data(), kBytes / 2).ok());
  auto fence_b = (*queue)->Mark();
  ASSERT_TRUE(fence_b.ok());
  ASSERT_TRUE((*queue)->JoinCompute().ok());
  // Overwrites the source on the compute stream: after the join it cannot reach the copies.
  ASSERT_TRUE(b->CopyToDevice(second.data(), kBytes, dev->tensor()).ok());

  ASSERT_TRUE(WaitReady(**fence_b));
  EXPECT_TRUE((*fence_a)->Ready());  // copies complete in order
  EXPECT_EQ(std::memcmp(out_a.data(), first.data(), kBytes), 0);
  EXPECT_EQ(std::memcmp(out_b.data(), first.data() + kBytes / 2, kBytes / 2), 0);

  // And the overwrite did happen, after the copies.
  std::vector<uint8_t> now(kBytes);
  ASSERT_TRUE(b->CopyToHost(dev->tensor(), now.data(), kBytes).ok());
  EXPECT_EQ(std::memcmp(now.data(), second.data(), kBytes), 0);

  // A fence can be polled from another thread.
  ASSERT_TRUE((*queue)->Enqueue(dev->tensor(), out_a.data(), kBytes).ok());
  auto fence_c = (*queue)->Mark();
  ASSERT_TRUE(fence_c.ok());
  bool ready = false;
  std::thread poller([&] { ready = WaitReady(**fence_c); });
  poller.join();
  EXPECT_TRUE(ready);
  EXPECT_EQ(std::memcmp(out_a.data(), second.data(), kBytes), 0);

  queue->reset();
  b->UnpinHostMemory(out_a.data());
  b->UnpinHostMemory(out_b.data());
}

TEST(CudaHostCopyQueueTest, RefusesBadArgumentsAndGraphSteps) {
  TANDEM_SKIP_WITHOUT_GPU();
  std::unique_ptr<CudaBackend> b = MakeCudaBackend();
  auto dev = b->Allocate(DType::kU8, {4096});
  ASSERT_TRUE(dev.ok());
  std::vector<uint8_t> host(4096);
  auto queue = b->CreateHostCopyQueue();
  ASSERT_TRUE(queue.ok());
  EXPECT_EQ((*queue)->Enqueue(dev->tensor(), host.data(), 100).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*queue)->Enqueue(dev->tensor(), nullptr, 4096).code(), StatusCode::kInvalidArgument);
  Tensor on_host(host.data(), DType::kU8, Device::kCpu, {4096});
  EXPECT_EQ((*queue)->Enqueue(on_host, host.data(), 4096).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(b->BeginGraphStep().ok());
  EXPECT_EQ((*queue)->Enqueue(dev->tensor(), host.data(), 4096).code(), StatusCode::kFailedPrecondition);
  b->CancelGraphStep();
  EXPECT_EQ(b->PinHostMemory(nullptr, 16).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem::runtime::testing
