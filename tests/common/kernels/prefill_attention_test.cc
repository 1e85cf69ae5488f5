// Causal paged prefill attention (with cached prefixes) against a double-precision CPU
// reference.
#include "common/kernels/prefill_attention.h"

#include <gtest/gtest.h>

#include "tests/common/kernels/attention_test_util.h"

namespace tandem::kernels {
namespace {

using testing::AllClose;

struct PrefillCase {
  int head_dim, hq, hkv, block_size;
  std::vector<int> q_lens;
  std::vector<int> prefix_lens;  // cached tokens before the new ones
};

class PrefillAttentionTest : public ::testing::TestWithParam<PrefillCase> {};

TEST_P(PrefillAttentionTest, MatchesCpuReference) {
  TANDEM_SKIP_WITHOUT_GPU();
  const PrefillCase& c = GetParam();
  const int seqs = static_cast<int>(c.q_lens.size()), hd = c.head_dim;
  std::vector<int> ctx(seqs), cu(seqs + 1, 0);
  int max_q = 0;
  for (int s = 0; s < seqs; ++s) {
    ctx[s] = c.q_lens[s] + c.prefix_lens[s];
    cu[s + 1] = cu[s] + c.q_lens[s];
    max_q = std::max(max_q, c.q_lens[s]);
  }
  const int tokens = cu[seqs];
  std::mt19937 rng(hd * 5 + c.hq + tokens);
  auto kv = testing::MakePagedKv(ctx, c.hkv, hd, c.block_size, rng);
  auto q = testing::RandomBf16(static_cast<size_t>(tokens) * c.hq * hd, rng);
  auto qf = testing::ToFloat(q);
  const float scale = 1.f / std::sqrt(static_cast<float>(hd));
  std::vector<float> ref(qf.size());
  const int group = c.hq / c.hkv;
  for (int s = 0; s < seqs; ++s)
    for (int i = 0; i < c.q_lens[s]; ++i)
      for (int h = 0; h < c.hq; ++h) {
        const size_t off = (static_cast<size_t>(cu[s] + i) * c.hq + h) * hd;
        const int keys = c.prefix_lens[s] + i + 1;  // causal: up to and including itself
        testing::RefAttentionRow(kv, s, h / group, qf.data() + off, keys, scale, ref.data() + off);
      }
  auto dq = testing::Upload(q), dpool = testing::Upload(kv.pool);
  auto dtables = testing::Upload(kv.block_tables), dctx = testing::Upload(ctx);
  auto dcu = testing::Upload(cu);
  auto out = testing::Poisoned<uint16_t>(ref.size());
  PrefillAttentionParams p;
  p.q = dq.as<__nv_bfloat16>();
  p.kv_cache = dpool.as<__nv_bfloat16>();
  p.block_tables = dtables.as<int32_t>();
  p.cu_q_lens = dcu.as<int32_t>();
  p.context_lens = dctx.as<int32_t>();
  p.out = out.as<__nv_bfloat16>();
  p.num_seqs = seqs;
  p.num_q_heads = c.hq;
  p.num_kv_heads = c.hkv;
  p.head_dim = hd;
  p.block_size = c.block_size;
  p.max_blocks_per_seq = kv.max_blocks_per_seq;
  p.max_q_len = max_q;
  p.softmax_scale = scale;
  TANDEM_ASSERT_OK(LaunchPrefillAttention(p, nullptr));
  EXPECT_TRUE(AllClose(testing::DownloadBf16(out, ref.size()), ref, 1.5e-2f, 3e-2f, 1.5e-2));
}

INSTANTIATE_TEST_SUITE_P(Cases, PrefillAttentionTest,
                         ::testing::Values(PrefillCase{128, 8, 2, 16, {1, 64, 100, 257}, {0, 0, 0, 0}},
                                           PrefillCase{128, 4, 4, 32, {37, 130}, {500, 64}},  // prefix hits
                                           PrefillCase{64, 8, 2, 64, {200, 1, 65}, {0, 1000, 3}},
                                           PrefillCase{64, 6, 3, 16, {513}, {129}},
                                           PrefillCase{128, 4, 1, 16, {1024}, {0}}));

TEST(PrefillAttentionValidationTest, RejectsBadShapes) {
  int x = 0;
  PrefillAttentionParams p;
  p.q = p.kv_cache = reinterpret_cast<__nv_bfloat16*>(&x);
  p.out = reinterpret_cast<__nv_bfloat16*>(&x);
  p.block_tables = p.cu_q_lens = p.context_lens = &x;
  p.num_seqs = 1;
  p.num_q_heads = 4;
  p.num_kv_heads = 3;
  p.head_dim = 128;
  p.block_size = 16;
  p.max_blocks_per_seq = 1;
  p.max_q_len = 1;
  p.softmax_scale = 0.1f;
  EXPECT_EQ(LaunchPrefillAttention(p, nullptr).code(), StatusCode::kInvalidArgument);
  p.num_kv_heads = 2;
  p.head_dim = 80;
  EXPECT_EQ(LaunchPrefillAttention(p, nullptr).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem::kernels
