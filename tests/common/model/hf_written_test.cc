// The loader on checkpoints written by Hugging Face transformers 5.17 and
// safetensors.torch themselves (testdata/hf_written, made by
// tools/make_model/hf_check.py): configs in the new `rope_parameters`/`dtype`
// spelling, a 4-shard index, and values compared with what torch saved.
#include <cmath>
#include <cstring>
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

#include "common/model/model_config.h"
#include "common/model/model_tensors.h"
#include "common/model/safetensors_file.h"
#include "common/model/weights.h"
#include "tests/common/model/test_util.h"

namespace tandem::model {
namespace {

using testing::ReadAll;
using testing::TestDataPath;

std::string Dir(const std::string& family) { return TestDataPath("hf_written/" + family); }

ModelConfig LoadConfig(const std::string& family) {
  StatusOr<ModelConfig> config = LoadModelConfig(Dir(family));
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  return config.ok() ? *config : ModelConfig{};
}

// Every tensor torch saved: same shape, same first values (bf16 -> float is exact), same sum.
void ExpectWeightsMatchTorch(const std::string& family, const ModelConfig& config) {
  StatusOr<std::unique_ptr<ModelWeights>> weights = ModelWeights::Open(Dir(family));
  ASSERT_TRUE(weights.ok()) << weights.status().ToString();
  nlohmann::json expected = nlohmann::json::parse(ReadAll(Dir(family) + "/expected.json"));
  EXPECT_EQ((*weights)->Names().size(), expected.size());
  for (const auto& [name, want] : expected.items()) {
    StatusOr<TensorView> t = (*weights)->Get(name, want["shape"].get<std::vector<int64_t>>());
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    EXPECT_EQ(t->dtype, DType::kBF16) << name;
    for (size_t i = 0; i < want["first"].size(); ++i) {
      EXPECT_EQ(t->GetFloat(static_cast<int64_t>(i)), want["first"][i].get<float>()) << name << "[" << i << "]";
    }
    double sum = 0;
    for (int64_t i = 0; i < t->NumElements(); ++i) sum += t->GetFloat(i);
    EXPECT_NEAR(sum, want["sum"].get<double>(), 1e-3 * (1 + std::abs(sum))) << name;
  }
  // Our list of expected names and shapes agrees with what transformers wrote.
  Status st = CheckModelWeights(config, **weights);
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(ExpectedTensors(config).size(), expected.size());
}

TEST(HfWrittenTest, LlamaWithLlama3RopeParametersAndFourShards) {
  ModelConfig c = LoadConfig("llama");
  EXPECT_EQ(c.family, ModelFamily::kLlama);
  EXPECT_EQ(c.vocab_size, 64);
  EXPECT_EQ(c.hidden_size, 32);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.dtype, DType::kBF16);  // written as "dtype", not "torch_dtype"
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::kLlama3);
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 8.0);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 64);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int>{2, 3}));
  ExpectWeightsMatchTorch("llama", c);
}

TEST(HfWrittenTest, Qwen2TiedWithBias) {
  ModelConfig c = LoadConfig("qwen2");
  EXPECT_EQ(c.family, ModelFamily::kQwen2);
  EXPECT_TRUE(c.attention_bias);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
  EXPECT_FALSE(c.sliding_window.has_value());
  ExpectWeightsMatchTorch("qwen2", c);
}

TEST(HfWrittenTest, Qwen3WithWideHeads) {
  ModelConfig c = LoadConfig("qwen3");
  EXPECT_EQ(c.family, ModelFamily::kQwen3);
  EXPECT_EQ(c.head_dim, 16);  // 4 heads x 16 != hidden 32
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.attention_bias);
  ExpectWeightsMatchTorch("qwen3", c);
}

TEST(HfWrittenTest, MistralWithSlidingWindow) {
  ModelConfig c = LoadConfig("mistral");
  EXPECT_EQ(c.family, ModelFamily::kMistral);
  EXPECT_EQ(c.sliding_window, 128);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  ExpectWeightsMatchTorch("mistral", c);
  StatusOr<GenerationConfig> g = LoadGenerationConfig(Dir("mistral"));
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->eos_token_ids, (std::vector<int>{2, 3}));
  EXPECT_EQ(g->bos_token_id, 1);
}

TEST(HfWrittenTest, MixedDtypesFromSafetensorsTorch) {
  StatusOr<std::unique_ptr<SafetensorsFile>> file = SafetensorsFile::Open(Dir("mixed") + "/mixed.safetensors");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ((*file)->metadata().at("note"), "x");
  nlohmann::json expected = nlohmann::json::parse(ReadAll(Dir("mixed") + "/expected.json"));
  for (const auto& [name, want] : expected.items()) {
    StatusOr<TensorView> t = (*file)->Get(name);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    EXPECT_EQ(t->shape, want["shape"].get<std::vector<int64_t>>()) << name;
    std::vector<double> values = want["values"];
    ASSERT_EQ(static_cast<size_t>(t->NumElements()), values.size()) << name;
    for (size_t i = 0; i < values.size(); ++i) {
      double got = 0;
      const std::byte* p = t->data + i * DTypeSize(t->dtype);
      if (t->dtype == DType::kI64) {
        int64_t v;
        std::memcpy(&v, p, 8);
        got = static_cast<double>(v);
      } else if (t->dtype == DType::kI32) {
        int32_t v;
        std::memcpy(&v, p, 4);
        got = v;
      } else if (t->dtype == DType::kU8) {
        got = static_cast<double>(static_cast<uint8_t>(*p));
      } else {
        got = t->GetFloat(static_cast<int64_t>(i));
      }
      EXPECT_EQ(got, values[i]) << name << "[" << i << "]";
    }
  }
  EXPECT_EQ((*file)->Get("bf16")->dtype, DType::kBF16);
  EXPECT_EQ((*file)->Get("f16")->dtype, DType::kF16);
  EXPECT_EQ((*file)->Get("u8")->dtype, DType::kU8);
  EXPECT_EQ((*file)->Get("scalar")->shape.size(), 0u);
}

}  // namespace
}  // namespace tandem::model
