// CudaBackend through the whole Llama-family forward:
//  - against Hugging Face transformers' logits (tests/data/golden: float64 math over weights
//    that are exact bf16 values, so both sides run the same weights), one-shot and
//    chunked+batched, with the max relative error per row (max_v |ours - ref| / max_v |ref|,
//    as golden_test.cc). Issue #5 asks <= 2e-2 and top-1 on >= 99 % of rows. What is left
//    with identical weights is bf16 rounding of activations and KV; with the residual
//    stream and the o/down projection outputs in fp32 this test measures 0.019 / 0.0169 /
//    0.0167 and top-1 27/27 on the H200 (bf16 everywhere it measured 0.030 / 0.021 /
//    0.0215; transformers' own bf16 run of these models, tools/gpu/hf_bf16_error.py, lands
//    0.015 .. 0.032 with top-1 0.89 .. 1.0).
//    So the bound is the 2e-2, and top-1 must agree except at near-ties (HF's top
//    two within kTie of max|ref|);
//  - greedy generation equal to the CPU fp32 backend over the same weights: token for
//    token, up to a step where the CPU's top two are a near-tie;
//  - a model shape that takes the tensor-core attention kernels (head_dim 64, blocks of 16)
//    against the CPU backend, and a mixed batch (prefill chunks + decodes) against each
//    sequence run alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>

#include "common/base/dtype.h"
#include "common/runtime/cpu_backend.h"
#include "tests/common/runtime/cuda_test/cuda_test_util.h"
#include "tests/common/runtime/fake_weights.h"

namespace tandem::runtime::testing {
namespace {

constexpr double kMaxRelError = 2e-2;          // see the file comment
constexpr double kFastPathMaxRelError = 6e-2;  // random bf16 weights at larger scale vs the CPU backend
constexpr double kTie = 5e-2;                  // top-two gap (relative to max|ref|) that counts as a tie

struct Score {
  double worst = 0;
  int rows = 0, top1 = 0, wrong = 0;
  void Add(const float* ours, const float* ref, size_t vocab) {
    worst = std::max(worst, RowRelError(ours, ref, vocab));
    top1 += Argmax(ours, vocab) == Argmax(ref, vocab);
    wrong += !SameTop1OrTie(ours, ref, vocab, kTie);
    ++rows;
  }
  void Expect(const std::string& what) const {
    std::printf("%s: %d rows, top-1 agreement %.4f (%d non-tie misses), max relative error %.3g\n", what.c_str(), rows,
                static_cast<double>(top1) / rows, wrong, worst);
    EXPECT_GT(rows, 0);
    EXPECT_LE(worst, kMaxRelError) << what;
    EXPECT_EQ(wrong, 0) << what << ": top-1 differs where the reference has no near-tie";
  }
};

class CudaGoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaGoldenTest, PrefillAndDecodeMatchTransformers) {
  TANDEM_SKIP_WITHOUT_GPU();
  GoldenData g(GetParam());
  auto backend = MakeCudaBackend();
  {
    ModelOn m(backend.get(), g.config, *g.weights, /*block_size=*/16, /*num_blocks=*/16);
    const size_t v = g.config.vocab_size;
    const int t = static_cast<int>(g.prompt.size());
    const std::vector<BlockId> table = {9, 3, 14, 0};  // 64 positions, scattered
    Score score;
    auto prefill = m.Run(
        {{.tokens = g.prompt, .start_position = 0, .block_table = table, .want_logits = true, .all_logits = true}});
    for (int r = 0; r < t; ++r) score.Add(prefill.data() + r * v, g.prefill_ref.data() + r * v, v);
    for (size_t i = 0; i < g.decode.size(); ++i) {
      auto out = m.Run({{.tokens = {&g.decode[i], 1},
                         .start_position = t + static_cast<int>(i),
                         .block_table = table,
                         .want_logits = true}});
      score.Add(out.data(), g.decode_ref.data() + i * v, v);
    }
    score.Expect(GetParam() + " one-shot");
  }
  EXPECT_EQ(backend->live_buffers(), 0);
  {
    // Context: the CPU fp32 backend over the same weights (prefill rows; the weights are
    // exact bf16 values, so the rounding below changes nothing).
    CpuBackend cpu;
    Bf16RoundedWeights rounded(*g.weights);
    ModelOn m(&cpu, g.config, rounded, 16, 16);
    const size_t v = g.config.vocab_size;
    const std::vector<BlockId> table = {0, 1, 2, 3};
    auto rows = m.Run(
        {{.tokens = g.prompt, .start_position = 0, .block_table = table, .want_logits = true, .all_logits = true}});
    Score cpu_score;
    for (size_t r = 0; r < g.prompt.size(); ++r) cpu_score.Add(rows.data() + r * v, g.prefill_ref.data() + r * v, v);
    std::printf("%s baseline, CPU fp32 over the same weights: top-1 %.4f, max relative error %.3g\n",
                GetParam().c_str(), static_cast<double>(cpu_score.top1) / cpu_score.rows, cpu_score.worst);
  }
}

TEST_P(CudaGoldenTest, ChunkedAndBatchedMatchTransformers) {
  TANDEM_SKIP_WITHOUT_GPU();
  GoldenData g(GetParam());
  auto backend = MakeCudaBackend();
  ModelOn m(backend.get(), g.config, *g.weights, 16, 16);
  const size_t v = g.config.vocab_size;
  const int t = static_cast<int>(g.prompt.size()), first = 8;
  const std::vector<BlockId> table = {5, 12, 2, 7}, other_table = {0, 1, 3};
  std::vector<TokenId> other(10 + g.decode.size() + 1);
  for (size_t i = 0; i < other.size(); ++i) other[i] = static_cast<TokenId>((i * 37 + 5) % v);
  std::span<const TokenId> prompt(g.prompt);
  Score score;
  auto s1 = m.Run({{.tokens = {other.data(), 10}, .start_position = 0, .block_table = other_table},
                   {.tokens = prompt.first(first),
                    .start_position = 0,
                    .block_table = table,
                    .want_logits = true,
                    .all_logits = true}});
  for (int r = 0; r < first; ++r) score.Add(s1.data() + r * v, g.prefill_ref.data() + r * v, v);
  auto s2 = m.Run({{.tokens = prompt.subspan(first),
                    .start_position = first,
                    .block_table = table,
                    .want_logits = true,
                    .all_logits = true},
                   {.tokens = {&other[10], 1}, .start_position = 10, .block_table = other_table, .want_logits = true}});
  for (int r = first; r < t; ++r) score.Add(s2.data() + (r - first) * v, g.prefill_ref.data() + r * v, v);
  for (size_t i = 0; i < g.decode.size(); ++i) {
    SeqChunk mine{.tokens = {&g.decode[i], 1},
                  .start_position = t + static_cast<int>(i),
                  .block_table = table,
                  .want_logits = true};
    SeqChunk theirs{.tokens = {&other[11 + i], 1},
                    .start_position = 11 + static_cast<int>(i),
                    .block_table = other_table,
                    .want_logits = true};
    const bool mine_first = i % 2 == 0;
    auto out = m.Run(mine_first ? std::vector<SeqChunk>{mine, theirs} : std::vector<SeqChunk>{theirs, mine});
    score.Add(out.data() + (mine_first ? 0 : v), g.decode_ref.data() + i * v, v);
  }
  score.Expect(GetParam() + " chunked+batched");
}

TEST_P(CudaGoldenTest, GreedyGenerationEqualsCpuBackend) {
  TANDEM_SKIP_WITHOUT_GPU();
  GoldenData g(GetParam());
  Bf16RoundedWeights rounded(*g.weights);
  auto gpu = MakeCudaBackend();
  CpuBackend cpu;
  constexpr int kSteps = 24;
  const size_t v = g.config.vocab_size;
  std::vector<int32_t> gpu_tokens, cpu_tokens;
  std::vector<float> cpu_logits;
  {
    ModelOn m(gpu.get(), g.config, *g.weights, 16, 8);
    gpu_tokens = Greedy(m, g.prompt, kSteps, v);
  }
  {
    ModelOn m(&cpu, g.config, rounded, 16, 8);
    cpu_tokens = Greedy(m, g.prompt, kSteps, v, &cpu_logits);
  }
  ASSERT_EQ(gpu_tokens.size(), cpu_tokens.size());
  int same = 0;
  while (same < kSteps && gpu_tokens[same] == cpu_tokens[same]) ++same;
  std::printf("%s greedy: %d of %d tokens identical", GetParam().c_str(), same, kSteps);
  if (same < kSteps) {
    // Same context up to here, so the CPU's logits say how close its choice was.
    const float* row = cpu_logits.data() + same * v;
    double max_abs = 0;
    for (size_t i = 0; i < v; ++i) max_abs = std::max(max_abs, std::abs(static_cast<double>(row[i])));
    const double gap = (row[cpu_tokens[same]] - row[gpu_tokens[same]]) / max_abs;
    std::printf("; step %d: cpu %d, gpu %d, cpu top-two gap %.3g of max|logit|", same, cpu_tokens[same],
                gpu_tokens[same], gap);
    EXPECT_LE(gap, 1e-2) << "greedy paths split at step " << same << " without a near-tie";
  }
  std::printf("\n");
}

INSTANTIATE_TEST_SUITE_P(Families, CudaGoldenTest, ::testing::Values("llama", "qwen2", "qwen3"));

// A shape for the fast kernels: head_dim 64, GQA, 16-token blocks.
model::ModelConfig FastConfig(const std::string& family) {
  model::ModelConfig c = SmallConfig(family);
  c.hidden_size = 256;
  c.intermediate_size = 512;
  c.num_heads = 8;
  c.num_kv_heads = family == "qwen3" ? 4 : 2;
  c.head_dim = 64;
  c.vocab_size = 320;
  c.max_position_embeddings = 512;
  return c;
}

std::vector<TokenId> Tokens(int n, int seed, int vocab) {
  std::vector<TokenId> t(n);
  for (int i = 0; i < n; ++i) t[i] = (seed * 31 + i * 17 + i * i) % vocab;
  return t;
}

class CudaFastPathTest : public ::testing::TestWithParam<std::string> {};

// Prefill (prefill kernel over 3 blocks) then decodes (split-KV decode kernel) vs fp32 CPU.
TEST_P(CudaFastPathTest, ForwardMatchesCpuBackend) {
  TANDEM_SKIP_WITHOUT_GPU();
  const model::ModelConfig config = FastConfig(GetParam());
  FakeWeights weights(config, 11, DType::kBF16);  // the same weights on both backends
  auto gpu = MakeCudaBackend();
  CpuBackend cpu;
  ModelOn on_gpu(gpu.get(), config, weights, 16, 16), on_cpu(&cpu, config, weights, 16, 16);
  const size_t v = config.vocab_size;
  auto tokens = Tokens(45, 3, v), extra = Tokens(8, 4, v);
  const std::vector<BlockId> table = {7, 2, 11, 0};
  Score score;
  int ties = 0;
  std::vector<SeqChunk> prefill = {
      {.tokens = tokens, .start_position = 0, .block_table = table, .want_logits = true, .all_logits = true}};
  auto a = on_gpu.Run(prefill), b = on_cpu.Run(prefill);
  for (size_t r = 0; r < tokens.size(); ++r) {
    score.Add(a.data() + r * v, b.data() + r * v, v);
    ties += !SameTop1OrTie(a.data() + r * v, b.data() + r * v, v, kTie);
  }
  for (size_t i = 0; i < extra.size(); ++i) {
    std::vector<SeqChunk> step = {{.tokens = {&extra[i], 1},
                                   .start_position = static_cast<int>(tokens.size() + i),
                                   .block_table = table,
                                   .want_logits = true}};
    a = on_gpu.Run(step);
    b = on_cpu.Run(step);
    score.Add(a.data(), b.data(), v);
    ties += !SameTop1OrTie(a.data(), b.data(), v, kTie);
  }
  // Same bf16 weights on both sides, so this is activation rounding alone; these toy
  // models amplify it (H200, 2026-11-29: llama 0.048, qwen2 0.052, qwen3 0.017;
  // transformers' own bf16 run of the qwen2 golden fixture lands 0.041 from its fp32 run).
  EXPECT_LE(score.worst, kFastPathMaxRelError);
  EXPECT_EQ(ties, 0) << "top-1 differs where the CPU's top two are not a near-tie";
  std::printf("%s fast path vs CPU: %d rows, top-1 %d, max relative error %.3g\n", GetParam().c_str(), score.rows,
              score.top1, score.worst);
}

// Two sequences interleaved (chunked prefill of one next to the other's prefill, then
// decodes) give each sequence what it gets alone.
TEST_P(CudaFastPathTest, MixedBatchEqualsEachSequenceAlone) {
  TANDEM_SKIP_WITHOUT_GPU();
  const model::ModelConfig config = FastConfig(GetParam());
  FakeWeights weights(config, 5);
  auto gpu = MakeCudaBackend();
  ModelOn m(gpu.get(), config, weights, 16, 32);
  const size_t v = config.vocab_size;
  auto ta = Tokens(37, 1, v), tb = Tokens(20, 2, v), da = Tokens(4, 3, v), db = Tokens(5, 4, v);
  const std::vector<BlockId> alone_a = {0, 1, 2, 3}, alone_b = {4, 5};
  const std::vector<BlockId> mixed_a = {10, 11, 12, 13}, mixed_b = {20, 21};
  // Alone: every logits row of a, then of b.
  auto alone = [&](const std::vector<TokenId>& t, const std::vector<TokenId>& d, const std::vector<BlockId>& table) {
    std::vector<float> rows =
        m.Run({{.tokens = t, .start_position = 0, .block_table = table, .want_logits = true, .all_logits = true}});
    for (size_t i = 0; i < d.size(); ++i) {
      auto r = m.Run({{.tokens = {&d[i], 1},
                       .start_position = static_cast<int>(t.size() + i),
                       .block_table = table,
                       .want_logits = true}});
      rows.insert(rows.end(), r.begin(), r.end());
    }
    return rows;
  };
  const std::vector<float> ref_a = alone(ta, da, alone_a), ref_b = alone(tb, db, alone_b);
  std::vector<float> got_a, got_b;
  auto take = [&](std::vector<float>& dst, const std::vector<float>& src, size_t first_row, size_t rows) {
    dst.insert(dst.end(), src.begin() + first_row * v, src.begin() + (first_row + rows) * v);
  };
  std::span<const TokenId> sa(ta);
  // Step 1: a's first 16 tokens + all of b's prompt. Step 2: a's rest + b's first decode.
  auto s1 = m.Run(
      {{.tokens = sa.first(16), .start_position = 0, .block_table = mixed_a, .want_logits = true, .all_logits = true},
       {.tokens = tb, .start_position = 0, .block_table = mixed_b, .want_logits = true, .all_logits = true}});
  take(got_a, s1, 0, 16);
  take(got_b, s1, 16, tb.size());
  auto s2 = m.Run({{.tokens = {&db[0], 1}, .start_position = 20, .block_table = mixed_b, .want_logits = true},
                   {.tokens = sa.subspan(16),
                    .start_position = 16,
                    .block_table = mixed_a,
                    .want_logits = true,
                    .all_logits = true}});
  take(got_b, s2, 0, 1);
  take(got_a, s2, 1, ta.size() - 16);
  // Decode-only steps of both (a has 4 decodes, b 4 more).
  for (size_t i = 0; i < 4; ++i) {
    auto s = m.Run({{.tokens = {&da[i], 1},
                     .start_position = static_cast<int>(ta.size() + i),
                     .block_table = mixed_a,
                     .want_logits = true},
                    {.tokens = {&db[i + 1], 1},
                     .start_position = static_cast<int>(tb.size() + i + 1),
                     .block_table = mixed_b,
                     .want_logits = true}});
    take(got_a, s, 0, 1);
    take(got_b, s, 1, 1);
  }
  ASSERT_EQ(got_a.size(), ref_a.size());
  ASSERT_EQ(got_b.size(), ref_b.size());
  // Same math per row, but other kernels (prefill vs decode attention) and GEMM shapes:
  // equal up to bf16 rounding (measured 0.7e-2 .. 1.4e-2 on the H200), so 3e-2 and the same
  // top-1 except at near-ties.
  double worst = 0;
  int differ = 0;
  for (size_t r = 0; r < got_a.size() / v; ++r) {
    worst = std::max(worst, RowRelError(got_a.data() + r * v, ref_a.data() + r * v, v));
    differ += !SameTop1OrTie(got_a.data() + r * v, ref_a.data() + r * v, v, 2e-2);
  }
  for (size_t r = 0; r < got_b.size() / v; ++r) {
    worst = std::max(worst, RowRelError(got_b.data() + r * v, ref_b.data() + r * v, v));
    differ += !SameTop1OrTie(got_b.data() + r * v, ref_b.data() + r * v, v, 2e-2);
  }
  std::printf("%s mixed vs alone: max relative error %.3g\n", GetParam().c_str(), worst);
  EXPECT_LE(worst, 3e-2);
  EXPECT_EQ(differ, 0);
}

INSTANTIATE_TEST_SUITE_P(Families, CudaFastPathTest, ::testing::Values("llama", "qwen2", "qwen3"));

#define ASSERT_OK(expr)                      \
  do {                                       \
    const Status _st = (expr);               \
    ASSERT_TRUE(_st.ok()) << _st.ToString(); \
  } while (0)

// Linear with accumulate adds onto y: the skinny GEMM (up to 8 rows) with
// one fp32 add onto the bits the plain kernel writes, cuBLAS with beta = 1.
// Random device tensors and their values on the host.
class DeviceData {
 public:
  explicit DeviceData(Backend* b, unsigned seed) : b_(b), rng_(seed) {}
  Buffer Random(DType dtype, std::vector<int64_t> shape, float scale, float mean = 0.f) {
    auto buf = b_->Allocate(dtype, shape);
    TANDEM_CHECK_OK(buf.status());
    const int64_t count = buf->tensor().NumElements();
    std::normal_distribution<float> dist(mean, scale);
    if (dtype == DType::kF32) {
      std::vector<float> v(count);
      for (float& x : v) x = dist(rng_);
      TANDEM_CHECK_OK(b_->CopyToDevice(v.data(), v.size() * 4, buf->tensor()));
    } else {
      std::vector<uint16_t> v(count);
      for (uint16_t& x : v) x = F32ToBF16(dist(rng_));
      TANDEM_CHECK_OK(b_->CopyToDevice(v.data(), v.size() * 2, buf->tensor()));
    }
    return std::move(buf).value();
  }
  std::vector<float> Host(const Tensor& t) {
    std::vector<float> v(t.NumElements());
    if (t.dtype == DType::kF32) {
      TANDEM_CHECK_OK(b_->CopyToHost(t, v.data(), v.size() * 4));
    } else {
      std::vector<uint16_t> raw(v.size());
      TANDEM_CHECK_OK(b_->CopyToHost(t, raw.data(), raw.size() * 2));
      for (size_t i = 0; i < v.size(); ++i) v[i] = BF16ToF32(raw[i]);
    }
    return v;
  }

 private:
  Backend* b_;
  std::mt19937 rng_;
};

TEST(CudaBackendTest, LinearAccumulateAddsOntoOut) {
  TANDEM_SKIP_WITHOUT_GPU();
  auto b = MakeCudaBackend();
  const int k = 4096, n = 384;
  DeviceData data(b.get(), 7);
  auto upload = [&](DType dtype, std::vector<int64_t> shape, float scale) { return data.Random(dtype, shape, scale); };
  auto host = [&](const Tensor& t) { return data.Host(t); };
  Buffer w = upload(DType::kBF16, {n, k}, 0.02f), bias = upload(DType::kBF16, {n}, 0.5f);
  for (int m : {1, 8, 12}) {
    SCOPED_TRACE("m=" + std::to_string(m));
    Buffer x = upload(DType::kBF16, {m, k}, 1.f), y = upload(DType::kF32, {m, n}, 1.f);
    auto plain = b->Allocate(DType::kF32, {m, n});
    ASSERT_TRUE(plain.ok());
    ASSERT_OK(b->Linear({x.tensor(), w.tensor(), bias.tensor(), plain->tensor()}));
    const std::vector<float> before = host(y.tensor()), ops = host(plain->tensor());
    ASSERT_OK(b->Linear(
        {.x = x.tensor(), .weight = w.tensor(), .bias = bias.tensor(), .out = y.tensor(), .accumulate = true}));
    const std::vector<float> after = host(y.tensor());
    for (size_t i = 0; i < after.size(); ++i) {
      const double want = static_cast<double>(before[i]) + ops[i];
      ASSERT_NEAR(after[i], want, 1e-5 * (std::fabs(ops[i]) + std::fabs(before[i]) + 1)) << i;
      if (m <= 8) {
        ASSERT_EQ(after[i], before[i] + ops[i]) << "skinny accumulate is one fp32 add, " << i;
      }
    }
  }
  auto bf16_out = b->Allocate(DType::kBF16, {1, n});
  Buffer x1 = upload(DType::kBF16, {1, k}, 1.f);
  ASSERT_TRUE(bf16_out.ok());
  EXPECT_EQ(b->Linear({.x = x1.tensor(), .weight = w.tensor(), .out = bf16_out->tensor(), .accumulate = true}).code(),
            StatusCode::kInvalidArgument)
      << "accumulate needs an F32 out";
}

// Linear with silu_mul (the skinny GEMM's epilogue up to 8 rows, cuBLAS then the SiLU-mul
// kernel above) against Linear then SiluAndMul: the same bits.
TEST(CudaBackendTest, SiluMulMatchesTheOps) {
  TANDEM_SKIP_WITHOUT_GPU();
  auto b = MakeCudaBackend();
  const int hidden = 520, ffn = 200;
  DeviceData data(b.get(), 11);
  Buffer w_gu = data.Random(DType::kBF16, {2 * ffn, hidden}, 0.05f);
  auto alloc = [&](DType dtype, std::vector<int64_t> shape) {
    auto buf = b->Allocate(dtype, shape);
    TANDEM_CHECK_OK(buf.status());
    return std::move(buf).value();
  };
  for (int m : {1, 8, 12}) {
    SCOPED_TRACE("m=" + std::to_string(m));
    Buffer x = data.Random(DType::kBF16, {m, hidden}, 1.f);
    Buffer gate_up = alloc(DType::kBF16, {m, 2 * ffn});
    Buffer act = alloc(DType::kBF16, {m, ffn}), ref_act = alloc(DType::kBF16, {m, ffn});
    ASSERT_OK(b->Linear({x.tensor(), w_gu.tensor(), Tensor(), gate_up.tensor()}));
    ASSERT_OK(b->SiluAndMul(gate_up.tensor(), ref_act.tensor()));
    ASSERT_OK(b->Linear({.x = x.tensor(),
                         .weight = w_gu.tensor(),
                         .out = act.tensor(),
                         .silu_mul = true,
                         .scratch = gate_up.tensor()}));
    const auto got = data.Host(act.tensor()), want = data.Host(ref_act.tensor());
    EXPECT_GT(*std::max_element(want.begin(), want.end()), 0.f);
    EXPECT_EQ(got, want);
  }
}

TEST(CudaBackendTest, RejectsHostTensorsAndReportsWorkspace) {
  TANDEM_SKIP_WITHOUT_GPU();
  auto gpu = MakeCudaBackend();
  CpuBackend cpu;
  auto host = cpu.Allocate(DType::kBF16, {4, 8});
  ASSERT_TRUE(host.ok());
  auto dev = gpu->Allocate(DType::kBF16, {4, 8});
  ASSERT_TRUE(dev.ok());
  EXPECT_FALSE(gpu->CopyToDevice(nullptr, 3, dev->tensor()).ok());                               // wrong size
  EXPECT_FALSE(gpu->SiluAndMul(host->tensor(), dev->tensor().Rows(0, 2).Reshape({4, 4})).ok());  // host input
  std::vector<uint16_t> back(32, 0xffff);
  ASSERT_TRUE(gpu->CopyToHost(dev->tensor(), back.data(), back.size() * 2).ok());
  for (uint16_t x : back) EXPECT_EQ(x, 0) << "Allocate must zero-fill";
}

}  // namespace
}  // namespace tandem::runtime::testing
