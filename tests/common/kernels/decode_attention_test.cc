// Paged decode attention (GQA, split-KV) against a double-precision CPU reference.
#include "common/kernels/decode_attention.h"

#include <gtest/gtest.h>

#include "tests/common/kernels/attention_test_util.h"

namespace tandem::kernels {
namespace {

using testing::AllClose;

struct DecodeCase {
  int head_dim, hq, hkv, block_size;
  std::vector<int> context_lens;
  int forced_splits;  // 0: use the plan
  int stages = 0;     // 0: the kernel's default pipeline depth
  bool persistent = false;
};

// Many short sequences: more work items than resident blocks, so the persistent kernel's
// pipeline crosses item boundaries.
std::vector<int> ManyLens() {
  std::vector<int> lens;
  std::mt19937 rng(11);
  for (int i = 0; i < 300; ++i) lens.push_back(1 + static_cast<int>(rng() % 200));
  return lens;
}

class DecodeAttentionTest : public ::testing::TestWithParam<DecodeCase> {};

TEST_P(DecodeAttentionTest, MatchesCpuReference) {
  TANDEM_SKIP_WITHOUT_GPU();
  const DecodeCase& c = GetParam();
  const int seqs = static_cast<int>(c.context_lens.size()), hd = c.head_dim;
  std::mt19937 rng(hd + c.hq * 3 + c.block_size * 11 + seqs);
  auto kv = testing::MakePagedKv(c.context_lens, c.hkv, hd, c.block_size, rng);
  auto q = testing::RandomBf16(static_cast<size_t>(seqs) * c.hq * hd, rng);
  auto qf = testing::ToFloat(q);
  const float scale = 1.f / std::sqrt(static_cast<float>(hd));
  std::vector<float> ref(qf.size());
  const int group = c.hq / c.hkv;
  for (int s = 0; s < seqs; ++s)
    for (int h = 0; h < c.hq; ++h) {
      const size_t off = (static_cast<size_t>(s) * c.hq + h) * hd;
      testing::RefAttentionRow(kv, s, h / group, qf.data() + off, c.context_lens[s], scale,
                               ref.data() + off);
    }
  int max_len = 0;
  for (int len : c.context_lens) max_len = std::max(max_len, len);
  auto dq = testing::Upload(q), dpool = testing::Upload(kv.pool);
  auto dtables = testing::Upload(kv.block_tables), dlens = testing::Upload(c.context_lens);
  auto out = testing::Poisoned<uint16_t>(ref.size());
  DecodeAttentionParams p;
  p.q = dq.as<__nv_bfloat16>();
  p.kv_cache = dpool.as<__nv_bfloat16>();
  p.block_tables = dtables.as<int32_t>();
  p.context_lens = dlens.as<int32_t>();
  p.out = out.as<__nv_bfloat16>();
  p.num_seqs = seqs;
  p.num_q_heads = c.hq;
  p.num_kv_heads = c.hkv;
  p.head_dim = hd;
  p.block_size = c.block_size;
  p.max_blocks_per_seq = kv.max_blocks_per_seq;
  p.max_context_len = max_len;
  p.softmax_scale = scale;
  auto plan = PlanDecodeAttention(p, 132);
  TANDEM_ASSERT_OK(plan.status());
  p.num_splits = c.forced_splits > 0 ? c.forced_splits : plan->num_splits;
  p.num_stages = c.stages;
  p.persistent = c.persistent;
  const size_t ws_bytes = static_cast<size_t>(seqs) * c.hq * p.num_splits * (hd + 1) * 4;
  auto ws = testing::Poisoned<float>(ws_bytes / 4 + 1);
  p.workspace = ws.as<float>();
  TANDEM_ASSERT_OK(LaunchDecodeAttention(p, nullptr));
  EXPECT_TRUE(AllClose(testing::DownloadBf16(out, ref.size()), ref, 1e-2f, 2e-2f, 1e-2))
      << "splits " << p.num_splits << " stages " << p.num_stages << " persistent " << p.persistent;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, DecodeAttentionTest,
    ::testing::Values(
        DecodeCase{128, 32, 8, 16, {1, 17, 64, 65, 300, 1000, 2049}, 0},
        DecodeCase{128, 32, 8, 16, {1, 17, 64, 65, 300, 1000, 2049}, 1},
        DecodeCase{128, 32, 8, 16, {5, 129, 700}, 7},  // empty splits for the short sequences
        DecodeCase{64, 8, 8, 32, {33, 2, 512, 4000}, 0},
        DecodeCase{128, 16, 2, 64, {64, 63, 1500}, 0},
        DecodeCase{64, 12, 4, 16, {100, 1, 257}, 3},
        DecodeCase{128, 10, 2, 32, {90, 3000}, 0},
        DecodeCase{128, 8, 4, 32, {0, 40}, 2},  // an empty sequence gives zeros
        DecodeCase{128, 32, 2, 16, {1000, 77}, 0},  // group 16: all mma rows used
        DecodeCase{128, 32, 8, 16, {1, 300, 2049}, 0, 2},
        DecodeCase{64, 8, 2, 32, {70, 1999}, 3, 4},
        DecodeCase{64, 4, 2, 64, {8192}, 0},
        DecodeCase{128, 32, 8, 16, {1, 17, 64, 65, 300, 1000, 2049}, 0, 0, true},
        DecodeCase{64, 12, 4, 16, {100, 1, 257}, 3, 0, true},
        DecodeCase{128, 8, 4, 32, {0, 40}, 2, 0, true},
        DecodeCase{128, 32, 2, 16, {1000, 77}, 0, 0, true},
        DecodeCase{128, 32, 8, 16, ManyLens(), 0, 0, true},
        DecodeCase{128, 32, 8, 16, ManyLens(), 0}));

// A Llama-3-8B layer (32 query heads, 8 KV heads of 128, blocks of 16), for planning.
DecodeAttentionParams LlamaLayer() {
  DecodeAttentionParams p;
  p.num_q_heads = 32;
  p.num_kv_heads = 8;
  p.head_dim = 128;
  p.block_size = 16;
  p.softmax_scale = 0.1f;
  return p;
}

TEST(DecodeAttentionPlanTest, SplitsOnlyWhenTheBatchIsSmall) {
  DecodeAttentionParams p = LlamaLayer();
  p.num_seqs = 1;
  p.max_context_len = 32768;
  p.max_blocks_per_seq = 2048;
  auto small = PlanDecodeAttention(p, 132);
  ASSERT_TRUE(small.ok());
  EXPECT_GT(small->num_splits, 16);
  EXPECT_GT(small->workspace_bytes, 0u);
  p.num_seqs = 256;
  auto big = PlanDecodeAttention(p, 132);
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(big->num_splits, 1);
  EXPECT_EQ(big->workspace_bytes, 0u);
  p.head_dim = 96;
  EXPECT_EQ(PlanDecodeAttention(p, 132).status().code(), StatusCode::kInvalidArgument);
  p.head_dim = 128;
  p.max_blocks_per_seq = 10;  // too small for max_context_len
  EXPECT_EQ(PlanDecodeAttention(p, 132).status().code(), StatusCode::kInvalidArgument);
}

// The split count fills the waves of resident blocks (2 per SM for head dim 128 at the
// default depth: the H200's occupancy, and the planner's guess without a GPU). 8 x 32K
// used to get 9 splits: 576 blocks in 3 waves of 264, the last one 0.18 full.
TEST(DecodeAttentionPlanTest, SplitsFillWholeWaves) {
  DecodeAttentionParams p = LlamaLayer();
  auto splits = [&](int seqs, int ctx) {
    p.num_seqs = seqs;
    p.max_context_len = ctx;
    p.max_blocks_per_seq = (ctx + 15) / 16;
    auto plan = PlanDecodeAttention(p, 132);
    TANDEM_CHECK_OK(plan.status());
    return plan->num_splits;
  };
  EXPECT_EQ(splits(8, 32768), 4);   // 256 blocks: one wave of 264, 0.97 full
  EXPECT_EQ(splits(8, 8192), 4);
  EXPECT_EQ(splits(8, 1040), 4);    // was 5: 320 blocks, 2 waves 0.61 full
  EXPECT_EQ(splits(64, 4096), 1);   // 512 blocks, 2 waves 0.97 full; no merge pass
  EXPECT_EQ(splits(1, 1040), 5);    // 17 tiles: at least 4 tiles per split
  EXPECT_EQ(splits(1, 32768), 33);  // 264 blocks: exactly one wave
}

}  // namespace
}  // namespace tandem::kernels
