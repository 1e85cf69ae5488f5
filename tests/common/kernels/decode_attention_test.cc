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
};

// Many short sequences: more thread blocks than fit the GPU at once (several waves).
std::vector<int> ManyLens() {
  std::vector<int> lens;
  std::mt19937 rng(11);
  for (int i = 0; i < 300; ++i) lens.push_back(1 + static_cast<int>(rng() % 200));
  return lens;
}

// The attention's shapes and its inputs on the device (q and out set by the caller);
// max_context_len is the longest of `lens`, the scale 1/sqrt(head_dim).
DecodeAttentionParams LayerParams(const testing::PagedKv& kv, int num_q_heads, const std::vector<int>& lens,
                                  const cuda::DeviceBuffer& pool, const cuda::DeviceBuffer& tables,
                                  const cuda::DeviceBuffer& dlens) {
  DecodeAttentionParams p;
  p.kv_cache = pool.as<__nv_bfloat16>();
  p.block_tables = tables.as<int32_t>();
  p.context_lens = dlens.as<int32_t>();
  p.num_seqs = static_cast<int>(lens.size());
  p.num_q_heads = num_q_heads;
  p.num_kv_heads = kv.layout.num_kv_heads;
  p.head_dim = kv.layout.head_dim;
  p.block_size = kv.layout.block_size;
  p.max_blocks_per_seq = kv.max_blocks_per_seq;
  p.max_context_len = lens.empty() ? 0 : *std::max_element(lens.begin(), lens.end());
  p.softmax_scale = 1.f / std::sqrt(static_cast<float>(p.head_dim));
  return p;
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
      testing::RefAttentionRow(kv, s, h / group, qf.data() + off, c.context_lens[s], scale, ref.data() + off);
    }
  auto dq = testing::Upload(q), dpool = testing::Upload(kv.pool);
  auto dtables = testing::Upload(kv.block_tables), dlens = testing::Upload(c.context_lens);
  auto out = testing::Poisoned<uint16_t>(ref.size());
  DecodeAttentionParams p = LayerParams(kv, c.hq, c.context_lens, dpool, dtables, dlens);
  p.q = dq.as<__nv_bfloat16>();
  p.out = out.as<__nv_bfloat16>();
  auto plan = PlanDecodeAttention(p, 132);
  TANDEM_ASSERT_OK(plan.status());
  p.num_splits = c.forced_splits > 0 ? c.forced_splits : plan->num_splits;
  p.num_stages = c.stages;
  auto ws = testing::Poisoned<float>(DecodeAttentionWorkspaceBytes(p) / 4 + 1);
  p.workspace = ws.as<float>();
  TANDEM_ASSERT_OK(LaunchDecodeAttention(p, nullptr));
  EXPECT_TRUE(AllClose(testing::DownloadBf16(out, ref.size()), ref, 1e-2f, 2e-2f, 1e-2))
      << "splits " << p.num_splits << " stages " << p.num_stages;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, DecodeAttentionTest,
    ::testing::Values(DecodeCase{128, 32, 8, 16, {1, 17, 64, 65, 300, 1000, 2049}, 0},
                      DecodeCase{128, 32, 8, 16, {1, 17, 64, 65, 300, 1000, 2049}, 1},
                      DecodeCase{128, 32, 8, 16, {5, 129, 700}, 7},  // empty splits for the short sequences
                      DecodeCase{64, 8, 8, 32, {33, 2, 512, 4000}, 0}, DecodeCase{128, 16, 2, 64, {64, 63, 1500}, 0},
                      DecodeCase{64, 12, 4, 16, {100, 1, 257}, 3}, DecodeCase{128, 10, 2, 32, {90, 3000}, 0},
                      DecodeCase{128, 8, 4, 32, {0, 40}, 2},      // an empty sequence gives zeros
                      DecodeCase{128, 32, 2, 16, {1000, 77}, 0},  // group 16: all mma rows used
                      DecodeCase{128, 32, 8, 16, {1, 300, 2049}, 0, 2}, DecodeCase{64, 8, 2, 32, {70, 1999}, 3, 4},
                      DecodeCase{64, 4, 2, 64, {8192}, 0}, DecodeCase{128, 32, 8, 16, ManyLens(), 0},
                      DecodeCase{128, 32, 2, 16, {1000, 77, 0}, 8},  // group 16, an empty sequence
                      DecodeCase{64, 8, 4, 16, {5, 129, 700, 3000}, 12}, DecodeCase{128, 32, 8, 32, {2049, 31}, 9, 4},
                      // Split counts around the merge's one-round limits (16 and 64).
                      DecodeCase{128, 32, 8, 16, {1100, 9}, 17}, DecodeCase{128, 32, 8, 16, {3000, 50}, 40},
                      DecodeCase{64, 8, 4, 16, {4100}, 64}, DecodeCase{64, 8, 4, 16, {5000, 3}, 65}));

// The decode kernel with RoPE + K/V write fused in against the two kernels it replaces
// (LaunchRopeKvWrite, then the attention reading q_out and the cache): the same output and
// the same cache, bit for bit (both go through rope_util.cuh, and the attention sees the
// same q and K/V bits).
struct FusedCase {
  int head_dim, hq, hkv, block_size;
  std::vector<int> context_lens;  // incl. the new token; 0: a padding sequence (slot -1)
  int forced_splits;              // 0: the plan's
  bool qk_norm;
};

class FusedRopeDecodeTest : public ::testing::TestWithParam<FusedCase> {};

TEST_P(FusedRopeDecodeTest, MatchesRopeThenAttention) {
  TANDEM_SKIP_WITHOUT_GPU();
  const FusedCase& c = GetParam();
  const int seqs = static_cast<int>(c.context_lens.size()), hd = c.head_dim;
  std::mt19937 rng(hd * 5 + c.hq + c.block_size * 7 + seqs + c.forced_splits);
  auto kv = testing::MakePagedKv(c.context_lens, c.hkv, hd, c.block_size, rng);
  const int stride = (c.hq + 2 * c.hkv) * hd + 8;  // padded rows, as a strided GEMM output
  auto qkv = testing::RandomBf16(static_cast<size_t>(seqs) * stride, rng);
  auto qn = testing::RandomBf16(hd, rng, 0.2f, 1.f), kn = testing::RandomBf16(hd, rng, 0.2f, 1.f);
  std::vector<int32_t> pos(seqs);
  std::vector<int64_t> slots(seqs);
  for (int s = 0; s < seqs; ++s) {
    const int len = c.context_lens[s];
    pos[s] = std::max(len - 1, 0);
    slots[s] = len == 0 ? -1
                        : static_cast<int64_t>(kv.block_tables[s * kv.max_blocks_per_seq + (len - 1) / c.block_size]) *
                                  c.block_size +
                              (len - 1) % c.block_size;
  }
  auto dqkv = testing::Upload(qkv), dpos = testing::Upload(pos), dslots = testing::Upload(slots);
  auto dqn = testing::Upload(qn), dkn = testing::Upload(kn);
  auto dtables = testing::Upload(kv.block_tables), dlens = testing::Upload(c.context_lens);
  auto pool_two = testing::Upload(kv.pool), pool_fused = testing::Upload(kv.pool);
  const size_t out_elems = static_cast<size_t>(seqs) * c.hq * hd;
  auto q = testing::Poisoned<uint16_t>(out_elems);
  auto out_two = testing::Poisoned<uint16_t>(out_elems), out_fused = testing::Poisoned<uint16_t>(out_elems);

  RopeKvWriteParams r;
  r.qkv = dqkv.as<__nv_bfloat16>();
  r.qkv_stride = stride;
  r.positions = dpos.as<int32_t>();
  r.slot_mapping = dslots.as<int64_t>();
  r.q_out = q.as<__nv_bfloat16>();
  r.kv_cache = pool_two.as<__nv_bfloat16>();
  r.num_cache_blocks = kv.layout.num_blocks;
  r.q_norm_weight = c.qk_norm ? dqn.as<__nv_bfloat16>() : nullptr;
  r.k_norm_weight = c.qk_norm ? dkn.as<__nv_bfloat16>() : nullptr;
  r.num_tokens = seqs;
  r.num_q_heads = c.hq;
  r.num_kv_heads = c.hkv;
  r.head_dim = hd;
  r.block_size = c.block_size;
  r.rope = RopeConfig{.theta = 500000.f, .scaling = RopeScaling::kLlama3, .factor = 8.f};

  DecodeAttentionParams p = LayerParams(kv, c.hq, c.context_lens, pool_two, dtables, dlens);
  p.q = q.as<__nv_bfloat16>();
  p.out = out_two.as<__nv_bfloat16>();
  auto plan = PlanDecodeAttention(p, 132);
  TANDEM_ASSERT_OK(plan.status());
  p.num_splits = c.forced_splits > 0 ? c.forced_splits : plan->num_splits;
  auto ws = testing::Poisoned<float>(DecodeAttentionWorkspaceBytes(p) / 4 + 1);
  p.workspace = ws.as<float>();
  TANDEM_ASSERT_OK(LaunchRopeKvWrite(r, nullptr));
  TANDEM_ASSERT_OK(LaunchDecodeAttention(p, nullptr));

  DecodeAttentionParams f = p;
  f.q = nullptr;
  f.kv_cache = pool_fused.as<__nv_bfloat16>();
  f.out = out_fused.as<__nv_bfloat16>();
  f.rope = r;
  f.rope.kv_cache = pool_fused.as<__nv_bfloat16>();
  TANDEM_ASSERT_OK(LaunchDecodeAttention(f, nullptr));

  const auto two = testing::Download<uint16_t>(out_two, out_elems);
  const auto fused = testing::Download<uint16_t>(out_fused, out_elems);
  EXPECT_EQ(two, fused) << "attention output, splits " << p.num_splits;
  const auto cache_two = testing::Download<uint16_t>(pool_two, kv.pool.size());
  const auto cache_fused = testing::Download<uint16_t>(pool_fused, kv.pool.size());
  EXPECT_EQ(cache_two, cache_fused) << "K/V cache after the step";
  EXPECT_NE(cache_fused, kv.pool) << "the new tokens' K/V were written";

  // late_next only moves the next kernel's launch: the same bits.
  auto pool_late = testing::Upload(kv.pool);
  auto out_late = testing::Poisoned<uint16_t>(out_elems);
  DecodeAttentionParams late = f;
  late.late_next = true;
  late.kv_cache = pool_late.as<__nv_bfloat16>();
  late.rope.kv_cache = pool_late.as<__nv_bfloat16>();
  late.out = out_late.as<__nv_bfloat16>();
  TANDEM_ASSERT_OK(LaunchDecodeAttention(late, nullptr));
  EXPECT_EQ(testing::Download<uint16_t>(out_late, out_elems), fused) << "late_next: attention output";
  EXPECT_EQ(testing::Download<uint16_t>(pool_late, kv.pool.size()), cache_fused) << "late_next: K/V cache";

  f.rope.kv_cache = pool_two.as<__nv_bfloat16>();  // another pool than the attention's
  EXPECT_EQ(LaunchDecodeAttention(f, nullptr).code(), StatusCode::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, FusedRopeDecodeTest,
    ::testing::Values(FusedCase{128, 32, 8, 16, {1, 17, 64, 65, 300, 1000, 2049}, 0, false},
                      FusedCase{128, 32, 8, 16, {1025}, 0, false},           // b = 1: the plan's 9 splits
                      FusedCase{128, 32, 8, 16, {5, 129, 0, 700}, 7, true},  // empty splits, a padding row
                      FusedCase{64, 12, 4, 32, {100, 1, 257, 4000}, 12, true},
                      FusedCase{128, 32, 2, 64, {1000, 77}, 1, false},  // group 16, one split
                      FusedCase{64, 8, 8, 16, {64, 63, 1500}, 3, false}));

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
  p.max_blocks_per_seq = 2048;
  p.num_q_heads = p.num_kv_heads = 1 << 16;  // blocks of 64: 2 GiB per cache block
  p.block_size = 64;
  EXPECT_EQ(PlanDecodeAttention(p, 132).status().code(), StatusCode::kInvalidArgument);
  p.num_q_heads = p.num_kv_heads = (1 << 16) - 1;  // just under
  EXPECT_TRUE(PlanDecodeAttention(p, 132).ok());
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
  EXPECT_EQ(splits(8, 32768), 4);  // 256 blocks: one wave of 264, 0.97 full
  EXPECT_EQ(splits(8, 8192), 4);
  EXPECT_EQ(splits(8, 1040), 4);   // was 5: 320 blocks, 2 waves 0.61 full
  EXPECT_EQ(splits(64, 4096), 1);  // 512 blocks, 2 waves 0.97 full; no merge pass
  EXPECT_EQ(splits(1, 1040), 17);  // 17 tiles: one tile per split at most
  EXPECT_EQ(splits(1, 160), 3);
  EXPECT_EQ(splits(1, 32768), 33);  // 264 blocks: exactly one wave
}

}  // namespace
}  // namespace tandem::kernels
