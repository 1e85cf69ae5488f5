// LlamaModel on CpuBackend with random in-memory weights: batch invariance,
// scattered vs contiguous blocks, chunked vs one-shot prefill, and bad input.
// The reference for each property is the same sequence run alone in one
// shot; the CPU backend promises bitwise equality (fixed per-row order), so
// these compare exactly.
#include <gtest/gtest.h>

#include <numeric>
#include <utility>
#include <vector>

#include "common/runtime/cpu_backend.h"
#include "common/runtime/llama_model.h"
#include "tests/common/runtime/fake_weights.h"
#include "tests/common/runtime/test_util.h"

namespace tandem::runtime {
namespace {

using testing::FakeWeights;
using testing::SmallConfig;

constexpr int kBlockSize = 4;
constexpr int kNumBlocks = 64;

std::vector<TokenId> Tokens(int n, int seed, int vocab) {
  std::vector<TokenId> t(n);
  for (int i = 0; i < n; ++i) t[i] = (seed * 31 + i * 17 + i * i) % vocab;
  return t;
}

std::vector<BlockId> Range(int first, int count) {
  std::vector<BlockId> b(count);
  std::iota(b.begin(), b.end(), first);
  return b;
}

struct Fixture {
  explicit Fixture(const std::string& family, bool pad_decode_batches = false)
      : config(SmallConfig(family)), weights(config, 42) {
    RuntimeOptions options;
    options.pad_decode_batches = pad_decode_batches;
    options.kv_block_size = kBlockSize;
    options.max_num_tokens = 128;
    options.max_num_seqs = 8;
    options.max_logits_rows = 64;
    auto m = LlamaModel::Create(config, weights, &backend, options);
    TANDEM_CHECK(m.ok()) << m.status().ToString();
    model = std::move(m).value();
    auto c = PagedKvCache::Create(&backend, model->KvLayoutFor(kNumBlocks));
    TANDEM_CHECK(c.ok()) << c.status().ToString();
    cache = std::make_unique<PagedKvCache>(std::move(c).value());
  }
  std::vector<float> Run(std::vector<SeqChunk> chunks) {
    auto out = model->ForwardToHost(chunks, *cache);
    TANDEM_CHECK(out.ok()) << out.status().ToString();
    return std::move(out).value();
  }
  // Logits rows of one sequence: prefill `tokens` in one shot (all rows), then decode `extra`.
  std::vector<float> Alone(const std::vector<TokenId>& tokens, const std::vector<TokenId>& extra,
                           const std::vector<BlockId>& table) {
    std::vector<float> rows = Run({{tokens, 0, table, true, true}});
    for (size_t i = 0; i < extra.size(); ++i) {
      auto step = Run({{{&extra[i], 1}, static_cast<int>(tokens.size() + i), table, true}});
      rows.insert(rows.end(), step.begin(), step.end());
    }
    return rows;
  }

  // The whole KV pool (fp32 on the CPU backend).
  std::vector<float> CacheBytes() {
    Tensor pool = cache->pool();
    const float* p = static_cast<const float*>(pool.data);
    return std::vector<float>(p, p + pool.NumBytes() / sizeof(float));
  }

  CpuBackend backend;  // destroyed last
  model::ModelConfig config;
  FakeWeights weights;
  std::unique_ptr<LlamaModel> model;
  std::unique_ptr<PagedKvCache> cache;
};

class LlamaModelTest : public ::testing::TestWithParam<std::string> {};

TEST_P(LlamaModelTest, PaddedDecodeBatchGivesTheSameLogitsAndLeavesTheCacheAlone) {
  // Three decodes padded to a batch of 4 (a padding sequence at position 0 that reads
  // block 0 and writes no KV): the real rows equal an unpadded run, and the cache ends up
  // the same as without padding.
  Fixture padded(GetParam(), /*pad_decode_batches=*/true), plain(GetParam());
  const int v = padded.config.vocab_size;
  std::vector<std::vector<TokenId>> prompts = {Tokens(9, 1, v), Tokens(5, 2, v), Tokens(13, 3, v)};
  std::vector<std::vector<BlockId>> tables = {Range(0, 4), Range(10, 4), Range(20, 4)};
  for (Fixture* f : {&padded, &plain}) {
    for (size_t i = 0; i < prompts.size(); ++i) f->Run({{prompts[i], 0, tables[i], false}});
  }
  std::vector<TokenId> next = {7, 8, 9};
  auto decode = [&](Fixture& f) {
    std::vector<SeqChunk> step;
    for (size_t i = 0; i < prompts.size(); ++i) {
      step.push_back({{&next[i], 1}, static_cast<int>(prompts[i].size()), tables[i], true});
    }
    return f.Run(step);
  };
  const std::vector<float> cache_before = padded.CacheBytes();
  auto a = decode(padded), b = decode(plain);
  ASSERT_EQ(a.size(), 3u * v);
  EXPECT_EQ(a, b);
  const std::vector<float> cache_after = padded.CacheBytes();
  EXPECT_EQ(padded.CacheBytes(), plain.CacheBytes());
  EXPECT_NE(cache_before, cache_after);
}

TEST_P(LlamaModelTest, ScatteredBlocksEqualContiguousBlocks) {
  Fixture f(GetParam());
  auto tokens = Tokens(23, 1, f.config.vocab_size), extra = Tokens(3, 2, f.config.vocab_size);
  auto contiguous = f.Alone(tokens, extra, Range(0, 7));
  auto scattered = f.Alone(tokens, extra, {40, 3, 17, 63, 8, 25, 11});
  ASSERT_EQ(contiguous.size(), 26u * f.config.vocab_size);
  EXPECT_EQ(contiguous, scattered);
}

TEST_P(LlamaModelTest, ChunkedPrefillEqualsOneShot) {
  Fixture f(GetParam());
  const int vocab = f.config.vocab_size;
  auto tokens = Tokens(30, 3, vocab), extra = Tokens(2, 4, vocab);
  auto table = Range(10, 8);
  auto one_shot = f.Alone(tokens, extra, table);
  // Chunks of 7 (mid-block end), 13 and 10, then the same decodes.
  std::vector<float> chunked;
  int start = 0;
  for (int len : {7, 13, 10}) {
    auto rows = f.Run({{{tokens.data() + start, static_cast<size_t>(len)}, start, table, true, true}});
    chunked.insert(chunked.end(), rows.begin(), rows.end());
    start += len;
  }
  for (size_t i = 0; i < extra.size(); ++i) {
    auto rows = f.Run({{{&extra[i], 1}, 30 + static_cast<int>(i), table, true}});
    chunked.insert(chunked.end(), rows.begin(), rows.end());
  }
  ASSERT_EQ(chunked.size(), one_shot.size());
  EXPECT_LE(testing::MaxRelError(chunked, one_shot), 0.0);
}

TEST_P(LlamaModelTest, SequenceLogitsDoNotDependOnTheBatch) {
  Fixture f(GetParam());
  const int vocab = f.config.vocab_size;
  auto a = Tokens(11, 5, vocab), b = Tokens(9, 6, vocab), c = Tokens(6, 7, vocab);
  auto a_next = Tokens(2, 8, vocab);
  auto ta = Range(0, 4), tb = Range(10, 5), tc = Range(20, 4);
  auto alone = f.Alone(a, a_next, ta);  // rows: 11 prefill + 2 decode

  // Fresh cache contents for the batched run: A's blocks are rewritten with the same values.
  // Step 1: C prefills 6, A prefills 11 (all rows), B prefills its first 5.
  auto s1 = f.Run({{c, 0, tc, true}, {a, 0, ta, true, true}, {{b.data(), 5}, 0, tb, false}});
  ASSERT_EQ(s1.size(), (1u + 11u) * vocab);
  std::vector<float> batched(s1.begin() + vocab, s1.end());
  // Step 2: B finishes its prefill, A decodes, C decodes.
  auto s2 = f.Run({{{b.data() + 5, 4}, 5, tb, true}, {{&a_next[0], 1}, 11, ta, true}, {{&c[0], 1}, 6, tc, true}});
  batched.insert(batched.end(), s2.begin() + vocab, s2.begin() + 2 * vocab);
  // Step 3: A decodes alone between others in a different order.
  auto s3 = f.Run({{{&c[1], 1}, 7, tc, true}, {{&b[0], 1}, 9, tb, false}, {{&a_next[1], 1}, 12, ta, true}});
  batched.insert(batched.end(), s3.begin() + vocab, s3.begin() + 2 * vocab);
  ASSERT_EQ(batched.size(), alone.size());
  EXPECT_EQ(batched, alone);
}

INSTANTIATE_TEST_SUITE_P(Families, LlamaModelTest, ::testing::Values("llama", "mistral", "qwen2", "qwen3"));

// The KV layout's block size changes where rows live, never the logits.
TEST(LlamaModelBlockSizeTest, LogitsDoNotDependOnBlockSize) {
  model::ModelConfig config = SmallConfig("llama");
  FakeWeights weights(config, 11);
  CpuBackend backend;
  auto tokens = Tokens(37, 12, config.vocab_size);
  std::vector<std::vector<float>> results;
  for (int block_size : {1, 4, 16}) {
    RuntimeOptions options;
    options.kv_block_size = block_size;
    auto model = LlamaModel::Create(config, weights, &backend, options);
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    const int blocks = (38 + block_size - 1) / block_size;
    auto cache = PagedKvCache::Create(&backend, (*model)->KvLayoutFor(blocks + 3));
    ASSERT_TRUE(cache.ok());
    std::vector<BlockId> table(blocks);
    for (int i = 0; i < blocks; ++i) table[i] = (i * 5 + 2) % (blocks + 3);  // scattered, distinct
    auto prefill = (*model)->ForwardToHost(std::vector<SeqChunk>{{tokens, 0, table, true, true}}, *cache);
    ASSERT_TRUE(prefill.ok()) << prefill.status().ToString();
    TokenId next = 3;
    auto decode = (*model)->ForwardToHost(std::vector<SeqChunk>{{{&next, 1}, 37, table, true}}, *cache);
    ASSERT_TRUE(decode.ok());
    prefill->insert(prefill->end(), decode->begin(), decode->end());
    results.push_back(std::move(prefill).value());
  }
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
}

TEST(LlamaModelErrorsTest, BadChunksAreInvalidArgument) {
  Fixture f("llama");
  const int vocab = f.config.vocab_size;
  auto tokens = Tokens(6, 1, vocab);
  std::vector<TokenId> bad_token = {1, vocab};
  std::vector<BlockId> two = {0, 1}, one = {0}, out_of_range = {0, kNumBlocks};
  auto code = [&](std::vector<SeqChunk> chunks) { return f.model->Forward(chunks, *f.cache).status().code(); };
  EXPECT_EQ(code({}), StatusCode::kInvalidArgument);
  EXPECT_EQ(code({{{}, 0, two, true}}), StatusCode::kInvalidArgument);               // no tokens
  EXPECT_EQ(code({{bad_token, 0, two, true}}), StatusCode::kInvalidArgument);        // id >= vocab
  EXPECT_EQ(code({{tokens, 0, one, true}}), StatusCode::kInvalidArgument);           // table too short
  EXPECT_EQ(code({{tokens, 0, out_of_range, true}}), StatusCode::kInvalidArgument);  // block id out of range
  EXPECT_EQ(code({{tokens, -1, two, true}}), StatusCode::kInvalidArgument);          // negative start
  EXPECT_EQ(code({{tokens, 0, two, true}, {tokens, 0, two, true}}), StatusCode::kInvalidArgument);  // same blocks
  auto long_prompt = Tokens(129, 2, vocab);
  auto big_table = Range(0, 33);
  EXPECT_EQ(code({{long_prompt, 0, big_table, true}}), StatusCode::kInvalidArgument);  // over max_num_tokens
  auto past_end = Range(0, 64);
  EXPECT_EQ(code({{tokens, 252, past_end, true}}), StatusCode::kInvalidArgument);  // past max_model_len 256
  // Still usable after errors.
  EXPECT_TRUE(f.model->Forward(std::vector<SeqChunk>{{tokens, 0, two, true}}, *f.cache).ok());
}

TEST(LlamaModelErrorsTest, MismatchedCacheAndWeightsAreRejected) {
  Fixture f("qwen3");
  kv_cache::KvLayout wrong = f.model->KvLayoutFor(8);
  wrong.num_kv_heads = 1;
  auto cache = PagedKvCache::Create(&f.backend, wrong);
  ASSERT_TRUE(cache.ok());
  auto tokens = Tokens(3, 1, f.config.vocab_size);
  std::vector<BlockId> table = {0};
  EXPECT_EQ(f.model->Forward(std::vector<SeqChunk>{{tokens, 0, table, true}}, *cache).status().code(),
            StatusCode::kInvalidArgument);

  FakeWeights missing(f.config, 1);
  missing.Remove("model.layers.1.self_attn.k_norm.weight");
  auto m1 = LlamaModel::Create(f.config, missing, &f.backend, {});
  EXPECT_EQ(m1.status().code(), StatusCode::kNotFound);
  FakeWeights wrong_shape(f.config, 1);
  wrong_shape.Set("model.layers.0.mlp.up_proj.weight", {3, 3}, std::vector<float>(9));
  auto m2 = LlamaModel::Create(f.config, wrong_shape, &f.backend, {});
  EXPECT_EQ(m2.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(m2.status().message().find("up_proj"), std::string::npos) << m2.status().ToString();
}

TEST(LlamaModelTest, Bf16WeightsLoadAsTheirFp32Values) {
  model::ModelConfig config = SmallConfig("qwen2");
  FakeWeights bf16(config, 9, DType::kBF16);
  // The same values, widened to fp32 on our side, must give identical logits.
  FakeWeights f32(config, 9, DType::kF32);
  for (const std::string& name : bf16.Names()) {
    auto v = bf16.Get(name);
    std::vector<float> values(v->num_bytes / 2);
    for (size_t i = 0; i < values.size(); ++i) {
      uint16_t h;
      std::memcpy(&h, v->data + 2 * i, 2);
      values[i] = BF16ToF32(h);
    }
    f32.Set(name, v->shape, values);
  }
  CpuBackend backend;
  RuntimeOptions options;
  options.kv_block_size = kBlockSize;
  auto m_bf16 = LlamaModel::Create(config, bf16, &backend, options);
  auto m_f32 = LlamaModel::Create(config, f32, &backend, options);
  ASSERT_TRUE(m_bf16.ok() && m_f32.ok());
  auto c1 = PagedKvCache::Create(&backend, (*m_bf16)->KvLayoutFor(8));
  auto c2 = PagedKvCache::Create(&backend, (*m_f32)->KvLayoutFor(8));
  auto tokens = Tokens(9, 3, config.vocab_size);
  std::vector<BlockId> table = {1, 5, 2};
  std::vector<SeqChunk> chunks = {{tokens, 0, table, true, true}};
  auto l1 = (*m_bf16)->ForwardToHost(chunks, *c1);
  auto l2 = (*m_f32)->ForwardToHost(chunks, *c2);
  ASSERT_TRUE(l1.ok() && l2.ok());
  EXPECT_EQ(*l1, *l2);
}

// CreateWithWeights over weights uploaded beforehand runs the same forward as Create from
// the checkpoint; weights of another layer count are refused.
TEST(LlamaModelTest, CreateWithWeightsEqualsCreate) {
  model::ModelConfig config = SmallConfig("llama");
  FakeWeights weights(config, 5);
  CpuBackend backend;
  RuntimeOptions options;
  options.kv_block_size = kBlockSize;
  auto from_checkpoint = LlamaModel::Create(config, weights, &backend, options);
  auto uploaded = LlamaWeights::Load(config, weights, &backend);
  ASSERT_TRUE(from_checkpoint.ok() && uploaded.ok());
  auto from_weights = LlamaModel::CreateWithWeights(config, std::move(uploaded).value(), &backend, options);
  ASSERT_TRUE(from_weights.ok()) << from_weights.status().ToString();
  auto c1 = PagedKvCache::Create(&backend, (*from_checkpoint)->KvLayoutFor(8));
  auto c2 = PagedKvCache::Create(&backend, (*from_weights)->KvLayoutFor(8));
  ASSERT_TRUE(c1.ok() && c2.ok());
  auto tokens = Tokens(7, 4, config.vocab_size);
  std::vector<BlockId> table = {3, 0};
  std::vector<SeqChunk> chunks = {{tokens, 0, table, true, true}};
  auto l1 = (*from_checkpoint)->ForwardToHost(chunks, *c1);
  auto l2 = (*from_weights)->ForwardToHost(chunks, *c2);
  ASSERT_TRUE(l1.ok() && l2.ok());
  ASSERT_EQ(l1->size(), static_cast<size_t>(7 * config.vocab_size));
  EXPECT_EQ(*l1, *l2);

  auto fewer = LlamaWeights::Load(config, weights, &backend);
  ASSERT_TRUE(fewer.ok());
  fewer->layers.pop_back();
  EXPECT_EQ(LlamaModel::CreateWithWeights(config, std::move(fewer).value(), &backend, options).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem::runtime
