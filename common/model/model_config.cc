#include "common/model/model_config.h"

#include <array>
#include <exception>

#include "common/model/json_fields.h"
#include "common/model/json_limits.h"

namespace tandem::model {
namespace {

using nlohmann::json;

constexpr size_t kMaxConfigBytes = 1 << 20;
constexpr int kMaxConfigDepth = 16;
constexpr const char* kWhat = "config.json";

struct FamilyInfo {
  ModelFamily family;
  std::string_view model_type;
  std::string_view architecture;
  int default_max_position_embeddings;
};

constexpr std::array<FamilyInfo, 4> kFamilies = {{
    {ModelFamily::kLlama, "llama", "LlamaForCausalLM", 2048},
    {ModelFamily::kMistral, "mistral", "MistralForCausalLM", 4096 * 32},
    {ModelFamily::kQwen2, "qwen2", "Qwen2ForCausalLM", 32768},
    {ModelFamily::kQwen3, "qwen3", "Qwen3ForCausalLM", 32768},
}};

const FamilyInfo& Info(ModelFamily family) {
  for (const FamilyInfo& info : kFamilies) {
    if (info.family == family) return info;
  }
  return kFamilies[0];
}

// The family from `architectures[0]`, else from `model_type`.
Status ParseFamily(const json& root, const JsonFields& fields, ModelConfig* config) {
  std::string architecture;
  auto it = root.find("architectures");
  if (it != root.end() && !it->is_null()) {
    if (!it->is_array() || it->empty() || !(*it)[0].is_string()) {
      return fields.Error("architectures", "must be a non-empty list of strings");
    }
    architecture = (*it)[0].get<std::string>();
  }
  std::string model_type;
  TANDEM_RETURN_IF_ERROR(fields.String("model_type", &model_type));
  for (const FamilyInfo& info : kFamilies) {
    bool match = architecture.empty() ? model_type == info.model_type : architecture == info.architecture;
    if (match) {
      config->family = info.family;
      config->architecture = std::string(info.architecture);
      config->max_position_embeddings = info.default_max_position_embeddings;
      return Status::Ok();
    }
  }
  if (architecture.empty() && model_type.empty()) {
    return InvalidArgumentError(std::string(kWhat) + ": has neither 'architectures' nor 'model_type'");
  }
  return InvalidArgumentError(std::string(kWhat) + ": unsupported architecture '" +
                              (architecture.empty() ? model_type : architecture) +
                              "' (supported: LlamaForCausalLM, MistralForCausalLM, "
                              "Qwen2ForCausalLM, Qwen3ForCausalLM)");
}

Status ParseDType(const JsonFields& fields, ModelConfig* config) {
  // transformers >= 4.56 writes `dtype`; older versions `torch_dtype`.
  std::string_view key = fields.Has("dtype") ? "dtype" : "torch_dtype";
  std::string name;
  TANDEM_RETURN_IF_ERROR(fields.String(key, &name));
  if (name.empty()) return Status::Ok();
  for (DType dtype : {DType::kBF16, DType::kF16, DType::kF32}) {
    if (name == DTypeName(dtype)) {
      config->dtype = dtype;
      return Status::Ok();
    }
  }
  return fields.Error(key, "is '" + name + "'; supported: bfloat16, float16, float32");
}

// `rope_scaling` (or the rope part of transformers 5 `rope_parameters`).
Status ParseRopeScaling(const json& scaling, std::string_view key, ModelConfig* config) {
  if (!scaling.is_object())
    return InvalidArgumentError(std::string(kWhat) + ": '" + std::string(key) + "' must be an object or null");
  JsonFields fields(scaling, std::string(kWhat) + ": " + std::string(key));
  std::string type;
  TANDEM_RETURN_IF_ERROR(fields.String(fields.Has("rope_type") ? "rope_type" : "type", &type));
  RopeScaling& rope = config->rope_scaling;
  if (type.empty() || type == "default") {
    rope.type = RopeScalingType::kNone;
  } else if (type == "linear") {
    rope.type = RopeScalingType::kLinear;
    TANDEM_RETURN_IF_ERROR(fields.Require("factor"));
  } else if (type == "llama3") {
    rope.type = RopeScalingType::kLlama3;
    for (std::string_view k : {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"}) {
      TANDEM_RETURN_IF_ERROR(fields.Require(k));
    }
  } else {
    return fields.Error("rope_type", "is '" + type + "'; supported: default, linear, llama3");
  }
  TANDEM_RETURN_IF_ERROR(fields.Double("factor", &rope.factor));
  TANDEM_RETURN_IF_ERROR(fields.Double("low_freq_factor", &rope.low_freq_factor));
  TANDEM_RETURN_IF_ERROR(fields.Double("high_freq_factor", &rope.high_freq_factor));
  TANDEM_RETURN_IF_ERROR(fields.Int("original_max_position_embeddings", &rope.original_max_position_embeddings));
  return Status::Ok();
}

Status ParseRope(const json& root, const JsonFields& fields, ModelConfig* config) {
  TANDEM_RETURN_IF_ERROR(fields.Double("rope_theta", &config->rope_theta));
  auto params = root.find("rope_parameters");
  if (params != root.end() && !params->is_null()) {
    if (!params->is_object()) return fields.Error("rope_parameters", "must be an object");
    JsonFields param_fields(*params, std::string(kWhat) + ": rope_parameters");
    TANDEM_RETURN_IF_ERROR(param_fields.Double("rope_theta", &config->rope_theta));
    return ParseRopeScaling(*params, "rope_parameters", config);
  }
  auto scaling = root.find("rope_scaling");
  if (scaling == root.end() || scaling->is_null()) return Status::Ok();
  return ParseRopeScaling(*scaling, "rope_scaling", config);
}

Status ParseShapes(const JsonFields& f, ModelConfig* c) {
  for (std::string_view key :
       {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads"}) {
    TANDEM_RETURN_IF_ERROR(f.Require(key));
  }
  TANDEM_RETURN_IF_ERROR(f.Int("vocab_size", &c->vocab_size));
  TANDEM_RETURN_IF_ERROR(f.Int("hidden_size", &c->hidden_size));
  TANDEM_RETURN_IF_ERROR(f.Int("intermediate_size", &c->intermediate_size));
  TANDEM_RETURN_IF_ERROR(f.Int("num_hidden_layers", &c->num_layers));
  TANDEM_RETURN_IF_ERROR(f.Int("num_attention_heads", &c->num_heads));
  c->num_kv_heads = c->num_heads;  // no GQA unless stated
  TANDEM_RETURN_IF_ERROR(f.Int("num_key_value_heads", &c->num_kv_heads));
  if (f.Has("head_dim")) {
    TANDEM_RETURN_IF_ERROR(f.Int("head_dim", &c->head_dim));
  } else if (c->num_heads > 0 && c->hidden_size % c->num_heads == 0) {
    c->head_dim = c->hidden_size / c->num_heads;
  } else {
    return f.Error("head_dim", "is missing and hidden_size is not divisible by num_attention_heads");
  }
  TANDEM_RETURN_IF_ERROR(f.Int("max_position_embeddings", &c->max_position_embeddings));
  return Status::Ok();
}

Status ParseFeatures(const JsonFields& f, ModelConfig* c) {
  TANDEM_RETURN_IF_ERROR(f.Double("rms_norm_eps", &c->rms_norm_eps));
  TANDEM_RETURN_IF_ERROR(f.Bool("tie_word_embeddings", &c->tie_word_embeddings));
  // Qwen2 always has q/k/v biases (its config has no such key); the others say so.
  c->attention_bias = c->family == ModelFamily::kQwen2;
  if (c->family != ModelFamily::kQwen2) {
    TANDEM_RETURN_IF_ERROR(f.Bool("attention_bias", &c->attention_bias));
  }
  c->qk_norm = c->family == ModelFamily::kQwen3;
  bool mlp_bias = false;
  TANDEM_RETURN_IF_ERROR(f.Bool("mlp_bias", &mlp_bias));
  if (mlp_bias) return f.Error("mlp_bias", "is true; MLP biases are not supported");
  std::string act;
  TANDEM_RETURN_IF_ERROR(f.String("hidden_act", &act));
  if (!act.empty() && act != "silu") return f.Error("hidden_act", "is '" + act + "'; only silu is supported");
  // Qwen writes a sliding_window size but turns it off with use_sliding_window.
  bool use_sliding_window = c->family == ModelFamily::kMistral;
  TANDEM_RETURN_IF_ERROR(f.Bool("use_sliding_window", &use_sliding_window));
  std::optional<int> window;
  TANDEM_RETURN_IF_ERROR(f.Int("sliding_window", &window));
  if (use_sliding_window) c->sliding_window = window;
  TANDEM_RETURN_IF_ERROR(f.Int("bos_token_id", &c->bos_token_id));
  TANDEM_RETURN_IF_ERROR(f.IntList("eos_token_id", &c->eos_token_ids));
  return Status::Ok();
}

StatusOr<ModelConfig> ParseModelConfigJson(const json& root) {
  if (!root.is_object()) return InvalidArgumentError(std::string(kWhat) + ": top level must be a JSON object");
  JsonFields fields(root, kWhat);
  ModelConfig config;
  TANDEM_RETURN_IF_ERROR(ParseFamily(root, fields, &config));
  TANDEM_RETURN_IF_ERROR(ParseShapes(fields, &config));
  TANDEM_RETURN_IF_ERROR(ParseRope(root, fields, &config));
  TANDEM_RETURN_IF_ERROR(ParseFeatures(fields, &config));
  TANDEM_RETURN_IF_ERROR(ParseDType(fields, &config));
  TANDEM_RETURN_IF_ERROR(config.Validate());
  return config;
}

}  // namespace

std::string_view ModelFamilyName(ModelFamily family) { return Info(family).model_type; }
std::string_view ModelFamilyArchitecture(ModelFamily family) { return Info(family).architecture; }

StatusOr<ModelConfig> ParseModelConfig(std::string_view json_text) {
  TANDEM_ASSIGN_OR_RETURN(json root, ParseJsonText(json_text, kMaxConfigBytes, kMaxConfigDepth, kWhat));
  try {  // belt and braces: every access above checks types first
    return ParseModelConfigJson(root);
  } catch (const std::exception& e) {
    return InvalidArgumentError(std::string(kWhat) + ": " + e.what());
  }
}

StatusOr<ModelConfig> LoadModelConfig(const std::string& dir) {
  std::string path = dir + "/config.json";
  TANDEM_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path, kMaxConfigBytes));
  StatusOr<ModelConfig> config = ParseModelConfig(text);
  if (!config.ok()) return config.status().WithContext(dir);
  return config;
}

}  // namespace tandem::model
