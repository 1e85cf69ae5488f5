// The forward against Hugging Face transformers (the independent oracle):
// tests/data/golden/<family>/ holds a small random model (float32) and
// golden.safetensors with HF's logits, made by tools/golden/make_golden.py.
// We prefill the prompt (logits at every position), then feed the decode ids
// one at a time, and require for every row
//   max relative error = max_v |ours[v] - ref[v]| / max_v |ref[v]|  <= 1e-4.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/runtime/cpu_backend.h"
#include "common/runtime/llama_model.h"
#include "tests/common/runtime/golden_data.h"
#include "tests/common/runtime/test_util.h"

namespace tandem::runtime {
namespace {

using testing::GoldenData;

constexpr double kMaxRelError = 1e-4;

// One family's fixture (config, weights, HF's ids and logits) and our model.
struct Golden : GoldenData {
  explicit Golden(const std::string& family) : GoldenData(family) {
    RuntimeOptions options;
    options.kv_block_size = 4;
    auto m = LlamaModel::Create(config, *weights, &backend, options);
    TANDEM_CHECK(m.ok()) << m.status().ToString();
    model = std::move(m).value();
    auto c = PagedKvCache::Create(&backend, model->KvLayoutFor(32));
    TANDEM_CHECK(c.ok()) << c.status().ToString();
    cache = std::make_unique<PagedKvCache>(std::move(c).value());
  }
  // Checks `rows` logits rows starting at `ours` against HF rows; returns the worst error.
  double Check(const float* ours, const std::vector<float>& ref, size_t first_ref_row, size_t rows,
               const std::string& what) const {
    const size_t v = config.vocab_size;
    double worst = 0;
    for (size_t r = 0; r < rows; ++r) {
      double err = testing::MaxRelError({ours + r * v, v}, {ref.data() + (first_ref_row + r) * v, v});
      worst = std::max(worst, err);
      EXPECT_LE(err, kMaxRelError) << what << " row " << first_ref_row + r;
    }
    return worst;
  }
  std::vector<float> Run(const std::vector<SeqChunk>& chunks) {
    auto out = model->ForwardToHost(chunks, *cache);
    TANDEM_CHECK(out.ok()) << out.status().ToString();
    return std::move(out).value();
  }

  CpuBackend backend;  // destroyed after the model and cache
  std::unique_ptr<LlamaModel> model;
  std::unique_ptr<PagedKvCache> cache;
};

class GoldenTest : public ::testing::TestWithParam<std::string> {};

// One-shot prefill over scattered blocks, then single-token decode steps.
TEST_P(GoldenTest, PrefillAndDecodeMatchTransformers) {
  Golden g(GetParam());
  const int t = static_cast<int>(g.prompt.size());
  const std::vector<BlockId> table = {9, 3, 14, 0, 7, 12, 1, 5};  // 32 positions
  auto prefill =
      g.Run({{.tokens = g.prompt, .start_position = 0, .block_table = table, .want_logits = true, .all_logits = true}});
  double worst = g.Check(prefill.data(), g.prefill_ref, 0, t, "prefill");
  for (size_t i = 0; i < g.decode.size(); ++i) {
    auto out = g.Run({{.tokens = {&g.decode[i], 1},
                       .start_position = t + static_cast<int>(i),
                       .block_table = table,
                       .want_logits = true}});
    worst = std::max(worst, g.Check(out.data(), g.decode_ref, i, 1, "decode"));
  }
  std::printf("%s: max relative error %.3g over %d prefill rows and %zu decode steps\n", GetParam().c_str(), worst, t,
              g.decode.size());
}

// The same sequence prefilled in two chunks and decoded, always batched with
// another sequence (prefilling or decoding) in varying order.
TEST_P(GoldenTest, ChunkedAndBatchedMatchTransformers) {
  Golden g(GetParam());
  const int t = static_cast<int>(g.prompt.size()), first = 8;
  const std::vector<BlockId> table = {20, 2, 31, 6, 17, 25, 4, 11};
  const std::vector<BlockId> other_table = {0, 1, 3, 7, 8, 9};
  std::vector<TokenId> other(10 + g.decode.size() + 1);
  for (size_t i = 0; i < other.size(); ++i) other[i] = static_cast<TokenId>((i * 37 + 5) % g.config.vocab_size);
  std::span<const TokenId> prompt(g.prompt);
  auto s1 = g.Run({{.tokens = {other.data(), 10}, .start_position = 0, .block_table = other_table},
                   {.tokens = prompt.first(first),
                    .start_position = 0,
                    .block_table = table,
                    .want_logits = true,
                    .all_logits = true}});
  g.Check(s1.data(), g.prefill_ref, 0, first, "chunk 1");
  auto s2 = g.Run({{.tokens = prompt.subspan(first),
                    .start_position = first,
                    .block_table = table,
                    .want_logits = true,
                    .all_logits = true},
                   {.tokens = {&other[10], 1}, .start_position = 10, .block_table = other_table, .want_logits = true}});
  g.Check(s2.data(), g.prefill_ref, first, t - first, "chunk 2");
  const size_t v = g.config.vocab_size;
  for (size_t i = 0; i < g.decode.size(); ++i) {
    SeqChunk mine{.tokens = {&g.decode[i], 1},
                  .start_position = t + static_cast<int>(i),
                  .block_table = table,
                  .want_logits = true};
    SeqChunk theirs{.tokens = {&other[11 + i], 1},
                    .start_position = 11 + static_cast<int>(i),
                    .block_table = other_table,
                    .want_logits = true};
    bool mine_first = i % 2 == 0;
    auto out = g.Run(mine_first ? std::vector<SeqChunk>{mine, theirs} : std::vector<SeqChunk>{theirs, mine});
    g.Check(out.data() + (mine_first ? 0 : v), g.decode_ref, i, 1, "batched decode");
  }
}

// The fixtures exercise the paths they are meant to (so a passing golden test covers them).
TEST(GoldenFixtureTest, FamiliesCoverScalingBiasTyingAndQkNorm) {
  Golden llama("llama"), qwen2("qwen2"), qwen3("qwen3");
  EXPECT_EQ(llama.config.rope_scaling.type, model::RopeScalingType::kLlama3);
  EXPECT_LT(llama.config.num_kv_heads, llama.config.num_heads);  // GQA
  EXPECT_TRUE(qwen2.config.tie_word_embeddings);
  EXPECT_TRUE(qwen2.weights->Contains("model.layers.0.self_attn.q_proj.bias"));
  EXPECT_TRUE(qwen3.config.qk_norm);
  EXPECT_GT(llama.prompt.size(), 16u);  // the prompt spans several KV blocks of 4
}

INSTANTIATE_TEST_SUITE_P(Families, GoldenTest, ::testing::Values("llama", "qwen2", "qwen3"));

}  // namespace
}  // namespace tandem::runtime
