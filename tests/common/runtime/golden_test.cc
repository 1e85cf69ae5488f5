// The forward against Hugging Face transformers (the independent oracle):
// tests/data/golden/<family>/ holds a small random model (float32) and
// golden.safetensors with HF's logits, made by tools/golden/make_golden.py.
// We prefill the prompt (logits at every position), then feed the decode ids
// one at a time, and require for every row
//   max relative error = max_v |ours[v] - ref[v]| / max_v |ref[v]|  <= 1e-4.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/model/model_config.h"
#include "common/model/safetensors_file.h"
#include "common/model/weights.h"
#include "common/runtime/cpu_backend.h"
#include "common/runtime/llama_model.h"
#include "tests/common/runtime/test_util.h"

namespace tandem::runtime {
namespace {

constexpr double kMaxRelError = 1e-4;

std::string GoldenDir(const std::string& family) {
  const char* root = std::getenv("TANDEM_SOURCE_DIR");
  return std::string(root ? root : ".") + "/tests/data/golden/" + family;
}

std::vector<int32_t> ReadIds(const model::SafetensorsFile& f, const std::string& name) {
  auto t = f.Get(name);
  TANDEM_CHECK(t.ok() && t->dtype == DType::kI64) << name;
  std::vector<int32_t> ids(t->num_bytes / 8);
  for (size_t i = 0; i < ids.size(); ++i) {
    int64_t v;
    std::memcpy(&v, t->data + 8 * i, 8);
    ids[i] = static_cast<int32_t>(v);
  }
  return ids;
}

std::vector<float> ReadF32(const model::SafetensorsFile& f, const std::string& name) {
  auto t = f.Get(name);
  TANDEM_CHECK(t.ok() && t->dtype == DType::kF32) << name;
  std::vector<float> v(t->num_bytes / 4);
  std::memcpy(v.data(), t->data, t->num_bytes);
  return v;
}

class GoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenTest, PrefillAndDecodeMatchTransformers) {
  const std::string dir = GoldenDir(GetParam());
  std::ifstream in(dir + "/config.json");
  ASSERT_TRUE(in.good()) << "missing fixture " << dir;
  std::stringstream text;
  text << in.rdbuf();
  auto config = model::ParseModelConfig(text.str());
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  auto weights = model::ModelWeights::Open(dir);
  ASSERT_TRUE(weights.ok()) << weights.status().ToString();
  auto golden = model::SafetensorsFile::Open(dir + "/golden.safetensors");
  ASSERT_TRUE(golden.ok()) << golden.status().ToString();
  const std::vector<int32_t> prompt = ReadIds(**golden, "prompt_ids"), decode = ReadIds(**golden, "decode_ids");
  const std::vector<float> prefill_ref = ReadF32(**golden, "prefill_logits");
  const std::vector<float> decode_ref = ReadF32(**golden, "decode_logits");
  const int vocab = config->vocab_size, t = static_cast<int>(prompt.size());
  ASSERT_EQ(prefill_ref.size(), prompt.size() * vocab);
  ASSERT_EQ(decode_ref.size(), decode.size() * vocab);

  CpuBackend backend;
  {
    RuntimeOptions options;
    options.kv_block_size = 4;
    auto model = LlamaModel::Create(*config, **weights, &backend, options);
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    auto cache = PagedKvCache::Create(&backend, (*model)->KvLayoutFor(16));
    ASSERT_TRUE(cache.ok()) << cache.status().ToString();
    const std::vector<BlockId> table = {9, 3, 14, 0, 7, 12, 1, 5};  // scattered, 32 positions

    SeqChunk prefill{.tokens = prompt, .start_position = 0, .block_table = table, .want_logits = true,
                     .all_logits = true};
    auto logits = (*model)->ForwardToHost({&prefill, 1}, *cache);
    ASSERT_TRUE(logits.ok()) << logits.status().ToString();
    double worst = 0;
    for (int row = 0; row < t; ++row) {
      std::span<const float> ours(logits->data() + row * vocab, vocab), ref(prefill_ref.data() + row * vocab, vocab);
      double err = testing::MaxRelError(ours, ref);
      worst = std::max(worst, err);
      EXPECT_LE(err, kMaxRelError) << "prefill row " << row;
    }
    for (size_t i = 0; i < decode.size(); ++i) {
      SeqChunk step{.tokens = {&decode[i], 1}, .start_position = t + static_cast<int>(i), .block_table = table,
                    .want_logits = true};
      auto out = (*model)->ForwardToHost({&step, 1}, *cache);
      ASSERT_TRUE(out.ok()) << out.status().ToString();
      double err = testing::MaxRelError(*out, {decode_ref.data() + i * vocab, static_cast<size_t>(vocab)});
      worst = std::max(worst, err);
      EXPECT_LE(err, kMaxRelError) << "decode step " << i;
    }
    std::printf("%s: max relative error %.3g over %d prefill rows and %zu decode steps\n", GetParam().c_str(), worst,
                t, decode.size());
  }
}

INSTANTIATE_TEST_SUITE_P(Families, GoldenTest, ::testing::Values("llama", "qwen2", "qwen3"));

}  // namespace
}  // namespace tandem::runtime
