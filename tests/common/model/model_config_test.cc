// ParseModelConfig on config.json files as real checkpoints ship them (values
// checked against the published model cards), and on broken ones.
#include "common/model/model_config.h"

#include <string>

#include "gtest/gtest.h"
#include "tests/common/model/test_util.h"

namespace tandem::model {
namespace {

using testing::ReadAll;
using testing::TestDataPath;

ModelConfig ParseFixture(const std::string& name) {
  StatusOr<ModelConfig> config = ParseModelConfig(ReadAll(TestDataPath("configs/" + name)));
  EXPECT_TRUE(config.ok()) << name << ": " << config.status().ToString();
  return config.ok() ? *config : ModelConfig{};
}

// Asserts parsing fails with InvalidArgument and a message containing `needle`.
void ExpectInvalid(std::string_view text, std::string_view needle) {
  StatusOr<ModelConfig> config = ParseModelConfig(text);
  ASSERT_FALSE(config.ok()) << "accepted: " << text;
  EXPECT_EQ(config.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(config.status().message().find(needle), std::string::npos)
      << "message '" << config.status().message() << "' lacks '" << needle << "'";
}

constexpr std::string_view kMinimal =
    R"({"architectures": ["LlamaForCausalLM"], "vocab_size": 512, "hidden_size": 64,
        "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4)";

std::string Minimal(std::string_view extra = "") {
  std::string text(kMinimal);
  if (!extra.empty()) text += ", " + std::string(extra);
  return text + "}";
}

TEST(ModelConfigTest, ParsesLlama31WithLlama3RopeScaling) {
  ModelConfig c = ParseFixture("llama-3.1-8b-instruct.json");
  EXPECT_EQ(c.family, ModelFamily::kLlama);
  EXPECT_EQ(c.architecture, "LlamaForCausalLM");
  EXPECT_EQ(c.vocab_size, 128256);
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.intermediate_size, 14336);
  EXPECT_EQ(c.num_layers, 32);
  EXPECT_EQ(c.num_heads, 32);
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::kLlama3);
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 8.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.low_freq_factor, 1.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.high_freq_factor, 4.0);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_EQ(c.max_position_embeddings, 131072);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_EQ(c.dtype, DType::kBF16);
  EXPECT_EQ(c.bos_token_id, 128000);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int>{128001, 128008, 128009}));
  EXPECT_FALSE(c.sliding_window.has_value());
}

TEST(ModelConfigTest, ParsesLlama2WithoutGqaAndFloat16) {
  ModelConfig c = ParseFixture("llama-2-7b.json");
  EXPECT_EQ(c.num_kv_heads, 32);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);  // absent: the default
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::kNone);
  EXPECT_EQ(c.dtype, DType::kF16);
  EXPECT_EQ(c.eos_token_ids, std::vector<int>{2});
}

TEST(ModelConfigTest, ParsesMistralWithSlidingWindow) {
  ModelConfig c = ParseFixture("mistral-7b-v0.1.json");
  EXPECT_EQ(c.family, ModelFamily::kMistral);
  EXPECT_EQ(c.architecture, "MistralForCausalLM");
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.vocab_size, 32000);
  EXPECT_EQ(c.sliding_window, 4096);
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_ids, std::vector<int>{2});

  ModelConfig v3 = ParseFixture("mistral-7b-instruct-v0.3.json");
  EXPECT_EQ(v3.vocab_size, 32768);
  EXPECT_DOUBLE_EQ(v3.rope_theta, 1e6);
  EXPECT_FALSE(v3.sliding_window.has_value());  // "sliding_window": null
}

TEST(ModelConfigTest, ParsesQwen25WithImplicitQkvBias) {
  ModelConfig c = ParseFixture("qwen2.5-7b-instruct.json");
  EXPECT_EQ(c.family, ModelFamily::kQwen2);
  EXPECT_EQ(c.hidden_size, 3584);
  EXPECT_EQ(c.num_heads, 28);
  EXPECT_EQ(c.num_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.intermediate_size, 18944);
  EXPECT_EQ(c.vocab_size, 152064);
  EXPECT_TRUE(c.attention_bias);  // Qwen2 has no key for it; always on
  EXPECT_FALSE(c.qk_norm);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
  EXPECT_FALSE(c.sliding_window.has_value());  // use_sliding_window: false
  EXPECT_EQ(c.eos_token_ids, std::vector<int>{151645});

  ModelConfig small = ParseFixture("qwen2.5-0.5b-instruct.json");
  EXPECT_TRUE(small.tie_word_embeddings);
  EXPECT_EQ(small.head_dim, 64);
  EXPECT_EQ(small.num_kv_heads, 2);
}

TEST(ModelConfigTest, ParsesQwen3WithExplicitHeadDimAndQkNorm) {
  ModelConfig c = ParseFixture("qwen3-8b.json");
  EXPECT_EQ(c.family, ModelFamily::kQwen3);
  EXPECT_EQ(c.num_layers, 36);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);  // written as an integer
  EXPECT_EQ(c.max_position_embeddings, 40960);
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::kNone);

  // head_dim * heads (128 * 16) != hidden_size (1024): head_dim must come from the file.
  ModelConfig small = ParseFixture("qwen3-0.6b.json");
  EXPECT_EQ(small.head_dim, 128);
  EXPECT_EQ(small.hidden_size, 1024);
  EXPECT_TRUE(small.tie_word_embeddings);
}

TEST(ModelConfigTest, AppliesDefaultsToMinimalConfig) {
  StatusOr<ModelConfig> c = ParseModelConfig(Minimal());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->num_kv_heads, 4);
  EXPECT_EQ(c->head_dim, 16);
  EXPECT_DOUBLE_EQ(c->rope_theta, 10000.0);
  EXPECT_EQ(c->dtype, DType::kBF16);
  EXPECT_FALSE(c->bos_token_id.has_value());
  EXPECT_TRUE(c->eos_token_ids.empty());
}

TEST(ModelConfigTest, FamilyFromModelTypeWhenNoArchitectures) {
  StatusOr<ModelConfig> c = ParseModelConfig(
      R"({"model_type": "qwen3", "vocab_size": 10, "hidden_size": 8, "intermediate_size": 8,
          "num_hidden_layers": 1, "num_attention_heads": 2, "attention_bias": true})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->family, ModelFamily::kQwen3);
  EXPECT_TRUE(c->attention_bias);
  EXPECT_TRUE(c->qk_norm);
}

TEST(ModelConfigTest, RopeScalingVariants) {
  StatusOr<ModelConfig> linear = ParseModelConfig(Minimal(R"("rope_scaling": {"type": "linear", "factor": 2.0})"));
  ASSERT_TRUE(linear.ok()) << linear.status().ToString();
  EXPECT_EQ(linear->rope_scaling.type, RopeScalingType::kLinear);
  EXPECT_DOUBLE_EQ(linear->rope_scaling.factor, 2.0);

  StatusOr<ModelConfig> dflt = ParseModelConfig(Minimal(R"("rope_scaling": {"rope_type": "default"})"));
  ASSERT_TRUE(dflt.ok()) << dflt.status().ToString();
  EXPECT_EQ(dflt->rope_scaling.type, RopeScalingType::kNone);

  // transformers 5 style: rope_parameters carries theta and scaling.
  StatusOr<ModelConfig> v5 = ParseModelConfig(Minimal(
      R"("rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 32.0,
          "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
          "dtype": "float32")"));
  ASSERT_TRUE(v5.ok()) << v5.status().ToString();
  EXPECT_DOUBLE_EQ(v5->rope_theta, 500000.0);
  EXPECT_EQ(v5->rope_scaling.type, RopeScalingType::kLlama3);
  EXPECT_DOUBLE_EQ(v5->rope_scaling.factor, 32.0);
  EXPECT_EQ(v5->dtype, DType::kF32);

  ExpectInvalid(Minimal(R"("rope_scaling": {"rope_type": "yarn", "factor": 4.0})"), "yarn");
  ExpectInvalid(Minimal(R"("rope_scaling": {"rope_type": "llama3", "factor": 8.0})"), "low_freq_factor");
  ExpectInvalid(Minimal(R"("rope_scaling": {"type": "linear"})"), "factor");
  ExpectInvalid(Minimal(R"("rope_scaling": {"type": "linear", "factor": 0.5})"), "factor");
  ExpectInvalid(Minimal(R"("rope_scaling": "linear")"), "rope_scaling");
  ExpectInvalid(Minimal(R"("rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 4.0,
                          "high_freq_factor": 1.0, "original_max_position_embeddings": 8192})"),
                "low_freq_factor");
}

TEST(ModelConfigTest, RejectsBrokenText) {
  ExpectInvalid("", "not valid JSON");
  ExpectInvalid("{\"vocab_size\": 5", "not valid JSON");
  ExpectInvalid("[1, 2]", "object");
  ExpectInvalid(std::string(200, '[') + std::string(200, ']'), "nests deeper");
  std::string big = Minimal(R"("pad": ")" + std::string(2 << 20, 'x') + "\"");
  ExpectInvalid(big, "over the limit");
}

TEST(ModelConfigTest, RejectsUnsupportedArchitecture) {
  ExpectInvalid(R"({"architectures": ["GPT2LMHeadModel"], "vocab_size": 5})", "GPT2LMHeadModel");
  ExpectInvalid(R"({"vocab_size": 5})", "architectures");
  ExpectInvalid(R"({"architectures": "LlamaForCausalLM"})", "architectures");
}

TEST(ModelConfigTest, RejectsMissingAndMistypedFields) {
  ExpectInvalid(R"({"architectures": ["LlamaForCausalLM"], "vocab_size": 512})", "hidden_size");
  ExpectInvalid(Minimal(R"("num_key_value_heads": "2")"), "num_key_value_heads");
  ExpectInvalid(Minimal(R"("rms_norm_eps": "1e-5")"), "rms_norm_eps");
  ExpectInvalid(Minimal(R"("tie_word_embeddings": 1)"), "tie_word_embeddings");
  ExpectInvalid(Minimal(R"("max_position_embeddings": 4096.5)"), "max_position_embeddings");
  ExpectInvalid(Minimal(R"("eos_token_id": [1, "2"])"), "eos_token_id");
  ExpectInvalid(Minimal(R"("torch_dtype": "float64")"), "float64");
  ExpectInvalid(Minimal(R"("hidden_act": "gelu")"), "hidden_act");
  ExpectInvalid(Minimal(R"("mlp_bias": true)"), "mlp_bias");
  ExpectInvalid(Minimal(R"("num_hidden_layers": 99999999999)"), "num_hidden_layers");
}

TEST(ModelConfigTest, ValidateRejectsInconsistentShapes) {
  ExpectInvalid(Minimal(R"("num_key_value_heads": 3)"), "not a multiple");
  ExpectInvalid(Minimal(R"("num_key_value_heads": 8)"), "num_key_value_heads");
  ExpectInvalid(Minimal(R"("head_dim": 15)"), "even");
  ExpectInvalid(Minimal(R"("eos_token_id": 512)"), "eos_token_id");
  ExpectInvalid(Minimal(R"("bos_token_id": -1)"), "bos_token_id");
  ExpectInvalid(Minimal(R"("rope_theta": 0)"), "rope_theta");
  ExpectInvalid(Minimal(R"("rms_norm_eps": 0)"), "rms_norm_eps");
  std::string bad_division(kMinimal);
  bad_division.replace(bad_division.find("\"hidden_size\": 64"), 17, "\"hidden_size\": 66");
  ExpectInvalid(bad_division + "}", "head_dim");

  ModelConfig c;  // all zero sizes
  Status st = c.Validate();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("vocab_size"), std::string::npos) << st.message();
}

TEST(GenerationConfigTest, ParsesLlamaAndQwenFiles) {
  StatusOr<GenerationConfig> llama =
      ParseGenerationConfig(ReadAll(TestDataPath("generation/llama-3.1-8b-instruct.json")));
  ASSERT_TRUE(llama.ok()) << llama.status().ToString();
  EXPECT_EQ(llama->eos_token_ids, (std::vector<int>{128001, 128008, 128009}));
  EXPECT_EQ(llama->bos_token_id, 128000);
  EXPECT_TRUE(llama->do_sample);
  EXPECT_DOUBLE_EQ(llama->temperature.value_or(-1), 0.6);
  EXPECT_DOUBLE_EQ(llama->top_p.value_or(-1), 0.9);
  EXPECT_FALSE(llama->top_k.has_value());
  EXPECT_FALSE(llama->repetition_penalty.has_value());

  StatusOr<GenerationConfig> qwen = ParseGenerationConfig(ReadAll(TestDataPath("generation/qwen2.5-7b-instruct.json")));
  ASSERT_TRUE(qwen.ok()) << qwen.status().ToString();
  EXPECT_EQ(qwen->eos_token_ids, (std::vector<int>{151645, 151643}));
  EXPECT_EQ(qwen->top_k, 20);
  EXPECT_DOUBLE_EQ(qwen->repetition_penalty.value_or(-1), 1.05);
  EXPECT_DOUBLE_EQ(qwen->top_p.value_or(-1), 0.8);
}

TEST(GenerationConfigTest, RejectsBadValues) {
  EXPECT_FALSE(ParseGenerationConfig("not json").ok());
  EXPECT_FALSE(ParseGenerationConfig("[]").ok());
  EXPECT_FALSE(ParseGenerationConfig(R"({"top_p": 1.5})").ok());
  EXPECT_FALSE(ParseGenerationConfig(R"({"temperature": -1})").ok());
  EXPECT_FALSE(ParseGenerationConfig(R"({"eos_token_id": "2"})").ok());
  EXPECT_FALSE(ParseGenerationConfig(R"({"do_sample": "yes"})").ok());
  StatusOr<GenerationConfig> nulls = ParseGenerationConfig(R"({"temperature": null, "eos_token_id": 7})");
  ASSERT_TRUE(nulls.ok()) << nulls.status().ToString();
  EXPECT_FALSE(nulls->temperature.has_value());
  EXPECT_EQ(nulls->eos_token_ids, std::vector<int>{7});
}

TEST(GenerationConfigTest, LoadFromDirectory) {
  std::string dir = testing::ScratchDir();
  StatusOr<GenerationConfig> missing = LoadGenerationConfig(dir);  // no file: defaults
  ASSERT_TRUE(missing.ok()) << missing.status().ToString();
  EXPECT_TRUE(missing->eos_token_ids.empty());
  testing::WriteAll(dir + "/generation_config.json", "{\"top_k\": [");
  StatusOr<GenerationConfig> broken = LoadGenerationConfig(dir);
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find(dir), std::string::npos) << broken.status().message();

  EXPECT_EQ(LoadModelConfig(dir).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace tandem::model
