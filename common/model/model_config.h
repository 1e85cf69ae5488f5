// ModelConfig: the architecture of a Llama-family model, parsed from a Hugging
// Face `config.json`; GenerationConfig from `generation_config.json`.
// Supported: LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM.
// Thread rule: plain value types.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/base/dtype.h"
#include "common/base/status.h"

namespace tandem::model {

enum class ModelFamily { kLlama, kMistral, kQwen2, kQwen3 };

enum class RopeScalingType { kNone, kLinear, kLlama3 };

struct RopeScaling {
  RopeScalingType type = RopeScalingType::kNone;
  double factor = 1.0;                          // linear and llama3
  double low_freq_factor = 1.0;                 // llama3
  double high_freq_factor = 4.0;                // llama3
  int original_max_position_embeddings = 8192;  // llama3
};

struct ModelConfig {
  ModelFamily family = ModelFamily::kLlama;
  std::string architecture;  // e.g. "LlamaForCausalLM"
  int vocab_size = 0;
  int hidden_size = 0;
  int intermediate_size = 0;  // FFN width
  int num_layers = 0;         // num_hidden_layers
  int num_heads = 0;          // num_attention_heads
  int num_kv_heads = 0;       // num_key_value_heads (defaults to num_heads)
  int head_dim = 0;           // head_dim, or hidden_size / num_heads
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  int max_position_embeddings = 2048;
  bool tie_word_embeddings = false;  // lm_head shares model.embed_tokens.weight
  bool attention_bias = false;       // q/k/v projections have biases (Qwen2 always)
  bool qk_norm = false;              // per-head RMSNorm on q and k before RoPE (Qwen3)
  DType dtype = DType::kBF16;        // torch_dtype of the checkpoint
  std::optional<int> bos_token_id;
  std::vector<int> eos_token_ids;  // from config.json; generation_config may add more
  // Mistral/Qwen sliding-window attention width in tokens, when the checkpoint
  // enables it (Qwen's `use_sliding_window: false` leaves this empty). The
  // runtime must refuse or handle sequences longer than this.
  std::optional<int> sliding_window;

  // Positive sizes (with sane upper bounds), heads divisible by kv heads, even
  // head_dim, known rope scaling values, token ids inside the vocabulary.
  Status Validate() const;
};

// "llama", "mistral", "qwen2", "qwen3" (the HF `model_type`).
std::string_view ModelFamilyName(ModelFamily family);
// The HF class name, e.g. "Qwen2ForCausalLM".
std::string_view ModelFamilyArchitecture(ModelFamily family);

// Parses config.json text. Unknown architectures, missing or mistyped fields,
// non-JSON, and text over 1 MiB are InvalidArgument with the field named.
StatusOr<ModelConfig> ParseModelConfig(std::string_view json_text);

struct GenerationConfig {
  std::vector<int> eos_token_ids;  // stop token ids (union with the model's)
  std::optional<int> bos_token_id;
  std::optional<double> temperature;
  std::optional<double> top_p;
  std::optional<int> top_k;
  std::optional<double> min_p;
  std::optional<double> repetition_penalty;
  std::optional<int> max_new_tokens;
  bool do_sample = false;
};

// Parses generation_config.json text. Same limits and errors as ParseModelConfig.
StatusOr<GenerationConfig> ParseGenerationConfig(std::string_view json_text);

// Reads and parses `<dir>/config.json` (errors name the file).
StatusOr<ModelConfig> LoadModelConfig(const std::string& dir);
// Reads `<dir>/generation_config.json`; a missing file gives the defaults.
StatusOr<GenerationConfig> LoadGenerationConfig(const std::string& dir);

}  // namespace tandem::model
