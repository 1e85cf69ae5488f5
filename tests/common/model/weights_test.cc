// ModelWeights::Open over single-file and sharded directories, its error
// cases, and CheckModelWeights against the tensor list of a config.
#include "common/model/weights.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "common/model/model_tensors.h"
#include "common/model/safetensors_writer.h"
#include "tests/common/model/test_util.h"

namespace tandem::model {
namespace {

using testing::RawSafetensors;
using testing::ScratchDir;
using testing::WriteAll;

TensorData F32(const std::string& name, std::vector<int64_t> shape, std::vector<float> values) {
  return {{name, DType::kF32, std::move(shape)}, EncodeFloats(values, DType::kF32)};
}

void ExpectError(const StatusOr<std::unique_ptr<ModelWeights>>& weights, StatusCode code,
                 std::vector<std::string> needles) {
  ASSERT_FALSE(weights.ok()) << "opened";
  EXPECT_EQ(weights.status().code(), code) << weights.status().ToString();
  for (const std::string& needle : needles) {
    EXPECT_NE(weights.status().message().find(needle), std::string::npos)
        << "message '" << weights.status().message() << "' lacks '" << needle << "'";
  }
}

// Two shards plus an index, as HF writes them.
std::string MakeShardedDir() {
  std::string dir = ScratchDir();
  EXPECT_TRUE(
      WriteSafetensorsFile(dir + "/model-00001-of-00002.safetensors", {F32("a", {2}, {1, 2}), F32("b", {1}, {3})})
          .ok());
  EXPECT_TRUE(WriteSafetensorsFile(dir + "/model-00002-of-00002.safetensors", {F32("c", {3}, {4, 5, 6})}).ok());
  WriteAll(dir + "/model.safetensors.index.json", R"({
    "metadata": {"total_size": 24},
    "weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00001-of-00002.safetensors",
                   "c": "model-00002-of-00002.safetensors"}})");
  return dir;
}

TEST(ModelWeightsTest, OpensSingleFile) {
  std::string dir = ScratchDir();
  ASSERT_TRUE(WriteSafetensorsFile(dir + "/model.safetensors", {F32("w", {2, 3}, {0, 1, 2, 3, 4, 5})}).ok());
  StatusOr<std::unique_ptr<ModelWeights>> weights = ModelWeights::Open(dir);
  ASSERT_TRUE(weights.ok()) << weights.status().ToString();
  EXPECT_EQ((*weights)->Names(), std::vector<std::string>{"w"});
  EXPECT_TRUE((*weights)->Contains("w"));
  EXPECT_FALSE((*weights)->Contains("v"));
  StatusOr<TensorView> w = (*weights)->Get("w", {2, 3});
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(w->GetFloat(5), 5.0f);
}

TEST(ModelWeightsTest, OpensShardedDirectory) {
  std::string dir = MakeShardedDir();
  StatusOr<std::unique_ptr<ModelWeights>> weights = ModelWeights::Open(dir);
  ASSERT_TRUE(weights.ok()) << weights.status().ToString();
  EXPECT_EQ((*weights)->Names(), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ((*weights)->Get("c")->GetFloat(2), 6.0f);
  EXPECT_EQ((*weights)->Get("a")->GetFloat(1), 2.0f);
}

TEST(ModelWeightsTest, MissingTensorAndWrongShape) {
  std::string dir = MakeShardedDir();
  StatusOr<std::unique_ptr<ModelWeights>> weights = ModelWeights::Open(dir);
  ASSERT_TRUE(weights.ok());
  StatusOr<TensorView> missing = (*weights)->Get("model.norm.weight");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("model.norm.weight"), std::string::npos);
  StatusOr<TensorView> wrong = (*weights)->Get("c", {1, 3});
  EXPECT_EQ(wrong.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(wrong.status().message().find("[3]"), std::string::npos) << wrong.status().message();
  EXPECT_NE(wrong.status().message().find("[1, 3]"), std::string::npos) << wrong.status().message();
}

TEST(ModelWeightsTest, IndexPointingToMissingShard) {
  std::string dir = MakeShardedDir();
  std::filesystem::remove(dir + "/model-00002-of-00002.safetensors");
  ExpectError(ModelWeights::Open(dir), StatusCode::kNotFound,
              {"model.safetensors.index.json", "model-00002-of-00002.safetensors", "'c'"});
}

TEST(ModelWeightsTest, IndexListingTensorAbsentFromShard) {
  std::string dir = MakeShardedDir();
  WriteAll(dir + "/model.safetensors.index.json", R"({"weight_map": {
      "a": "model-00001-of-00002.safetensors", "c": "model-00001-of-00002.safetensors"}})");
  ExpectError(ModelWeights::Open(dir), StatusCode::kNotFound, {"'c'", "model-00001-of-00002.safetensors"});
}

TEST(ModelWeightsTest, BadIndexFiles) {
  std::string dir = MakeShardedDir();
  WriteAll(dir + "/model.safetensors.index.json", "{\"weight_map\": ");
  ExpectError(ModelWeights::Open(dir), StatusCode::kInvalidArgument, {"index.json", "not valid JSON"});
  WriteAll(dir + "/model.safetensors.index.json", R"({"metadata": {}})");
  ExpectError(ModelWeights::Open(dir), StatusCode::kInvalidArgument, {"weight_map"});
  WriteAll(dir + "/model.safetensors.index.json", R"({"weight_map": {"a": "../../etc/passwd"}})");
  ExpectError(ModelWeights::Open(dir), StatusCode::kInvalidArgument, {"'a'", "file name"});
  WriteAll(dir + "/model.safetensors.index.json", R"({"weight_map": {"a": 1}})");
  ExpectError(ModelWeights::Open(dir), StatusCode::kInvalidArgument, {"'a'"});
}

TEST(ModelWeightsTest, DuplicateTensorAcrossShards) {
  std::string dir = MakeShardedDir();
  ASSERT_TRUE(WriteSafetensorsFile(dir + "/model-00002-of-00002.safetensors", {F32("a", {2}, {1, 2})}).ok());
  ExpectError(ModelWeights::Open(dir), StatusCode::kInvalidArgument, {"'a'", "another shard"});
}

TEST(ModelWeightsTest, NoWeightFiles) {
  ExpectError(ModelWeights::Open(ScratchDir()), StatusCode::kNotFound, {"model.safetensors"});
}

TEST(ModelWeightsTest, BrokenShardNamesFileAndTensor) {
  std::string dir = ScratchDir();
  WriteAll(dir + "/model.safetensors",
           RawSafetensors(R"({"model.norm.weight": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})", 10));
  ExpectError(ModelWeights::Open(dir), StatusCode::kInvalidArgument,
              {dir + "/model.safetensors", "model.norm.weight", "truncated"});
  WriteAll(dir + "/model.safetensors",
           RawSafetensors(R"({"model.norm.weight": {"dtype": "X9", "shape": [4], "data_offsets": [0, 16]}})", 16));
  ExpectError(ModelWeights::Open(dir), StatusCode::kInvalidArgument, {"model.norm.weight", "unknown dtype"});
}

ModelConfig TinyConfig() {
  ModelConfig c;
  c.family = ModelFamily::kQwen3;
  c.vocab_size = 10;
  c.hidden_size = 8;
  c.intermediate_size = 12;
  c.num_layers = 1;
  c.num_heads = 2;
  c.num_kv_heads = 1;
  c.head_dim = 6;
  c.attention_bias = true;
  c.qk_norm = true;
  c.dtype = DType::kF32;
  return c;
}

TEST(ModelTensorsTest, ListsHfNamesAndShapes) {
  std::vector<TensorSpec> specs = ExpectedTensors(TinyConfig());
  // Written out by hand from the HF Qwen3 module tree.
  std::vector<std::pair<std::string, std::vector<int64_t>>> expected = {
      {"model.embed_tokens.weight", {10, 8}},
      {"model.layers.0.input_layernorm.weight", {8}},
      {"model.layers.0.self_attn.q_proj.weight", {12, 8}},
      {"model.layers.0.self_attn.q_proj.bias", {12}},
      {"model.layers.0.self_attn.k_proj.weight", {6, 8}},
      {"model.layers.0.self_attn.k_proj.bias", {6}},
      {"model.layers.0.self_attn.v_proj.weight", {6, 8}},
      {"model.layers.0.self_attn.v_proj.bias", {6}},
      {"model.layers.0.self_attn.o_proj.weight", {8, 12}},
      {"model.layers.0.self_attn.q_norm.weight", {6}},
      {"model.layers.0.self_attn.k_norm.weight", {6}},
      {"model.layers.0.post_attention_layernorm.weight", {8}},
      {"model.layers.0.mlp.gate_proj.weight", {12, 8}},
      {"model.layers.0.mlp.up_proj.weight", {12, 8}},
      {"model.layers.0.mlp.down_proj.weight", {8, 12}},
      {"model.norm.weight", {8}},
      {"lm_head.weight", {10, 8}},
  };
  ASSERT_EQ(specs.size(), expected.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    EXPECT_EQ(specs[i].name, expected[i].first);
    EXPECT_EQ(specs[i].shape, expected[i].second) << specs[i].name;
  }
  ModelConfig tied = TinyConfig();
  tied.tie_word_embeddings = true;
  EXPECT_EQ(ExpectedTensors(tied).back().name, "model.norm.weight");
}

TEST(ModelTensorsTest, CheckModelWeightsFindsMissingAndMisshapedTensors) {
  ModelConfig config = TinyConfig();
  std::vector<TensorData> tensors;
  for (const TensorSpec& spec : ExpectedTensors(config)) {
    tensors.push_back({spec, std::vector<std::byte>(spec.NumBytes())});
  }
  std::string dir = ScratchDir();
  ASSERT_TRUE(WriteSafetensorsFile(dir + "/model.safetensors", tensors).ok());
  auto weights = ModelWeights::Open(dir);
  ASSERT_TRUE(weights.ok()) << weights.status().ToString();
  EXPECT_TRUE(CheckModelWeights(config, **weights).ok());

  tensors.pop_back();           // lm_head
  tensors[3].spec.shape = {6};  // q_proj.bias too short
  tensors[3].bytes.resize(24);
  ASSERT_TRUE(WriteSafetensorsFile(dir + "/model.safetensors", tensors).ok());
  weights = ModelWeights::Open(dir);
  ASSERT_TRUE(weights.ok());
  Status st = CheckModelWeights(config, **weights);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("q_proj.bias"), std::string::npos) << st.message();
  config.attention_bias = false;
  st = CheckModelWeights(config, **weights);
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_NE(st.message().find("lm_head.weight"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace tandem::model
