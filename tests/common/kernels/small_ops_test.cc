// Embedding gather, RMSNorm (+ residual), SiLU-and-mul against CPU references.
#include <gtest/gtest.h>

#include "common/kernels/embedding.h"
#include "common/kernels/misc_ops.h"
#include "common/kernels/rms_norm.h"
#include "common/kernels/silu_mul.h"
#include "tests/common/kernels/gpu_test_util.h"

namespace tandem::kernels {
namespace {

using testing::AllClose;
using testing::RandomBf16;
using testing::RoundBf16;
using testing::ToFloat;

TEST(EmbeddingTest, GathersRowsAndZeroesOutOfRangeIds) {
  TANDEM_SKIP_WITHOUT_GPU();
  for (int hidden : {64, 4096, 136}) {
    const int vocab = 1000, n = 37;
    std::mt19937 rng(hidden);
    auto table = RandomBf16(static_cast<size_t>(vocab) * hidden, rng);
    std::vector<int32_t> ids(n);
    for (int i = 0; i < n; ++i) ids[i] = static_cast<int32_t>(rng() % vocab);
    ids[3] = -1;
    ids[5] = vocab;
    auto dt = testing::Upload(table), di = testing::Upload(ids);
    auto out = testing::Poisoned<uint16_t>(static_cast<size_t>(n) * hidden);
    EmbeddingParams p{di.as<int32_t>(), dt.as<__nv_bfloat16>(), out.as<__nv_bfloat16>(), n, vocab, hidden};
    TANDEM_ASSERT_OK(LaunchEmbedding(p, nullptr));
    auto got = testing::Download<uint16_t>(out, static_cast<size_t>(n) * hidden);
    // The fp32 variant: the same rows as exact floats.
    auto out_f32 = testing::Poisoned<float>(static_cast<size_t>(n) * hidden);
    p.out = nullptr;
    p.out_f32 = out_f32.as<float>();
    TANDEM_ASSERT_OK(LaunchEmbedding(p, nullptr));
    auto got_f32 = testing::Download<float>(out_f32, static_cast<size_t>(n) * hidden);
    for (int t = 0; t < n; ++t)
      for (int d = 0; d < hidden; ++d) {
        const uint16_t want = ids[t] < 0 || ids[t] >= vocab ? 0 : table[static_cast<size_t>(ids[t]) * hidden + d];
        ASSERT_EQ(got[static_cast<size_t>(t) * hidden + d], want) << "t=" << t << " d=" << d;
        ASSERT_EQ(got_f32[static_cast<size_t>(t) * hidden + d], BF16ToF32(want)) << "f32 t=" << t << " d=" << d;
      }
  }
}

TEST(EmbeddingTest, RejectsBadShapes) {
  int x = 0;
  EmbeddingParams p{reinterpret_cast<int32_t*>(&x),
                    reinterpret_cast<__nv_bfloat16*>(&x),
                    reinterpret_cast<__nv_bfloat16*>(&x),
                    1,
                    10,
                    12};
  EXPECT_EQ(LaunchEmbedding(p, nullptr).code(), StatusCode::kInvalidArgument);
}

// Rows of any size, gathered by index (out-of-range indices give zero rows): 16-byte
// multiples take the vector path, other sizes the byte path.
TEST(GatherRowsTest, CopiesRowsAndZeroesOutOfRangeIndices) {
  TANDEM_SKIP_WITHOUT_GPU();
  for (size_t row_bytes : {size_t{16384}, size_t{48}, size_t{13}}) {
    const int rows = 20;
    std::vector<uint8_t> src(rows * row_bytes);
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7 + 1);
    const std::vector<int32_t> idx = {3, 19, -1, 0, 20, 3};
    auto dsrc = testing::Upload(src), didx = testing::Upload(idx);
    auto out = testing::Poisoned<uint8_t>(idx.size() * row_bytes);
    TANDEM_ASSERT_OK(LaunchGatherRows(dsrc.data(), rows, row_bytes, didx.as<int32_t>(), static_cast<int>(idx.size()),
                                      out.data(), nullptr));
    const auto got = testing::Download<uint8_t>(out, idx.size() * row_bytes);
    for (size_t i = 0; i < idx.size(); ++i)
      for (size_t b = 0; b < row_bytes; ++b) {
        const uint8_t want = idx[i] < 0 || idx[i] >= rows ? 0 : src[idx[i] * row_bytes + b];
        ASSERT_EQ(got[i * row_bytes + b], want) << "row_bytes " << row_bytes << " row " << i << " byte " << b;
      }
  }
}

void RunRmsNorm(int rows, int hidden, bool with_residual, bool f32 = false) {
  std::mt19937 rng(rows * 1000 + hidden + with_residual + 2 * f32);
  const size_t n = static_cast<size_t>(rows) * hidden;
  auto in = RandomBf16(n, rng, 2.f), res = RandomBf16(n, rng), w = RandomBf16(hidden, rng, 0.3f, 1.f);
  auto inf = ToFloat(in), resf = ToFloat(res), wf = ToFloat(w);
  std::vector<float> ref_out(n), ref_res(n);
  const float eps = 1e-5f;
  for (int r = 0; r < rows; ++r) {
    double ss = 0;
    std::vector<float> x(hidden);
    for (int d = 0; d < hidden; ++d) {
      const size_t i = static_cast<size_t>(r) * hidden + d;
      const float sum = inf[i] + resf[i];  // fp32: exact for these bf16 inputs
      x[d] = with_residual ? (f32 ? sum : RoundBf16(sum)) : inf[i];
      ref_res[i] = x[d];
      ss += static_cast<double>(x[d]) * x[d];
    }
    const double inv = 1.0 / std::sqrt(ss / hidden + eps);
    for (int d = 0; d < hidden; ++d)
      ref_out[static_cast<size_t>(r) * hidden + d] = static_cast<float>(x[d] * inv * wf[d]);
  }
  // The fp32 variant gets the same values as floats.
  auto din = f32 ? testing::Upload(inf) : testing::Upload(in),
       dres = f32 ? testing::Upload(resf) : testing::Upload(res);
  auto dw = testing::Upload(w);
  auto out = testing::Poisoned<uint16_t>(n);
  RmsNormParams p{din.data(),
                  with_residual ? dres.data() : nullptr,
                  dw.as<__nv_bfloat16>(),
                  out.as<__nv_bfloat16>(),
                  rows,
                  hidden,
                  eps,
                  f32};
  TANDEM_ASSERT_OK(LaunchRmsNorm(p, nullptr));
  EXPECT_TRUE(AllClose(testing::DownloadBf16(out, n), ref_out, 1e-2f, 1e-2f, 5e-3))
      << "rows " << rows << " hidden " << hidden << " f32 " << f32;
  if (with_residual) {
    const auto got_res = f32 ? testing::Download<float>(dres, n) : testing::DownloadBf16(dres, n);
    EXPECT_TRUE(AllClose(got_res, ref_res, 0.f, 0.f, 0.0)) << "residual, f32 " << f32;
  }
}

TEST(RmsNormTest, MatchesCpuReference) {
  TANDEM_SKIP_WITHOUT_GPU();
  for (int hidden : {64, 1000, 4096, 8192, 16384, 20000, 32768})  // 1, 1, 1, 2, 4, 8, 8 vectors per thread
    for (bool residual : {false, true})
      for (bool f32 : {false, true}) RunRmsNorm(13, hidden, residual, f32);
}

TEST(SiluMulTest, MatchesCpuReference) {
  TANDEM_SKIP_WITHOUT_GPU();
  for (int ffn : {8, 1000, 14336}) {
    const int tokens = 9;
    std::mt19937 rng(ffn);
    auto gu = RandomBf16(static_cast<size_t>(tokens) * 2 * ffn, rng, 2.f);
    auto guf = ToFloat(gu);
    std::vector<float> ref(static_cast<size_t>(tokens) * ffn);
    for (int t = 0; t < tokens; ++t)
      for (int i = 0; i < ffn; ++i) {
        const double g = guf[static_cast<size_t>(t) * 2 * ffn + i];
        const double u = guf[static_cast<size_t>(t) * 2 * ffn + ffn + i];
        ref[static_cast<size_t>(t) * ffn + i] = static_cast<float>(g / (1 + std::exp(-g)) * u);
      }
    auto dgu = testing::Upload(gu);
    auto out = testing::Poisoned<uint16_t>(ref.size());
    SiluMulParams p{dgu.as<__nv_bfloat16>(), out.as<__nv_bfloat16>(), tokens, ffn};
    TANDEM_ASSERT_OK(LaunchSiluMul(p, nullptr));
    EXPECT_TRUE(AllClose(testing::DownloadBf16(out, ref.size()), ref, 1e-2f, 1e-2f, 5e-3));
  }
}

}  // namespace
}  // namespace tandem::kernels
