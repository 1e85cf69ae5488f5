// Runs tandem-make-model and loads its output with the loader: config values,
// tensor names and shapes, weight statistics, determinism, sharding, and the
// tiny tokenizer (checked with a small BPE encoder written here).
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

#include "common/model/model_config.h"
#include "common/model/model_tensors.h"
#include "common/model/weights.h"
#include "tests/common/model/test_util.h"

namespace tandem::model {
namespace {

using testing::ReadAll;
using testing::ScratchDir;

int RunTool(const std::string& args) {
  std::string command = std::string(TANDEM_MAKE_MODEL_PATH) + " " + args + " > /dev/null 2>&1";
  int rc = std::system(command.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

std::unique_ptr<ModelWeights> OpenWeights(const std::string& dir) {
  StatusOr<std::unique_ptr<ModelWeights>> weights = ModelWeights::Open(dir);
  EXPECT_TRUE(weights.ok()) << weights.status().ToString();
  return weights.ok() ? std::move(weights).value() : nullptr;
}

void MeanStd(const TensorView& t, double* mean, double* std) {
  double sum = 0, sum_sq = 0;
  for (int64_t i = 0; i < t.NumElements(); ++i) {
    sum += t.GetFloat(i);
    sum_sq += static_cast<double>(t.GetFloat(i)) * t.GetFloat(i);
  }
  *mean = sum / t.NumElements();
  *std = std::sqrt(sum_sq / t.NumElements() - *mean * *mean);
}

TEST(MakeModelTest, TinyPresetLoadsWithExpectedShapes) {
  std::string dir = ScratchDir() + "/tiny";
  ASSERT_EQ(RunTool("--preset tiny -o " + dir), 0);
  StatusOr<ModelConfig> config = LoadModelConfig(dir);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->family, ModelFamily::kLlama);
  EXPECT_EQ(config->vocab_size, 512);
  EXPECT_EQ(config->hidden_size, 64);
  EXPECT_EQ(config->num_layers, 2);
  EXPECT_EQ(config->num_heads, 4);
  EXPECT_EQ(config->num_kv_heads, 2);
  EXPECT_EQ(config->head_dim, 16);
  EXPECT_EQ(config->intermediate_size, 128);
  EXPECT_EQ(config->dtype, DType::kF32);
  ASSERT_TRUE(config->bos_token_id.has_value());
  EXPECT_EQ(config->eos_token_ids.size(), 2u);
  StatusOr<GenerationConfig> generation = LoadGenerationConfig(dir);
  ASSERT_TRUE(generation.ok()) << generation.status().ToString();
  EXPECT_EQ(generation->eos_token_ids, config->eos_token_ids);

  std::unique_ptr<ModelWeights> weights = OpenWeights(dir);
  ASSERT_NE(weights, nullptr);
  // 2 layers x 9 tensors + embed_tokens + norm + lm_head.
  EXPECT_EQ(weights->Names().size(), 21u);
  const std::pair<const char*, std::vector<int64_t>> expected[] = {
      {"model.embed_tokens.weight", {512, 64}},
      {"model.layers.0.self_attn.q_proj.weight", {64, 64}},
      {"model.layers.1.self_attn.k_proj.weight", {32, 64}},
      {"model.layers.1.self_attn.v_proj.weight", {32, 64}},
      {"model.layers.0.self_attn.o_proj.weight", {64, 64}},
      {"model.layers.0.mlp.gate_proj.weight", {128, 64}},
      {"model.layers.1.mlp.up_proj.weight", {128, 64}},
      {"model.layers.1.mlp.down_proj.weight", {64, 128}},
      {"model.layers.1.input_layernorm.weight", {64}},
      {"model.layers.0.post_attention_layernorm.weight", {64}},
      {"model.norm.weight", {64}},
      {"lm_head.weight", {512, 64}},
  };
  for (const auto& [name, shape] : expected) {
    StatusOr<TensorView> t = weights->Get(name, shape);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    if (t.ok()) {
      EXPECT_EQ(t->dtype, DType::kF32) << name;
    }
  }
  EXPECT_FALSE(weights->Contains("model.layers.0.self_attn.q_proj.bias"));
  EXPECT_TRUE(CheckModelWeights(*config, *weights).ok());

  double mean = 0, std = 0;
  MeanStd(*weights->Get("model.embed_tokens.weight"), &mean, &std);
  EXPECT_NEAR(mean, 0.0, 0.002);
  EXPECT_NEAR(std, 0.02, 0.002);
  MeanStd(*weights->Get("model.layers.0.input_layernorm.weight"), &mean, &std);
  EXPECT_NEAR(mean, 1.0, 0.05);
  EXPECT_GT(std, 0.0);
}

TEST(MakeModelTest, FamiliesDtypesAndTying) {
  std::string dir = ScratchDir();
  ASSERT_EQ(RunTool("--family qwen3 --dtype bf16 --tie-word-embeddings true -o " + dir + "/q3"), 0);
  StatusOr<ModelConfig> q3 = LoadModelConfig(dir + "/q3");
  ASSERT_TRUE(q3.ok()) << q3.status().ToString();
  EXPECT_EQ(q3->family, ModelFamily::kQwen3);
  EXPECT_TRUE(q3->qk_norm);
  EXPECT_TRUE(q3->tie_word_embeddings);
  std::unique_ptr<ModelWeights> w3 = OpenWeights(dir + "/q3");
  ASSERT_NE(w3, nullptr);
  EXPECT_FALSE(w3->Contains("lm_head.weight"));
  StatusOr<TensorView> q_norm = w3->Get("model.layers.1.self_attn.q_norm.weight", {16});
  ASSERT_TRUE(q_norm.ok()) << q_norm.status().ToString();
  EXPECT_EQ(q_norm->dtype, DType::kBF16);

  ASSERT_EQ(RunTool("--family qwen2 --num-layers 3 --hidden-size 96 --num-heads 6 -o " + dir + "/q2"), 0);
  StatusOr<ModelConfig> q2 = LoadModelConfig(dir + "/q2");
  ASSERT_TRUE(q2.ok()) << q2.status().ToString();
  EXPECT_TRUE(q2->attention_bias);
  EXPECT_EQ(q2->head_dim, 16);  // 96 / 6
  std::unique_ptr<ModelWeights> w2 = OpenWeights(dir + "/q2");
  ASSERT_NE(w2, nullptr);
  EXPECT_TRUE(w2->Get("model.layers.2.self_attn.k_proj.bias", {32}).ok());
  EXPECT_TRUE(w2->Get("model.layers.2.self_attn.q_proj.weight", {96, 96}).ok());
}

TEST(MakeModelTest, DeterministicForSeedAndThreadCount) {
  std::string dir = ScratchDir();
  // 40000 x 64 embeddings span three generator chunks, so threads split the work.
  const std::string shape = " --vocab-size 40000 --tie-word-embeddings true --dtype bf16 -o ";
  ASSERT_EQ(RunTool("--seed 7 --threads 1" + shape + dir + "/a"), 0);
  ASSERT_EQ(RunTool("--seed 7 --threads 3" + shape + dir + "/b"), 0);
  ASSERT_EQ(RunTool("--seed 8 --threads 1" + shape + dir + "/c"), 0);
  std::string a = ReadAll(dir + "/a/model.safetensors");
  EXPECT_EQ(a, ReadAll(dir + "/b/model.safetensors"));
  EXPECT_NE(a, ReadAll(dir + "/c/model.safetensors"));
  EXPECT_EQ(ReadAll(dir + "/a/tokenizer.json"), ReadAll(dir + "/c/tokenizer.json"));
}

TEST(MakeModelTest, ShardsBigModels) {
  std::string dir = ScratchDir() + "/sharded";
  ASSERT_EQ(RunTool("--max-shard-size 200KB -o " + dir), 0);
  EXPECT_FALSE(std::filesystem::exists(dir + "/model.safetensors"));
  nlohmann::json index = nlohmann::json::parse(ReadAll(dir + "/model.safetensors.index.json"));
  std::set<std::string> shards;
  for (const auto& [name, shard] : index["weight_map"].items()) shards.insert(shard.get<std::string>());
  EXPECT_GE(shards.size(), 2u);
  EXPECT_TRUE(shards.count("model-00001-of-0000" + std::to_string(shards.size()) + ".safetensors"));
  StatusOr<ModelConfig> config = LoadModelConfig(dir);
  ASSERT_TRUE(config.ok());
  std::unique_ptr<ModelWeights> weights = OpenWeights(dir);
  ASSERT_NE(weights, nullptr);
  EXPECT_EQ(weights->Names().size(), 21u);
  EXPECT_TRUE(CheckModelWeights(*config, *weights).ok());
  uint64_t total = 0;
  for (const std::string& name : weights->Names()) total += weights->Get(name)->num_bytes;
  EXPECT_EQ(index["metadata"]["total_size"].get<uint64_t>(), total);
}

TEST(MakeModelTest, RejectsBadArguments) {
  std::string dir = ScratchDir();
  EXPECT_NE(RunTool("--preset nope -o " + dir + "/x"), 0);
  EXPECT_NE(RunTool("--num-kv-heads 3 -o " + dir + "/x"), 0);
  EXPECT_NE(RunTool("--vocab-size 100 -o " + dir + "/x"), 0);  // smaller than the tokenizer
  EXPECT_NE(RunTool(""), 0);                                   // -o is required
  ASSERT_EQ(RunTool("-o " + dir + "/y"), 0);
  EXPECT_NE(RunTool("-o " + dir + "/y"), 0);  // exists: needs --force
  EXPECT_EQ(RunTool("--force -o " + dir + "/y"), 0);
  EXPECT_EQ(RunTool("--help"), 0);
}

TEST(MakeModelTest, CopiesTokenizerFromDirectory) {
  std::string dir = ScratchDir();
  ASSERT_EQ(RunTool("-o " + dir + "/source"), 0);
  // A different shape, tokenizer taken from `source`: ids come from its files.
  ASSERT_EQ(RunTool("--vocab-size 600 --hidden-size 32 --num-heads 2 --num-kv-heads 1 --tokenizer-dir " + dir +
                    "/source -o " + dir + "/copy"),
            0);
  EXPECT_EQ(ReadAll(dir + "/copy/tokenizer.json"), ReadAll(dir + "/source/tokenizer.json"));
  EXPECT_EQ(ReadAll(dir + "/copy/tokenizer_config.json"), ReadAll(dir + "/source/tokenizer_config.json"));
  StatusOr<ModelConfig> source = LoadModelConfig(dir + "/source");
  StatusOr<ModelConfig> copy = LoadModelConfig(dir + "/copy");
  ASSERT_TRUE(source.ok() && copy.ok());
  EXPECT_EQ(copy->vocab_size, 600);
  EXPECT_EQ(copy->head_dim, 16);
  EXPECT_EQ(copy->bos_token_id, source->bos_token_id);
  ASSERT_EQ(copy->eos_token_ids.size(), 1u);  // the eos_token of tokenizer_config.json
  EXPECT_EQ(copy->eos_token_ids[0], source->eos_token_ids[0]);
  // Token ids past vocab_size, or no tokenizer at all, are refused.
  EXPECT_NE(RunTool("--vocab-size 300 --tokenizer-dir " + dir + "/source -o " + dir + "/small"), 0);
  EXPECT_NE(RunTool("--tokenizer-dir " + dir + "/nothing -o " + dir + "/none"), 0);
}

// --- The tiny tokenizer, read back with an encoder written for this test. ---

// GPT-2's byte-to-unicode map as published: printable bytes keep their code point;
// space -> U+0120 'Ġ', newline -> U+010A 'Ċ'.
std::string ByteChar(unsigned char b) {
  if (b == ' ') return "\xC4\xA0";
  if (b == '\n') return "\xC4\x8A";
  return std::string(1, static_cast<char>(b));  // ASCII letters only in this test
}

// Greedy lowest-rank-first BPE over one pre-tokenized piece.
std::vector<int> Encode(const nlohmann::json& model, const std::string& piece) {
  std::map<std::pair<std::string, std::string>, int> ranks;
  for (size_t i = 0; i < model["merges"].size(); ++i) {
    std::string merge = model["merges"][i];
    size_t space = merge.find(' ');
    ranks[{merge.substr(0, space), merge.substr(space + 1)}] = static_cast<int>(i);
  }
  std::vector<std::string> parts;
  for (unsigned char c : piece) parts.push_back(ByteChar(c));
  while (parts.size() > 1) {
    int best = -1;
    size_t at = 0;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      auto it = ranks.find({parts[i], parts[i + 1]});
      if (it != ranks.end() && (best < 0 || it->second < best)) best = it->second, at = i;
    }
    if (best < 0) break;
    parts[at] += parts[at + 1];
    parts.erase(parts.begin() + static_cast<long>(at) + 1);
  }
  std::vector<int> ids;
  for (const std::string& p : parts) ids.push_back(model["vocab"].at(p).get<int>());
  return ids;
}

TEST(MakeModelTest, TinyTokenizerIsByteLevelBpe) {
  std::string dir = ScratchDir() + "/tok";
  ASSERT_EQ(RunTool("-o " + dir), 0);
  nlohmann::json tok = nlohmann::json::parse(ReadAll(dir + "/tokenizer.json"));
  nlohmann::json tok_config = nlohmann::json::parse(ReadAll(dir + "/tokenizer_config.json"));
  StatusOr<ModelConfig> config = LoadModelConfig(dir);
  ASSERT_TRUE(config.ok());
  const nlohmann::json& model = tok["model"];
  EXPECT_EQ(model["type"], "BPE");
  EXPECT_EQ(tok["pre_tokenizer"]["type"], "ByteLevel");
  EXPECT_EQ(tok["decoder"]["type"], "ByteLevel");
  EXPECT_EQ(tok["post_processor"]["type"], "TemplateProcessing");
  EXPECT_EQ(model["vocab"].at("A"), 65);
  EXPECT_EQ(model["vocab"].at("\xC4\xA0"), 32);  // 'Ġ' is the space byte
  EXPECT_EQ(model["vocab"].at("\xC4\x8A"), 10);  // 'Ċ' is the newline byte
  int max_id = 0;
  for (const auto& [text, id] : model["vocab"].items()) max_id = std::max(max_id, id.get<int>());
  std::map<std::string, int> specials;
  for (const auto& t : tok["added_tokens"]) {
    specials[t["content"]] = t["id"];
    max_id = std::max(max_id, t["id"].get<int>());
    EXPECT_TRUE(t["special"].get<bool>());
  }
  EXPECT_LT(max_id, config->vocab_size);
  for (const char* s :
       {"<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"}) {
    EXPECT_TRUE(specials.count(s)) << s;
  }
  EXPECT_EQ(config->bos_token_id, specials["<|begin_of_text|>"]);
  EXPECT_EQ(config->eos_token_ids[0], specials["<|eot_id|>"]);
  EXPECT_EQ(tok["post_processor"]["special_tokens"]["<|begin_of_text|>"]["ids"][0], specials["<|begin_of_text|>"]);
  EXPECT_EQ(tok_config["bos_token"], "<|begin_of_text|>");
  EXPECT_EQ(tok_config["eos_token"], "<|eot_id|>");
  std::string chat_template = tok_config["chat_template"];
  EXPECT_NE(chat_template.find("<|start_header_id|>"), std::string::npos);
  EXPECT_NE(chat_template.find("add_generation_prompt"), std::string::npos);

  // Common words are one token; a sentence is far fewer tokens than bytes.
  for (const char* word : {" the", " and", " is", " you", " of"}) {
    EXPECT_EQ(Encode(model, word).size(), 1u) << "'" << word << "'";
  }
  size_t tokens = 0;
  std::string sentence = "The dog and the cat are in the house";
  for (const char* piece : {"The", " dog", " and", " the", " cat", " are", " in", " the", " house"}) {
    tokens += Encode(model, piece).size();
  }
  EXPECT_LE(tokens * 3, sentence.size()) << tokens << " tokens";
}

}  // namespace
}  // namespace tandem::model
