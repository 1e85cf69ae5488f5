// CUDA-graph decode steps (CudaBackend::BeginGraphStep / EndGraphStep): a replayed graph
// gives the logits of the same step run eagerly, with this step's metadata (tokens,
// positions, lengths) rather than the captured step's; keys repeat per batch size and
// block-table width, so most steps replay.
#include <gtest/gtest.h>

#include <cstdio>

#include "tests/common/runtime/cuda_test/cuda_test_util.h"
#include "tests/common/runtime/fake_weights.h"

namespace tandem::runtime::testing {
namespace {

model::ModelConfig GraphConfig() {
  model::ModelConfig c = SmallConfig("llama");
  c.hidden_size = 256;
  c.intermediate_size = 512;
  c.num_heads = 8;
  c.num_kv_heads = 2;
  c.head_dim = 64;
  c.vocab_size = 320;
  c.max_position_embeddings = 512;
  return c;
}

std::vector<float> GraphForward(CudaBackend& b, ModelOn& m, const std::vector<SeqChunk>& chunks) {
  TANDEM_CHECK_OK(b.BeginGraphStep());
  auto logits = m.model->Forward(chunks, *m.cache);
  if (!logits.ok()) {
    b.CancelGraphStep();
    TANDEM_CHECK(false) << logits.status().ToString();
  }
  TANDEM_CHECK_OK(b.EndGraphStep());
  std::vector<float> host(logits->NumElements());
  TANDEM_CHECK_OK(b.CopyToHost(*logits, host.data(), host.size() * 4));
  return host;
}

// The two sequences the tests decode: a in blocks 3-7, b in blocks 10-14.
const std::vector<BlockId> kTableA = {3, 4, 5, 6, 7}, kTableB = {10, 11, 12, 13, 14};

// Prefills a with len_a tokens and b with len_b (eagerly).
void PrefillTwo(ModelOn& m, size_t vocab, int len_a, int len_b) {
  std::vector<TokenId> pa(len_a), pb(len_b);
  for (size_t i = 0; i < pa.size(); ++i) pa[i] = (i * 13 + 1) % vocab;
  for (size_t i = 0; i < pb.size(); ++i) pb[i] = (i * 7 + 2) % vocab;
  m.Run({{.tokens = pa, .start_position = 0, .block_table = kTableA},
         {.tokens = pb, .start_position = 0, .block_table = kTableB}});
}

TEST(CudaGraphTest, ReplayMatchesEagerDecode) {
  TANDEM_SKIP_WITHOUT_GPU();
  const model::ModelConfig config = GraphConfig();
  FakeWeights weights(config, 9);
  auto b = MakeCudaBackend();
  ModelOn m(b.get(), config, weights, 16, 32);
  const size_t v = config.vocab_size;
  const std::vector<BlockId>& ta = kTableA;
  const std::vector<BlockId>& tb = kTableB;
  PrefillTwo(m, v, 21, 30);
  double worst = 0;
  int steps = 0;
  std::vector<float> first_graph;
  // Batch 2 for 8 steps (a crosses into its 2nd block at 32: one more width), then batch 1.
  for (int i = 0; i < 12; ++i) {
    const TokenId ka = (i * 29 + 3) % v, kb = (i * 31 + 5) % v;
    std::vector<SeqChunk> step = {
        {.tokens = {&ka, 1}, .start_position = 21 + i, .block_table = ta, .want_logits = true}};
    if (i < 8) step.push_back({.tokens = {&kb, 1}, .start_position = 30 + i, .block_table = tb, .want_logits = true});
    // The same step eagerly and as a graph: both write the same K/V to the same slots.
    const std::vector<float> eager = m.Run(step);
    const std::vector<float> graph = GraphForward(*b, m, step);
    ASSERT_EQ(eager.size(), graph.size());
    for (size_t r = 0; r < step.size(); ++r) {
      const double err = RowRelError(graph.data() + r * v, eager.data() + r * v, v);
      worst = std::max(worst, err);
      EXPECT_LE(err, 1e-2) << "step " << i << " row " << r;
      EXPECT_TRUE(SameTop1OrTie(graph.data() + r * v, eager.data() + r * v, v, 2e-2)) << "step " << i;
    }
    if (i == 0) first_graph = graph;
    if (i == 1) {
      // A stale replay would repeat step 0's logits.
      EXPECT_GT(RowRelError(graph.data(), first_graph.data(), v), 1e-3) << "replay reused old metadata";
    }
    ++steps;
  }
  std::printf("graph steps %d, captured %d, replays %d, max relative error vs eager %.3g\n", steps,
              b->graphs_captured(), b->graph_replays(), worst);
  EXPECT_GE(b->graph_replays(), 8);
  EXPECT_LE(b->graphs_captured(), 4);
}

// Steps alternating between two batch shapes: each finds its own graph again (a key other
// than the last step's goes through the graph map), also when the map holds one graph and
// every step evicts the other's.
class CudaGraphAlternationTest : public ::testing::TestWithParam<int> {};

TEST_P(CudaGraphAlternationTest, AlternatingShapesMatchEager) {
  TANDEM_SKIP_WITHOUT_GPU();
  const model::ModelConfig config = GraphConfig();
  FakeWeights weights(config, 9);
  CudaBackendOptions options;
  options.max_graphs = GetParam();
  auto b = MakeCudaBackend(options);
  ModelOn m(b.get(), config, weights, 16, 32);
  const size_t v = config.vocab_size;
  const std::vector<BlockId>& ta = kTableA;
  const std::vector<BlockId>& tb = kTableB;
  PrefillTwo(m, v, 40, 36);
  int pos_a = 40, pos_b = 36;  // both stay within 3 blocks: one table width per batch size
  constexpr int kSteps = 8;
  for (int i = 0; i < kSteps; ++i) {
    const TokenId ka = (i * 29 + 3) % v, kb = (i * 31 + 5) % v;
    std::vector<SeqChunk> step = {
        {.tokens = {&ka, 1}, .start_position = pos_a, .block_table = ta, .want_logits = true}};
    if (i % 2 == 0)
      step.push_back({.tokens = {&kb, 1}, .start_position = pos_b, .block_table = tb, .want_logits = true});
    const std::vector<float> eager = m.Run(step);
    const std::vector<float> graph = GraphForward(*b, m, step);
    ASSERT_EQ(eager.size(), graph.size());
    for (size_t r = 0; r < step.size(); ++r) {
      EXPECT_LE(RowRelError(graph.data() + r * v, eager.data() + r * v, v), 1e-2) << "step " << i << " row " << r;
    }
    ++pos_a;
    if (i % 2 == 0) ++pos_b;
  }
  if (GetParam() == 1) {
    EXPECT_EQ(b->graphs_captured(), kSteps);  // each step evicted the other shape's graph
    EXPECT_EQ(b->graph_replays(), 0);
  } else {
    EXPECT_EQ(b->graphs_captured(), 2);
    EXPECT_EQ(b->graph_replays(), kSteps - 2);
  }
}

INSTANTIATE_TEST_SUITE_P(MaxGraphs, CudaGraphAlternationTest, ::testing::Values(1, 64));

TEST(CudaGraphTest, MisuseIsAnError) {
  TANDEM_SKIP_WITHOUT_GPU();
  auto b = MakeCudaBackend();
  EXPECT_FALSE(b->EndGraphStep().ok());
  ASSERT_TRUE(b->BeginGraphStep().ok());
  EXPECT_FALSE(b->BeginGraphStep().ok());
  EXPECT_FALSE(b->Allocate(DType::kF32, {4}).ok());
  EXPECT_FALSE(b->Synchronize().ok());
  b->CancelGraphStep();
  EXPECT_TRUE(b->Synchronize().ok());
}

}  // namespace
}  // namespace tandem::runtime::testing
