// Skinny GEMM (m <= 16) against an fp64 CPU reference on the bf16 inputs: every m in
// [1, 16], odd n, k = 8 and k not a multiple of the 32-wide warp step, bias, strided x/y,
// bf16 and fp32 outputs, every tiling; accumulate against the plain kernel's bits plus one
// fp32 add; the SiLU-mul epilogue against the plain kernel and the SiLU-mul kernel (bits);
// argument checks without a GPU.
#include "common/kernels/skinny_gemm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/cuda/stream.h"
#include "common/kernels/silu_mul.h"
#include "tests/common/kernels/gpu_test_util.h"

namespace tandem::kernels {
namespace {

using testing::RandomBf16;
using testing::ToFloat;

constexpr uint16_t kBf16Nan = 0x7fc0;

struct Case {
  int m, n, k;
  bool bias = false;
  int ldx_pad = 0;  // extra elements per row of x (filled with NaN: reading them shows)
  int ldy_pad = 0;  // extra elements per row of y (must stay untouched)
  DType y_dtype = DType::kBF16;
  SkinnyGemmTiling tiling = SkinnyGemmTiling::kAuto;
};

std::string Describe(const Case& c) {
  return "m=" + std::to_string(c.m) + " n=" + std::to_string(c.n) + " k=" + std::to_string(c.k) +
         " bias=" + std::to_string(c.bias) + " ldx_pad=" + std::to_string(c.ldx_pad) +
         " ldy_pad=" + std::to_string(c.ldy_pad) + " y=" + (c.y_dtype == DType::kF32 ? "f32" : "bf16") +
         " tiling=" + SkinnyGemmTilingName(c.tiling);
}

// Reference y and, per element, sum |x_i w_i| (+ |bias|): the scale of the fp32
// accumulation error.
struct Reference {
  std::vector<double> y, abs_sum;
};

Reference ComputeReference(const Case& c, const std::vector<float>& x, int64_t ldx, const std::vector<float>& w,
                           const std::vector<float>& bias) {
  Reference ref;
  ref.y.resize(static_cast<size_t>(c.m) * c.n);
  ref.abs_sum.resize(ref.y.size());
  for (int i = 0; i < c.m; ++i)
    for (int j = 0; j < c.n; ++j) {
      double acc = c.bias ? bias[j] : 0.0, mag = c.bias ? std::fabs(bias[j]) : 0.0;
      const float* xr = &x[static_cast<size_t>(i) * ldx];
      const float* wr = &w[static_cast<size_t>(j) * c.k];
      for (int l = 0; l < c.k; ++l) {
        const double p = static_cast<double>(xr[l]) * wr[l];
        acc += p;
        mag += std::fabs(p);
      }
      ref.y[static_cast<size_t>(i) * c.n + j] = acc;
      ref.abs_sum[static_cast<size_t>(i) * c.n + j] = mag;
    }
  return ref;
}

// Runs one case; returns the raw output rows (m + 1 rows of ldy, the last one a guard).
std::vector<uint32_t> RunKernel(const Case& c, const cuda::DeviceBuffer& dx, int64_t ldx, const cuda::DeviceBuffer& dw,
                                const cuda::DeviceBuffer& db, int64_t ldy) {
  const size_t elem = c.y_dtype == DType::kF32 ? 4 : 2;
  const size_t y_count = static_cast<size_t>(c.m + 1) * ldy;
  auto dy = testing::Poisoned<uint8_t>(y_count * elem);
  SkinnyGemmParams p;
  p.x = dx.as<__nv_bfloat16>();
  p.w = dw.as<__nv_bfloat16>();
  p.bias = c.bias ? db.as<__nv_bfloat16>() : nullptr;
  p.y = dy.data();
  p.y_dtype = c.y_dtype;
  p.m = c.m;
  p.n = c.n;
  p.k = c.k;
  p.ldx = c.ldx_pad ? ldx : 0;  // 0 exercises the "dense" default
  p.ldy = c.ldy_pad ? ldy : 0;
  p.tiling = c.tiling;
  auto stream = cuda::CudaStream::Create();
  TANDEM_CHECK_OK(stream.status());
  const Status st = LaunchSkinnyGemm(p, stream->get());
  EXPECT_TRUE(st.ok()) << st.ToString();
  TANDEM_CHECK_OK(stream->Synchronize());
  std::vector<uint32_t> out(y_count);
  const auto raw = testing::Download<uint8_t>(dy, y_count * elem);
  for (size_t i = 0; i < y_count; ++i) {
    if (elem == 4)
      std::memcpy(&out[i], &raw[4 * i], 4);
    else
      out[i] = static_cast<uint32_t>(raw[2 * i]) | (static_cast<uint32_t>(raw[2 * i + 1]) << 8);
  }
  return out;
}

float Decode(uint32_t bits, DType dtype) {
  if (dtype == DType::kBF16) return BF16ToF32(static_cast<uint16_t>(bits));
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Checks `c` against the fp64 reference; returns the raw output for cross-tiling checks.
std::vector<uint32_t> CheckCase(const Case& c) {
  SCOPED_TRACE(Describe(c));
  std::mt19937 rng(c.m * 1000003u + c.n * 7919u + c.k * 31u + c.bias);
  const int64_t ldx = c.k + c.ldx_pad, ldy = c.n + c.ldy_pad;
  std::vector<uint16_t> x(static_cast<size_t>(c.m) * ldx, kBf16Nan);
  const auto x_dense = RandomBf16(static_cast<size_t>(c.m) * c.k, rng);
  for (int i = 0; i < c.m; ++i)
    std::copy_n(&x_dense[static_cast<size_t>(i) * c.k], c.k, &x[static_cast<size_t>(i) * ldx]);
  const auto w = RandomBf16(static_cast<size_t>(c.n) * c.k, rng, 0.05f);
  const auto bias = RandomBf16(c.n, rng, 0.5f);
  const Reference ref = ComputeReference(c, ToFloat(x), ldx, ToFloat(w), ToFloat(bias));
  auto dx = testing::Upload(x), dw = testing::Upload(w), db = testing::Upload(bias);
  const auto out = RunKernel(c, dx, ldx, dw, db, ldy);

  const bool f32 = c.y_dtype == DType::kF32;
  const uint32_t poison = f32 ? 0xffffffffu : 0xffffu;
  // bf16: 2^-7 relative is two roundings (half an ulp is <= 2^-8 relative); the abs_sum
  // term bounds the fp32 accumulation error of the tensor cores (well above what they do).
  const double rel_tol = f32 ? 1e-5 : 1.0 / 128, acc_tol = 1e-4;
  int bad = 0;
  double err2 = 0, ref2 = 0;
  for (int i = 0; i <= c.m; ++i)
    for (int64_t j = 0; j < ldy; ++j) {
      const uint32_t bits = out[static_cast<size_t>(i) * ldy + j];
      if (i == c.m || j >= c.n) {  // guard row and row padding: untouched
        if (bits != poison && bad++ < 5) ADD_FAILURE() << "wrote outside y at row " << i << " col " << j;
        continue;
      }
      const size_t at = static_cast<size_t>(i) * c.n + j;
      const double got = Decode(bits, c.y_dtype), want = ref.y[at];
      const double tol = rel_tol * std::fabs(want) + acc_tol * ref.abs_sum[at] + 1e-6;
      err2 += (got - want) * (got - want);
      ref2 += want * want;
      if (!(std::fabs(got - want) <= tol) && bad++ < 5)
        ADD_FAILURE() << "y[" << i << ", " << j << "] = " << got << ", want " << want << " (tol " << tol << ")";
    }
  EXPECT_EQ(bad, 0);
  const double rel_l2 = std::sqrt(err2 / std::max(ref2, 1e-30));
  EXPECT_LE(rel_l2, f32 ? 1e-4 : 4e-3) << "relative L2 error over the whole output";
  return out;
}

TEST(SkinnyGemmTest, EveryRowCountMatchesReference) {
  TANDEM_SKIP_WITHOUT_GPU();
  for (int m = 1; m <= kSkinnyGemmMaxM; ++m) {
    CheckCase({.m = m, .n = 100, .k = 72});
    CheckCase({.m = m, .n = 257, .k = 1000, .bias = (m % 2) == 1});
  }
}

TEST(SkinnyGemmTest, EdgeShapes) {
  TANDEM_SKIP_WITHOUT_GPU();
  for (int m : {1, 3, 8, 9, 16}) {
    CheckCase({.m = m, .n = 1, .k = 8});                    // smallest everything
    CheckCase({.m = m, .n = 37, .k = 8, .bias = true});     // k = 8: one lane of four works
    CheckCase({.m = m, .n = 130, .k = 264});                // k % 32 = 8: ragged last step
    CheckCase({.m = m, .n = 17, .k = 4104, .bias = true});  // k steps not a multiple of 8 warps
    CheckCase({.m = m, .n = 40, .k = 14336});               // the 8B down-projection k
  }
}

TEST(SkinnyGemmTest, StridedBiasAndFp32Output) {
  TANDEM_SKIP_WITHOUT_GPU();
  for (int m : {1, 2, 7, 12, 16}) {
    CheckCase({.m = m, .n = 301, .k = 512, .bias = true, .ldx_pad = 24, .ldy_pad = 5});
    CheckCase({.m = m, .n = 301, .k = 512, .ldx_pad = 8, .ldy_pad = 3, .y_dtype = DType::kF32});
    CheckCase({.m = m, .n = 96, .k = 4096, .bias = true, .y_dtype = DType::kF32});
  }
}

// Auto picks the 32-row tiling for n >= 8448; a ragged large n exercises it.
TEST(SkinnyGemmTest, LargeOddNAutoTiling) {
  TANDEM_SKIP_WITHOUT_GPU();
  for (int m : {1, 8, 16}) CheckCase({.m = m, .n = 8467, .k = 256, .bias = true});
  CheckCase({.m = 4, .n = 4099, .k = 4096});
}

// Every tiling matches the reference, and all of them agree bit for bit (each
// accumulator sees the same k-steps in the same order whatever the unroll).
TEST(SkinnyGemmTest, EveryTilingMatchesReferenceAndAgrees) {
  TANDEM_SKIP_WITHOUT_GPU();
  for (int m : {1, 5, 8, 9, 16}) {
    for (auto [n, k] : {std::pair{77, 328}, std::pair{1000, 2048}}) {
      std::vector<uint32_t> first;
      for (int t = 0; t < kNumSkinnyGemmTilings; ++t) {
        const auto tiling = static_cast<SkinnyGemmTiling>(t);
        auto out = CheckCase({.m = m, .n = n, .k = k, .bias = true, .ldy_pad = 2, .tiling = tiling});
        if (t == 0)
          first = out;
        else
          EXPECT_TRUE(out == first) << "tiling " << SkinnyGemmTilingName(tiling) << " differs from auto";
      }
    }
  }
}

// accumulate: y = old y + what the plain kernel writes, one fp32 add per element, for every
// tiling, one and two token tiles, with bias and strided rows.
TEST(SkinnyGemmTest, AccumulateAddsThePlainResultOntoY) {
  TANDEM_SKIP_WITHOUT_GPU();
  auto stream = cuda::CudaStream::Create();
  TANDEM_ASSERT_OK(stream.status());
  for (int m : {1, 5, 8, 13}) {
    const int n = 301, k = 1000, ldy = n + 3;
    std::mt19937 rng(m * 17u);
    const auto x = RandomBf16(static_cast<size_t>(m) * k, rng), w = RandomBf16(static_cast<size_t>(n) * k, rng, 0.05f);
    const auto bias = RandomBf16(n, rng, 0.5f);
    std::normal_distribution<float> dist(0.f, 2.f);
    std::vector<float> y0(static_cast<size_t>(m) * ldy);
    for (float& v : y0) v = dist(rng);
    auto dx = testing::Upload(x), dw = testing::Upload(w), db = testing::Upload(bias);
    for (int t = 0; t < kNumSkinnyGemmTilings; ++t) {
      SCOPED_TRACE("m=" + std::to_string(m) + " tiling=" + std::to_string(t));
      auto plain = testing::Upload(std::vector<float>(y0.size(), 0.f)), acc = testing::Upload(y0);
      SkinnyGemmParams p;
      p.x = dx.as<__nv_bfloat16>();
      p.w = dw.as<__nv_bfloat16>();
      p.bias = db.as<__nv_bfloat16>();
      p.y = plain.data();
      p.y_dtype = DType::kF32;
      p.m = m;
      p.n = n;
      p.k = k;
      p.ldy = ldy;
      p.tiling = static_cast<SkinnyGemmTiling>(t);
      TANDEM_ASSERT_OK(LaunchSkinnyGemm(p, stream->get()));
      p.y = acc.data();
      p.accumulate = true;
      TANDEM_ASSERT_OK(LaunchSkinnyGemm(p, stream->get()));
      const auto got = testing::Download<float>(acc, y0.size()), base = testing::Download<float>(plain, y0.size());
      int bad = 0;
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < ldy; ++j) {
          const size_t at = static_cast<size_t>(i) * ldy + j;
          const float want = j < n ? y0[at] + base[at] : y0[at];  // row padding untouched
          if (std::memcmp(&got[at], &want, 4) != 0 && bad++ < 5)
            ADD_FAILURE() << "y[" << i << ", " << j << "] = " << got[at] << ", want " << want;
        }
    }
  }
}

// silu_mul: the fused gate/up GEMM writes exactly what the plain GEMM (bf16 gate and up)
// followed by the SiLU-mul kernel writes, for every tiling, one and two token tiles, with
// and without bias, a feature count that leaves the last block partly empty.
TEST(SkinnyGemmTest, SiluMulEqualsPlainGemmThenSiluKernel) {
  TANDEM_SKIP_WITHOUT_GPU();
  auto stream = cuda::CudaStream::Create();
  TANDEM_ASSERT_OK(stream.status());
  for (int m : {1, 6, 8, 13}) {
    for (bool with_bias : {false, true}) {
      const int ffn = 152, n = 2 * ffn, k = 520;
      std::mt19937 rng(m * 31u + with_bias);
      const auto x = RandomBf16(static_cast<size_t>(m) * k, rng);
      const auto w = RandomBf16(static_cast<size_t>(n) * k, rng, 0.08f), bias = RandomBf16(n, rng, 0.5f);
      auto dx = testing::Upload(x), dw = testing::Upload(w), db = testing::Upload(bias);
      for (int t = 0; t < kNumSkinnyGemmTilings; ++t) {
        SCOPED_TRACE("m=" + std::to_string(m) + " bias=" + std::to_string(with_bias) + " tiling=" + std::to_string(t));
        auto gate_up = testing::Poisoned<uint16_t>(static_cast<size_t>(m) * n);
        auto want = testing::Poisoned<uint16_t>(static_cast<size_t>(m) * ffn);
        auto got = testing::Poisoned<uint16_t>(static_cast<size_t>(m + 1) * ffn);  // + a guard row
        SkinnyGemmParams p;
        p.x = dx.as<__nv_bfloat16>();
        p.w = dw.as<__nv_bfloat16>();
        p.bias = with_bias ? db.as<__nv_bfloat16>() : nullptr;
        p.y = gate_up.data();
        p.m = m;
        p.n = n;
        p.k = k;
        p.tiling = static_cast<SkinnyGemmTiling>(t);
        TANDEM_ASSERT_OK(LaunchSkinnyGemm(p, stream->get()));
        TANDEM_ASSERT_OK(LaunchSiluMul({gate_up.as<__nv_bfloat16>(), want.as<__nv_bfloat16>(), m, ffn}, stream->get()));
        p.y = got.data();
        p.silu_mul = true;
        TANDEM_ASSERT_OK(LaunchSkinnyGemm(p, stream->get()));
        const auto a = testing::Download<uint16_t>(got, static_cast<size_t>(m + 1) * ffn);
        const auto b = testing::Download<uint16_t>(want, static_cast<size_t>(m) * ffn);
        int bad = 0;
        for (size_t i = 0; i < a.size(); ++i) {
          const uint16_t expect = i < b.size() ? b[i] : 0xffff;  // the guard row stays poisoned
          if (a[i] != expect && bad++ < 5) ADD_FAILURE() << "out[" << i << "] = " << a[i] << ", want " << expect;
        }
      }
    }
  }
}

TEST(SkinnyGemmTest, RejectsBadArguments) {
  // No GPU needed: validation happens before any CUDA call.
  alignas(16) static uint16_t buf[4096];
  SkinnyGemmParams good;
  good.x = reinterpret_cast<const __nv_bfloat16*>(buf);
  good.w = reinterpret_cast<const __nv_bfloat16*>(buf + 512);
  good.y = buf + 2048;
  good.m = 2;
  good.n = 16;
  good.k = 64;
  EXPECT_TRUE(ValidateSkinnyGemm(good).ok());
  auto expect_invalid = [&](SkinnyGemmParams p, const char* what) {
    EXPECT_EQ(ValidateSkinnyGemm(p).code(), StatusCode::kInvalidArgument) << what;
    EXPECT_EQ(LaunchSkinnyGemm(p, nullptr).code(), StatusCode::kInvalidArgument) << what;
  };
  SkinnyGemmParams p = good;
  p.x = nullptr;
  expect_invalid(p, "null x");
  p = good;
  p.w = nullptr;
  expect_invalid(p, "null w");
  p = good;
  p.y = nullptr;
  expect_invalid(p, "null y");
  for (int m : {0, -1, 17}) {
    p = good;
    p.m = m;
    expect_invalid(p, "m out of [1, 16]");
  }
  p = good;
  p.n = 0;
  expect_invalid(p, "n = 0");
  for (int k : {0, 4, 12, -8, (1 << 24) + 8}) {
    p = good;
    p.k = k;
    expect_invalid(p, "k not a multiple of 8 in [8, 2^24]");
  }
  p = good;
  p.x = reinterpret_cast<const __nv_bfloat16*>(buf + 1);
  expect_invalid(p, "x misaligned");
  p = good;
  p.w = reinterpret_cast<const __nv_bfloat16*>(buf + 516);
  expect_invalid(p, "w misaligned (8 bytes)");
  p = good;
  p.ldx = 32;
  expect_invalid(p, "ldx < k");
  p = good;
  p.ldx = 68;
  expect_invalid(p, "ldx not a multiple of 8");
  p = good;
  p.ldy = 15;
  expect_invalid(p, "ldy < n");
  p = good;
  p.y_dtype = DType::kF16;
  expect_invalid(p, "fp16 output");
  p = good;
  p.y_dtype = DType::kF32;
  p.y = buf + 2049;
  expect_invalid(p, "fp32 y not 4-byte aligned");
  p = good;
  p.tiling = static_cast<SkinnyGemmTiling>(kNumSkinnyGemmTilings);
  expect_invalid(p, "unknown tiling");
  p = good;
  p.accumulate = true;
  expect_invalid(p, "accumulate into bf16");
  p = good;
  p.silu_mul = true;
  EXPECT_TRUE(ValidateSkinnyGemm(p).ok()) << "silu_mul, 8 features";
  p.n = 15;
  expect_invalid(p, "silu_mul with an odd n");
  p = good;
  p.silu_mul = true;
  p.y_dtype = DType::kF32;
  expect_invalid(p, "silu_mul into fp32");
  SkinnyGemmParams acc = good;
  acc.y_dtype = DType::kF32;
  acc.accumulate = true;
  EXPECT_TRUE(ValidateSkinnyGemm(acc).ok()) << "accumulate into fp32";
  p = acc;
  p.silu_mul = true;
  expect_invalid(p, "silu_mul with accumulate");
  p = good;
  p.ldx = 72;
  p.ldy = 20;
  p.bias = reinterpret_cast<const __nv_bfloat16*>(buf + 3000);
  EXPECT_TRUE(ValidateSkinnyGemm(p).ok()) << "strided with bias is valid";
}

}  // namespace
}  // namespace tandem::kernels
