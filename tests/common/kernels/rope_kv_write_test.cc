// RoPE (none / linear / llama3) + optional q/k RMSNorm + paged K/V write, against a CPU
// reference written from the Hugging Face formulas.
#include "common/kernels/rope_kv_write.h"

#include <gtest/gtest.h>

#include "common/kv_cache/kv_layout.h"
#include "tests/common/kernels/gpu_test_util.h"

namespace tandem::kernels {
namespace {

using testing::AllClose;
using testing::RandomBf16;
using testing::RoundBf16;
using testing::ToFloat;

// HF _compute_default_rope_parameters / _compute_llama3_parameters, in fp32 like HF.
float RefInvFreq(const RopeConfig& c, int j, int head_dim) {
  const float inv = 1.0f / std::pow(c.theta, static_cast<float>(2 * j) / head_dim);
  if (c.scaling == RopeScaling::kLinear) return inv / c.factor;
  if (c.scaling != RopeScaling::kLlama3) return inv;
  const float low_freq_wavelen = c.original_max_position / c.low_freq_factor;
  const float high_freq_wavelen = c.original_max_position / c.high_freq_factor;
  const float wavelen = 2.0f * static_cast<float>(M_PI) / inv;
  if (wavelen > low_freq_wavelen) return inv / c.factor;
  if (wavelen < high_freq_wavelen) return inv;
  const float smooth =
      (c.original_max_position / wavelen - c.low_freq_factor) / (c.high_freq_factor - c.low_freq_factor);
  return (1 - smooth) * inv / c.factor + smooth * inv;
}

struct RopeCase {
  int head_dim, hq, hkv, block_size;
  RopeScaling scaling;
  bool qk_norm;
};

class RopeKvWriteTest : public ::testing::TestWithParam<RopeCase> {};

TEST_P(RopeKvWriteTest, MatchesCpuReference) {
  TANDEM_SKIP_WITHOUT_GPU();
  const RopeCase c = GetParam();
  const int hd = c.head_dim, tokens = 23, num_blocks = 16;
  kv_cache::KvLayout layout{
      .num_layers = 1, .num_kv_heads = c.hkv, .head_dim = hd, .block_size = c.block_size, .num_blocks = num_blocks};
  std::mt19937 rng(hd * 7 + c.hq + static_cast<int>(c.scaling) * 3 + c.qk_norm);
  const int heads = c.hq + 2 * c.hkv, stride = heads * hd + 8;  // padded rows
  auto qkv = RandomBf16(static_cast<size_t>(tokens) * stride, rng);
  auto qkvf = ToFloat(qkv);
  auto qn = RandomBf16(hd, rng, 0.2f, 1.f), kn = RandomBf16(hd, rng, 0.2f, 1.f);
  auto qnf = ToFloat(qn), knf = ToFloat(kn);
  std::vector<int32_t> pos(tokens);
  std::vector<int64_t> slots(tokens);
  std::vector<int> perm(num_blocks * c.block_size);
  for (size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int>(i);
  std::shuffle(perm.begin(), perm.end(), rng);
  for (int t = 0; t < tokens; ++t) {
    pos[t] = t < 5 ? t : static_cast<int32_t>(rng() % 131072);
    slots[t] = (t % 7 == 6) ? -1 : perm[t];  // some tokens are not cached
  }
  RopeConfig rope{.theta = 500000.f,
                  .scaling = c.scaling,
                  .factor = 8.f,
                  .low_freq_factor = 1.f,
                  .high_freq_factor = 4.f,
                  .original_max_position = 8192.f};
  // Reference.
  const size_t cache_elems = layout.TotalBytes() / 2;
  std::vector<float> ref_q(static_cast<size_t>(tokens) * c.hq * hd);
  std::vector<uint16_t> poison_cache(cache_elems, 0xffff);
  std::vector<float> ref_cache = ToFloat(poison_cache);  // NaN where nothing is written
  for (int t = 0; t < tokens; ++t)
    for (int h = 0; h < heads; ++h) {
      std::vector<float> x(hd);
      for (int d = 0; d < hd; ++d) x[d] = qkvf[static_cast<size_t>(t) * stride + h * hd + d];
      const bool is_q = h < c.hq, is_v = h >= c.hq + c.hkv;
      if (!is_v) {
        if (c.qk_norm) {
          double ss = 0;
          for (float v : x) ss += static_cast<double>(v) * v;
          const double inv = 1.0 / std::sqrt(ss / hd + 1e-6);
          for (int d = 0; d < hd; ++d) x[d] = RoundBf16(x[d] * inv * (is_q ? qnf[d] : knf[d]));
        }
        std::vector<float> y(hd);
        for (int j = 0; j < hd / 2; ++j) {
          const float angle = static_cast<float>(pos[t]) * RefInvFreq(rope, j, hd);
          const double co = std::cos(static_cast<double>(angle));
          const double si = std::sin(static_cast<double>(angle));
          y[j] = static_cast<float>(x[j] * co - x[j + hd / 2] * si);
          y[j + hd / 2] = static_cast<float>(x[j + hd / 2] * co + x[j] * si);
        }
        x = y;
      }
      if (is_q) {
        for (int d = 0; d < hd; ++d) ref_q[(static_cast<size_t>(t) * c.hq + h) * hd + d] = x[d];
      } else if (slots[t] >= 0) {
        const int kv = is_v ? 1 : 0, kh = h - c.hq - kv * c.hkv;
        const int blk = static_cast<int>(slots[t] / c.block_size);
        const int off = static_cast<int>(slots[t] % c.block_size);
        for (int d = 0; d < hd; ++d) ref_cache[layout.ElementOffset(0, blk, kv, kh, off) + d] = x[d];
      }
    }
  auto dqkv = testing::Upload(qkv), dpos = testing::Upload(pos), dslots = testing::Upload(slots);
  auto dqn = testing::Upload(qn), dkn = testing::Upload(kn);
  auto q_out = testing::Poisoned<uint16_t>(ref_q.size());
  auto cache = testing::Poisoned<uint16_t>(cache_elems);
  RopeKvWriteParams p;
  p.qkv = dqkv.as<__nv_bfloat16>();
  p.qkv_stride = stride;
  p.positions = dpos.as<int32_t>();
  p.slot_mapping = dslots.as<int64_t>();
  p.q_out = q_out.as<__nv_bfloat16>();
  p.kv_cache = cache.as<__nv_bfloat16>();
  p.num_cache_blocks = num_blocks;
  p.q_norm_weight = c.qk_norm ? dqn.as<__nv_bfloat16>() : nullptr;
  p.k_norm_weight = c.qk_norm ? dkn.as<__nv_bfloat16>() : nullptr;
  p.norm_eps = 1e-6f;
  p.num_tokens = tokens;
  p.num_q_heads = c.hq;
  p.num_kv_heads = c.hkv;
  p.head_dim = hd;
  p.block_size = c.block_size;
  p.rope = rope;
  TANDEM_ASSERT_OK(LaunchRopeKvWrite(p, nullptr));
  EXPECT_TRUE(AllClose(testing::DownloadBf16(q_out, ref_q.size()), ref_q, 2e-2f, 1e-2f, 8e-3));
  auto got_cache = testing::DownloadBf16(cache, cache_elems);
  std::vector<float> got_written, ref_written;
  for (size_t i = 0; i < cache_elems; ++i) {
    if (std::isnan(ref_cache[i])) {
      ASSERT_TRUE(std::isnan(got_cache[i])) << "cache element " << i << " written but not mapped";
    } else {
      got_written.push_back(got_cache[i]);
      ref_written.push_back(ref_cache[i]);
    }
  }
  EXPECT_FALSE(ref_written.empty());
  EXPECT_TRUE(AllClose(got_written, ref_written, 2e-2f, 1e-2f, 8e-3));
}

INSTANTIATE_TEST_SUITE_P(Cases, RopeKvWriteTest,
                         ::testing::Values(RopeCase{128, 32, 8, 16, RopeScaling::kLlama3, false},
                                           RopeCase{128, 4, 2, 32, RopeScaling::kNone, true},
                                           RopeCase{64, 8, 8, 64, RopeScaling::kLinear, false},
                                           RopeCase{64, 6, 2, 16, RopeScaling::kLlama3, true},
                                           RopeCase{256, 4, 1, 16, RopeScaling::kNone, false},
                                           // Generic kernel (head_dim not 64/128/256), as in the tiny test models.
                                           RopeCase{16, 4, 2, 16, RopeScaling::kLlama3, true},
                                           RopeCase{96, 6, 2, 32, RopeScaling::kNone, false}));

TEST(RopeKvWriteValidationTest, RejectsBadShapes) {
  int x = 0;
  auto* b = reinterpret_cast<__nv_bfloat16*>(&x);
  RopeKvWriteParams p;
  p.qkv = b;
  p.positions = &x;
  int64_t s = 0;
  p.slot_mapping = &s;
  p.q_out = b;
  p.kv_cache = b;
  p.num_cache_blocks = 1;
  p.num_tokens = 1;
  p.num_q_heads = 3;
  p.num_kv_heads = 2;  // not a divisor
  p.head_dim = 64;
  p.block_size = 16;
  p.qkv_stride = 7 * 64;
  EXPECT_EQ(LaunchRopeKvWrite(p, nullptr).code(), StatusCode::kInvalidArgument);
  p.num_kv_heads = 1;
  p.block_size = 12;
  EXPECT_EQ(LaunchRopeKvWrite(p, nullptr).code(), StatusCode::kInvalidArgument);
  p.block_size = 16;
  p.head_dim = 95;
  p.qkv_stride = 5 * 95;
  // An odd head_dim is rejected at dispatch, before any launch.
  EXPECT_EQ(LaunchRopeKvWrite(p, nullptr).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem::kernels
