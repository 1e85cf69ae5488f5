// cuBLAS bf16 GEMM wrapper and the CUDA RAII types against a CPU fp32 reference.
#include "common/cuda/gemm.h"

#include <gtest/gtest.h>

#include "common/cuda/stream.h"
#include "tests/common/kernels/gpu_test_util.h"

namespace tandem::cuda {
namespace {

using testing::AllClose;
using testing::RandomBf16;
using testing::ToFloat;

struct GemmShape {
  int m, n, k;
};

class GemmBf16Test : public ::testing::TestWithParam<GemmShape> {};

TEST_P(GemmBf16Test, MatchesCpuReference) {
  TANDEM_SKIP_WITHOUT_GPU();
  const auto [m, n, k] = GetParam();
  std::mt19937 rng(m * 131 + n * 7 + k);
  auto x = RandomBf16(static_cast<size_t>(m) * k, rng);
  auto w = RandomBf16(static_cast<size_t>(n) * k, rng, 0.05f);
  auto xf = ToFloat(x), wf = ToFloat(w);
  std::vector<float> ref(static_cast<size_t>(m) * n);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double acc = 0;
      for (int l = 0; l < k; ++l) acc += static_cast<double>(xf[i * k + l]) * wf[j * k + l];
      ref[i * n + j] = static_cast<float>(acc);
    }
  auto handle = CublasHandle::Create();
  TANDEM_ASSERT_OK(handle.status());
  auto stream = CudaStream::Create();
  TANDEM_ASSERT_OK(stream.status());
  auto dx = testing::Upload(x), dw = testing::Upload(w);
  auto y16 = testing::Poisoned<uint16_t>(ref.size());
  auto y32 = testing::Poisoned<float>(ref.size());
  GemmParams p{.x = dx.data(), .w = dw.data(), .y = y16.data(), .m = m, .n = n, .k = k};
  TANDEM_ASSERT_OK(GemmBf16(*handle, p, stream->get()));
  p.y = y32.data();
  p.y_dtype = DType::kF32;
  TANDEM_ASSERT_OK(GemmBf16(*handle, p, stream->get()));
  TANDEM_ASSERT_OK(stream->Synchronize());
  EXPECT_TRUE(AllClose(testing::DownloadBf16(y16, ref.size()), ref, 1e-2f, 1e-2f, 8e-3));
  EXPECT_TRUE(AllClose(testing::Download<float>(y32, ref.size()), ref, 1e-3f, 1e-3f, 1e-4));
}

INSTANTIATE_TEST_SUITE_P(Shapes, GemmBf16Test,
                         ::testing::Values(GemmShape{1, 128, 64}, GemmShape{7, 384, 4096}, GemmShape{64, 256, 512},
                                           GemmShape{33, 100, 72}));

TEST(GemmBf16Test, RejectsBadArguments) {
  TANDEM_SKIP_WITHOUT_GPU();
  auto handle = CublasHandle::Create();
  TANDEM_ASSERT_OK(handle.status());
  GemmParams p;
  EXPECT_EQ(GemmBf16(*handle, p, nullptr).code(), StatusCode::kInvalidArgument);
  int dummy = 0;
  p = GemmParams{.x = &dummy, .w = &dummy, .y = &dummy, .m = 1, .n = 0, .k = 1};
  EXPECT_EQ(GemmBf16(*handle, p, nullptr).code(), StatusCode::kInvalidArgument);
  p.n = 1;
  p.y_dtype = DType::kI32;
  EXPECT_EQ(GemmBf16(*handle, p, nullptr).code(), StatusCode::kInvalidArgument);
}

TEST(CudaRaiiTest, BuffersStreamsAndEvents) {
  TANDEM_SKIP_WITHOUT_GPU();
  auto dev = DeviceBuffer::Allocate(1 << 20);
  TANDEM_ASSERT_OK(dev.status());
  auto pinned = PinnedBuffer::Allocate(1 << 20);
  TANDEM_ASSERT_OK(pinned.status());
  auto back = PinnedBuffer::Allocate(1 << 20);
  TANDEM_ASSERT_OK(back.status());
  for (int i = 0; i < (1 << 18); ++i) pinned->as<int>()[i] = i * 3 + 1;
  auto stream = CudaStream::Create();
  TANDEM_ASSERT_OK(stream.status());
  auto start = CudaEvent::Create(), stop = CudaEvent::Create();
  TANDEM_ASSERT_OK(start.status());
  TANDEM_ASSERT_OK(stop.status());
  TANDEM_ASSERT_OK(start->Record(stream->get()));
  TANDEM_ASSERT_OK(
      CudaStatus(cudaMemcpyAsync(dev->data(), pinned->data(), 1 << 20, cudaMemcpyHostToDevice, stream->get()), "h2d"));
  TANDEM_ASSERT_OK(
      CudaStatus(cudaMemcpyAsync(back->data(), dev->data(), 1 << 20, cudaMemcpyDeviceToHost, stream->get()), "d2h"));
  TANDEM_ASSERT_OK(stop->Record(stream->get()));
  TANDEM_ASSERT_OK(stop->Synchronize());
  auto ms = CudaEvent::ElapsedMs(*start, *stop);
  TANDEM_ASSERT_OK(ms.status());
  EXPECT_GE(*ms, 0.f);
  for (int i = 0; i < (1 << 18); ++i) ASSERT_EQ(back->as<int>()[i], i * 3 + 1);
  DeviceBuffer moved = std::move(*dev);
  EXPECT_EQ(moved.size_bytes(), 1u << 20);
  EXPECT_EQ(dev->data(), nullptr);
  auto huge = DeviceBuffer::Allocate(size_t{1} << 50);
  EXPECT_EQ(huge.status().code(), StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace tandem::cuda
