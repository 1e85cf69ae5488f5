#include "tools/make_model/presets.h"

#include "nlohmann/json.hpp"

namespace tandem::tools {
namespace {

using model::ModelConfig;
using model::ModelFamily;
using model::RopeScalingType;

struct Preset {
  const char* name;
  const char* description;
  ModelConfig (*make)();
};

ModelConfig Shape(ModelFamily family, int vocab, int hidden, int ffn, int layers, int heads, int kv_heads) {
  ModelConfig c;
  c.vocab_size = vocab;
  c.hidden_size = hidden;
  c.intermediate_size = ffn;
  c.num_layers = layers;
  c.num_heads = heads;
  c.num_kv_heads = kv_heads;
  c.head_dim = hidden / heads;
  ApplyFamily(family, &c);
  return c;
}

ModelConfig Tiny() {
  ModelConfig c = Shape(ModelFamily::kLlama, 512, 64, 128, 2, 4, 2);
  c.head_dim = 16;
  c.max_position_embeddings = 4096;
  c.rms_norm_eps = 1e-5;
  c.dtype = DType::kF32;
  return c;  // token ids come from the built-in tokenizer
}

ModelConfig Llama3(int hidden, int ffn, int layers, int heads) {
  ModelConfig c = Shape(ModelFamily::kLlama, 128256, hidden, ffn, layers, heads, 8);
  c.rope_theta = 500000.0;
  c.rope_scaling = {RopeScalingType::kLlama3, 8.0, 1.0, 4.0, 8192};
  c.max_position_embeddings = 131072;
  c.rms_norm_eps = 1e-5;
  c.bos_token_id = 128000;
  c.eos_token_ids = {128001, 128008, 128009};
  return c;
}

ModelConfig Llama3_8B() { return Llama3(4096, 14336, 32, 32); }
ModelConfig Llama3_70B() { return Llama3(8192, 28672, 80, 64); }

ModelConfig Qwen25_7B() {
  ModelConfig c = Shape(ModelFamily::kQwen2, 152064, 3584, 18944, 28, 28, 4);
  c.rope_theta = 1e6;
  c.max_position_embeddings = 32768;
  c.bos_token_id = 151643;
  c.eos_token_ids = {151645, 151643};
  return c;
}

ModelConfig Qwen3_8B() {
  ModelConfig c = Shape(ModelFamily::kQwen3, 151936, 4096, 12288, 36, 32, 8);
  c.rope_theta = 1e6;
  c.max_position_embeddings = 40960;
  c.bos_token_id = 151643;
  c.eos_token_ids = {151645, 151643};
  return c;
}

ModelConfig Mistral7B() {
  ModelConfig c = Shape(ModelFamily::kMistral, 32768, 4096, 14336, 32, 32, 8);
  c.rope_theta = 1e6;
  c.max_position_embeddings = 32768;
  c.rms_norm_eps = 1e-5;
  c.bos_token_id = 1;
  c.eos_token_ids = {2};
  return c;
}

constexpr Preset kPresets[] = {
    {"tiny",
     "Llama-style, vocab 512, hidden 64, 2 layers, 4 heads / 2 KV heads, head_dim 16, ffn 128, f32 "
     "(0.14 M params; built-in byte-level BPE tokenizer)",
     Tiny},
    {"llama3-8b",
     "Llama-3.1-8B shape: 32 layers, hidden 4096, 32/8 heads, ffn 14336, llama3 RoPE scaling, bf16 (~16 GB)",
     Llama3_8B},
    {"llama3-70b",
     "Llama-3.1-70B shape: 80 layers, hidden 8192, 64/8 heads, ffn 28672, bf16 (~141 GB; "
     "use --num-layers)",
     Llama3_70B},
    {"qwen2.5-7b", "Qwen2.5-7B shape: 28 layers, hidden 3584, 28/4 heads, ffn 18944, qkv bias, bf16 (~15 GB)",
     Qwen25_7B},
    {"qwen3-8b", "Qwen3-8B shape: 36 layers, hidden 4096, 32/8 heads, ffn 12288, q/k norm, bf16 (~16 GB)", Qwen3_8B},
    {"mistral-7b", "Mistral-7B-v0.3 shape: 32 layers, hidden 4096, 32/8 heads, ffn 14336, bf16 (~14 GB)", Mistral7B},
};

}  // namespace

std::vector<std::string> PresetNames() {
  std::vector<std::string> names;
  for (const Preset& p : kPresets) names.push_back(p.name);
  return names;
}

std::string DescribePresets() {
  std::string out;
  for (const Preset& p : kPresets) out += "  " + std::string(p.name) + ": " + p.description + "\n";
  return out;
}

StatusOr<ModelConfig> PresetConfig(std::string_view name) {
  for (const Preset& p : kPresets) {
    if (name == p.name) return p.make();
  }
  std::string known;
  for (const Preset& p : kPresets) known += (known.empty() ? "" : ", ") + std::string(p.name);
  return InvalidArgumentError("unknown preset '" + std::string(name) + "' (known: " + known + ")");
}

void ApplyFamily(ModelFamily family, ModelConfig* config) {
  config->family = family;
  config->architecture = std::string(model::ModelFamilyArchitecture(family));
  config->attention_bias = family == ModelFamily::kQwen2;
  config->qk_norm = family == ModelFamily::kQwen3;
}

StatusOr<ModelFamily> ParseFamily(std::string_view name) {
  for (ModelFamily f : {ModelFamily::kLlama, ModelFamily::kMistral, ModelFamily::kQwen2, ModelFamily::kQwen3}) {
    if (name == model::ModelFamilyName(f)) return f;
  }
  return InvalidArgumentError("unknown family '" + std::string(name) + "' (known: llama, mistral, qwen2, qwen3)");
}

std::string ModelConfigJson(const ModelConfig& c) {
  nlohmann::json j;  // std::map: keys come out sorted, as transformers writes them
  j["architectures"] = {c.architecture};
  j["model_type"] = model::ModelFamilyName(c.family);
  if (c.family != ModelFamily::kQwen2) j["attention_bias"] = c.attention_bias;  // Qwen2: always biased
  if (c.family == ModelFamily::kLlama) j["mlp_bias"] = false;
  j["attention_dropout"] = 0.0;
  j["bos_token_id"] = c.bos_token_id ? nlohmann::json(*c.bos_token_id) : nlohmann::json(nullptr);
  if (c.eos_token_ids.size() == 1) {
    j["eos_token_id"] = c.eos_token_ids[0];
  } else {
    j["eos_token_id"] = c.eos_token_ids;
  }
  j["head_dim"] = c.head_dim;
  j["hidden_act"] = "silu";
  j["hidden_size"] = c.hidden_size;
  j["initializer_range"] = 0.02;
  j["intermediate_size"] = c.intermediate_size;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["num_attention_heads"] = c.num_heads;
  j["num_hidden_layers"] = c.num_layers;
  j["num_key_value_heads"] = c.num_kv_heads;
  j["rms_norm_eps"] = c.rms_norm_eps;
  j["rope_theta"] = c.rope_theta;
  const model::RopeScaling& r = c.rope_scaling;
  if (r.type == RopeScalingType::kLinear) {
    j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", r.factor}};
  } else if (r.type == RopeScalingType::kLlama3) {
    j["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", r.factor},
                         {"low_freq_factor", r.low_freq_factor},
                         {"high_freq_factor", r.high_freq_factor},
                         {"original_max_position_embeddings", r.original_max_position_embeddings}};
  } else {
    j["rope_scaling"] = nullptr;
  }
  if (c.family != ModelFamily::kLlama) {
    j["sliding_window"] = c.sliding_window ? nlohmann::json(*c.sliding_window) : nlohmann::json(nullptr);
  }
  if (c.family == ModelFamily::kQwen2 || c.family == ModelFamily::kQwen3) {
    j["use_sliding_window"] = c.sliding_window.has_value();
  }
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["torch_dtype"] = DTypeName(c.dtype);
  j["use_cache"] = true;
  j["vocab_size"] = c.vocab_size;
  return j.dump(2) + "\n";
}

std::string GenerationConfigJson(const ModelConfig& c) {
  nlohmann::json j;
  if (c.bos_token_id) j["bos_token_id"] = *c.bos_token_id;
  j["eos_token_id"] = c.eos_token_ids;
  j["do_sample"] = false;
  return j.dump(2) + "\n";
}

}  // namespace tandem::tools
