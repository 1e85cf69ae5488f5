// The fused decode step (CudaBackend::FusedDecodeStep: the whole step as one persistent
// kernel, common/kernels/decode_step.h) against the op-by-op CUDA forward of the same step,
// which the other tests check against the CPU fp32 backend and Hugging Face:
//  - model shapes that exercise its paths: head_dim 128 and 64, GQA groups 1..8, a qkv
//    bias (Qwen2, tied embeddings), q/k norms (Qwen3), block sizes 8..64, vocabularies and
//    widths that leave partial row tiles and partial weight chunks;
//  - decode batches of 1..8 sequences whose contexts run from 1 token (the new one only)
//    to 1.5K (many KV stages and splits), and batches padded with BatchPlan's padding
//    sequences;
//  - logits within bf16 rounding of the op-by-op step (2e-2 of max|logit|, the same top-1
//    except at near-ties); the new tokens' K/V within the same bound; every other byte of
//    the KV pool untouched; the same step twice gives the same bits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <set>

#include "common/base/dtype.h"
#include "tests/common/runtime/cuda_test/cuda_test_util.h"
#include "tests/common/runtime/fake_weights.h"

namespace tandem::runtime::testing {
namespace {

constexpr double kMaxRelError = 2e-2;
constexpr double kTie = 2e-2;

struct Shape {
  std::string name, family;
  int hidden, heads, kv_heads, head_dim, ffn, layers, vocab, block_size;
};

model::ModelConfig ConfigOf(const Shape& s) {
  model::ModelConfig c = SmallConfig(s.family);
  c.hidden_size = s.hidden;
  c.num_heads = s.heads;
  c.num_kv_heads = s.kv_heads;
  c.head_dim = s.head_dim;
  c.intermediate_size = s.ffn;
  c.num_layers = s.layers;
  c.vocab_size = s.vocab;
  c.max_position_embeddings = 4096;
  return c;
}

std::vector<Shape> Shapes() {
  return {
      // Llama-3 shape in small: head_dim 128, group 4, llama3 RoPE scaling.
      {"llama_hd128", "llama", 1024, 8, 2, 128, 2816, 3, 1000, 16},
      // Group 8 (the largest the kernel takes), head_dim 64, blocks of 32.
      {"llama_hd64_group8", "llama", 512, 16, 2, 64, 1536, 2, 777, 32},
      // qkv bias and tied embeddings; blocks of 8; ffn not a multiple of the 512-column chunk.
      {"qwen2_bias", "qwen2", 512, 8, 4, 64, 1120, 2, 999, 8},
      // q/k norm, group 3, head_dim 128, blocks of 64.
      {"qwen3_qk_norm", "qwen3", 768, 12, 4, 128, 2048, 2, 1024, 64},
      // Multi-head attention (group 1), hidden not a multiple of the chunk.
      {"mistral_mha", "mistral", 352, 11, 11, 64, 704, 2, 500, 16},
  };
}

// A backend with the fused decode step on (it is off by default).
std::unique_ptr<CudaBackend> MakeFusedBackend() {
  CudaBackendOptions options;
  options.fused_decode = true;
  auto b = CudaBackend::Create(options);
  TANDEM_CHECK(b.ok()) << b.status().ToString();
  return std::move(b).value();
}

std::vector<TokenId> Tokens(int n, int seed, int vocab) {
  std::vector<TokenId> t(n);
  for (int i = 0; i < n; ++i) t[i] = (seed * 7919 + i * 31 + i * i) % vocab;
  return t;
}

struct Seq {
  std::vector<BlockId> table;
  int len = 0;  // tokens in the cache
};

// The pool, as bf16 bits.
std::vector<uint16_t> Pool(CudaBackend& b, const PagedKvCache& cache) {
  std::vector<uint16_t> host(cache.pool().NumBytes() / 2);
  TANDEM_CHECK_OK(b.CopyToHost(cache.pool(), host.data(), host.size() * 2));
  return host;
}

class FusedDecodeTest : public ::testing::TestWithParam<Shape> {};

TEST_P(FusedDecodeTest, MatchesOpByOpStep) {
  TANDEM_SKIP_WITHOUT_GPU();
  const Shape& shape = GetParam();
  const model::ModelConfig config = ConfigOf(shape);
  FakeWeights weights(config, 17, DType::kBF16);
  auto b = MakeFusedBackend();
  const int bs = shape.block_size;
  const std::vector<int> prompt_lens = {1, 5, 17, 64, 100, 301, 700, 1500};
  const int steps = 6;
  int num_blocks = 0;
  for (int len : prompt_lens) num_blocks += (len + steps + bs - 1) / bs + 1;
  ModelOn m(b.get(), config, weights, bs, num_blocks + 3, /*max_num_tokens=*/4096);
  ASSERT_GT(b->FusedDecodeWorkspaceBytes(config, m.cache->layout(), 4096), 0u) << "shape not taken";
  const size_t v = config.vocab_size;
  const kv_cache::KvLayout& layout = m.cache->layout();

  // Prefill every sequence in one step (op by op: not a decode step). Blocks are handed
  // out in reverse order so that tables are not contiguous.
  std::vector<Seq> seqs(prompt_lens.size());
  int next_block = num_blocks + 2;
  std::vector<std::vector<TokenId>> prompts;
  std::vector<SeqChunk> prefill;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const int blocks = (prompt_lens[i] + steps + bs - 1) / bs;
    for (int k = 0; k < blocks; ++k) seqs[i].table.push_back(next_block--);
    prompts.push_back(Tokens(prompt_lens[i], static_cast<int>(i), static_cast<int>(v)));
  }
  for (size_t i = 0; i < seqs.size(); ++i) {
    prefill.push_back({.tokens = prompts[i], .start_position = 0, .block_table = seqs[i].table});
    seqs[i].len = prompt_lens[i];
  }
  m.Run(prefill);

  // Decode steps of 8, 3, 1, 8, 5, 2 sequences (the longest first in some, last in others).
  const std::vector<std::vector<int>> batches = {{0, 1, 2, 3, 4, 5, 6, 7}, {7, 0, 3}, {6},
                                                 {3, 1, 4, 0, 5, 2, 7, 6}, {2, 4, 6, 1, 7}, {5, 0}};
  double worst_logits = 0, worst_kv = 0;
  for (int step = 0; step < steps; ++step) {
    std::vector<TokenId> tokens(batches[step].size());
    std::vector<SeqChunk> chunks;
    std::set<std::pair<int, int>> new_slots;  // (block, offset)
    for (size_t j = 0; j < batches[step].size(); ++j) {
      const Seq& s = seqs[batches[step][j]];
      tokens[j] = static_cast<TokenId>((step * 131 + j * 17 + 3) % v);
      chunks.push_back({.tokens = {&tokens[j], 1}, .start_position = s.len, .block_table = s.table,
                        .want_logits = true});
      new_slots.insert({s.table[s.len / bs], s.len % bs});
    }
    b->set_fused_decode(false);
    const std::vector<float> ref = m.Run(chunks);
    const std::vector<uint16_t> ref_pool = Pool(*b, *m.cache);
    b->set_fused_decode(true);
    const std::vector<float> got = m.Run(chunks);
    const std::vector<uint16_t> got_pool = Pool(*b, *m.cache);
    const std::vector<float> again = m.Run(chunks);
    ASSERT_EQ(got.size(), ref.size());
    EXPECT_EQ(0, std::memcmp(got.data(), again.data(), got.size() * 4)) << "step " << step << " not deterministic";
    for (size_t r = 0; r < chunks.size(); ++r) {
      const double err = RowRelError(got.data() + r * v, ref.data() + r * v, v);
      worst_logits = std::max(worst_logits, err);
      EXPECT_LE(err, kMaxRelError) << "step " << step << " row " << r;
      EXPECT_TRUE(SameTop1OrTie(got.data() + r * v, ref.data() + r * v, v, kTie)) << "step " << step << " row " << r;
    }
    // The pool: the new tokens' rows close to the op-by-op step's, every other byte equal.
    const int64_t hd = layout.head_dim, row_elems = hd;
    int64_t other_diffs = 0;
    for (int64_t e = 0; e < static_cast<int64_t>(ref_pool.size()); e += row_elems) {
      // Row e / hd of [layers, blocks, 2, kv_heads, bs, hd].
      const int64_t row = e / hd;
      const int off = static_cast<int>(row % bs);
      const int64_t block = row / bs / layout.num_kv_heads / 2 % layout.num_blocks;
      if (new_slots.count({static_cast<int>(block), off}) == 0) {
        other_diffs += std::memcmp(ref_pool.data() + e, got_pool.data() + e, row_elems * 2) != 0;
        continue;
      }
      double diff = 0, mag = 0;
      for (int64_t d = 0; d < row_elems; ++d) {
        const double x = BF16ToF32(ref_pool[e + d]), y = BF16ToF32(got_pool[e + d]);
        diff = std::max(diff, std::abs(x - y));
        mag = std::max(mag, std::abs(x));
      }
      worst_kv = std::max(worst_kv, mag > 0 ? diff / mag : diff);
    }
    EXPECT_EQ(other_diffs, 0) << "step " << step << ": the fused step wrote K/V rows it does not own";
    for (int i : batches[step]) ++seqs[i].len;
  }
  EXPECT_LE(worst_kv, kMaxRelError);
  std::printf("%s fused vs op-by-op: max relative error logits %.3g, new K/V %.3g\n", shape.name.c_str(),
              worst_logits, worst_kv);
}

INSTANTIATE_TEST_SUITE_P(Shapes, FusedDecodeTest, ::testing::ValuesIn(Shapes()),
                         [](const auto& info) { return info.param.name; });

// A model with BatchPlan's padding (decode batches rounded up to 1, 2, 4, 8): padding
// sequences attend to block 0 and write nothing; the real rows match the op-by-op step.
TEST(FusedDecodeTest, PaddedBatchesAndGraphs) {
  TANDEM_SKIP_WITHOUT_GPU();
  const model::ModelConfig config = ConfigOf(Shapes()[0]);
  FakeWeights weights(config, 5, DType::kBF16);
  auto b = MakeFusedBackend();
  RuntimeOptions options;
  options.kv_block_size = 16;
  options.max_num_tokens = 256;
  options.max_num_seqs = 16;
  options.max_logits_rows = 16;
  options.pad_decode_batches = true;
  auto model = LlamaModel::Create(config, weights, b.get(), options);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  auto cache = PagedKvCache::Create(b.get(), (*model)->KvLayoutFor(64));
  ASSERT_TRUE(cache.ok());
  const size_t v = config.vocab_size;
  std::vector<std::vector<BlockId>> tables = {{1, 2, 3}, {4, 5}, {6, 7, 8, 9}};
  std::vector<int> lens = {33, 20, 50};
  std::vector<SeqChunk> prefill;
  std::vector<std::vector<TokenId>> prompts;
  for (size_t i = 0; i < tables.size(); ++i) prompts.push_back(Tokens(lens[i], static_cast<int>(i) + 9, v));
  for (size_t i = 0; i < tables.size(); ++i)
    prefill.push_back({.tokens = prompts[i], .start_position = 0, .block_table = tables[i]});
  ASSERT_TRUE((*model)->Forward(prefill, *cache).ok());
  auto run = [&](const std::vector<SeqChunk>& chunks, bool fused, bool graph) {
    b->set_fused_decode(fused);
    if (graph) TANDEM_CHECK_OK(b->BeginStep(true));
    auto logits = (*model)->Forward(chunks, *cache);
    TANDEM_CHECK(logits.ok()) << logits.status().ToString();
    if (graph) TANDEM_CHECK_OK(b->EndStep());
    std::vector<float> host(logits->NumElements());
    TANDEM_CHECK_OK(b->CopyToHost(*logits, host.data(), host.size() * 4));
    return host;
  };
  double worst = 0;
  for (int step = 0; step < 4; ++step) {
    std::vector<TokenId> tokens(3);
    std::vector<SeqChunk> chunks;
    for (int i = 0; i < 3; ++i) {  // 3 sequences: padded to 4
      tokens[i] = static_cast<TokenId>((step * 53 + i * 11) % v);
      chunks.push_back({.tokens = {&tokens[i], 1}, .start_position = lens[i], .block_table = tables[i],
                        .want_logits = true});
    }
    const std::vector<float> ref = run(chunks, false, false);
    const std::vector<float> eager = run(chunks, true, false);
    const std::vector<float> graph = run(chunks, true, true);
    for (int r = 0; r < 3; ++r) {
      for (const std::vector<float>* got : {&eager, &graph}) {
        const double err = RowRelError(got->data() + r * v, ref.data() + r * v, v);
        worst = std::max(worst, err);
        EXPECT_LE(err, kMaxRelError) << "step " << step << " row " << r;
        EXPECT_TRUE(SameTop1OrTie(got->data() + r * v, ref.data() + r * v, v, kTie));
      }
    }
    for (int i = 0; i < 3; ++i) ++lens[i];
  }
  EXPECT_GE(b->graphs_captured(), 1);
  std::printf("padded batches (eager and graph) vs op-by-op: max relative error %.3g\n", worst);
}

// What the fused step does not take: shapes outside the kernel (head_dim 16, GQA group
// 16), batches of more than 8 sequences, the option turned off (the default). Those
// steps run op by op.
TEST(FusedDecodeTest, DeclinesWhatItDoesNotTake) {
  TANDEM_SKIP_WITHOUT_GPU();
  auto b = MakeFusedBackend();
  auto layout_of = [](const model::ModelConfig& c) {
    return kv_cache::KvLayout{.num_layers = c.num_layers, .num_kv_heads = c.num_kv_heads, .head_dim = c.head_dim,
                              .block_size = 16, .num_blocks = 0, .dtype = DType::kBF16};
  };
  const model::ModelConfig tiny = SmallConfig("llama");  // head_dim 12
  EXPECT_EQ(b->FusedDecodeWorkspaceBytes(tiny, layout_of(tiny), 1024), 0u);
  model::ModelConfig wide = ConfigOf(Shapes()[1]);
  wide.num_heads = 32;  // group 16
  EXPECT_EQ(b->FusedDecodeWorkspaceBytes(wide, layout_of(wide), 1024), 0u);
  EXPECT_GT(b->FusedDecodeWorkspaceBytes(ConfigOf(Shapes()[1]), layout_of(ConfigOf(Shapes()[1])), 1024), 0u);
  const model::ModelConfig config = ConfigOf(Shapes()[1]);
  FakeWeights weights(config, 3, DType::kBF16);
  ModelOn m(b.get(), config, weights, 32, 32);
  FusedDecodeParams p;
  p.num_seqs = 9;
  auto taken = b->FusedDecodeStep(p);
  ASSERT_TRUE(taken.ok());
  EXPECT_FALSE(*taken);
  b->set_fused_decode(false);
  p.num_seqs = 1;
  taken = b->FusedDecodeStep(p);
  ASSERT_TRUE(taken.ok());
  EXPECT_FALSE(*taken);
  EXPECT_EQ(b->FusedDecodeWorkspaceBytes(ConfigOf(Shapes()[1]), layout_of(ConfigOf(Shapes()[1])), 1024), 0u)
      << "off: no workspace";
  auto off = MakeCudaBackend();
  EXPECT_EQ(off->FusedDecodeWorkspaceBytes(ConfigOf(Shapes()[1]), layout_of(ConfigOf(Shapes()[1])), 1024), 0u)
      << "off by default";
}

}  // namespace
}  // namespace tandem::runtime::testing
