// ModelConfig::Validate: shape and value checks shared by the parser and by
// configs built in code (the model generator tool, tests).
#include <string>

#include "common/model/model_config.h"

namespace tandem::model {
namespace {

// Upper bounds keep every derived size (e.g. vocab * hidden) far from overflow.
constexpr int kMaxVocab = 1 << 22;
constexpr int kMaxHidden = 1 << 16;
constexpr int kMaxIntermediate = 1 << 18;
constexpr int kMaxLayers = 1024;
constexpr int kMaxHeads = 1024;
constexpr int kMaxHeadDim = 1024;

Status CheckRange(std::string_view name, long long value, long long lo, long long hi) {
  if (value >= lo && value <= hi) return Status::Ok();
  return InvalidArgumentError("model config: " + std::string(name) + " = " + std::to_string(value) + " is outside [" +
                              std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

Status ValidateRope(const ModelConfig& c) {
  if (!(c.rope_theta > 0)) return InvalidArgumentError("model config: rope_theta must be > 0");
  const RopeScaling& r = c.rope_scaling;
  if (r.type == RopeScalingType::kNone) return Status::Ok();
  if (!(r.factor >= 1.0)) return InvalidArgumentError("model config: rope_scaling.factor must be >= 1");
  if (r.type != RopeScalingType::kLlama3) return Status::Ok();
  if (!(r.low_freq_factor > 0) || !(r.high_freq_factor > r.low_freq_factor)) {
    return InvalidArgumentError("model config: llama3 rope_scaling needs 0 < low_freq_factor < high_freq_factor");
  }
  return CheckRange("rope_scaling.original_max_position_embeddings", r.original_max_position_embeddings, 1, 1 << 24);
}

Status ValidateTokenIds(const ModelConfig& c) {
  if (c.bos_token_id) {
    TANDEM_RETURN_IF_ERROR(CheckRange("bos_token_id", *c.bos_token_id, 0, c.vocab_size - 1));
  }
  for (int id : c.eos_token_ids) TANDEM_RETURN_IF_ERROR(CheckRange("eos_token_id", id, 0, c.vocab_size - 1));
  return Status::Ok();
}

}  // namespace

Status ModelConfig::Validate() const {
  TANDEM_RETURN_IF_ERROR(CheckRange("vocab_size", vocab_size, 1, kMaxVocab));
  TANDEM_RETURN_IF_ERROR(CheckRange("hidden_size", hidden_size, 1, kMaxHidden));
  TANDEM_RETURN_IF_ERROR(CheckRange("intermediate_size", intermediate_size, 1, kMaxIntermediate));
  TANDEM_RETURN_IF_ERROR(CheckRange("num_hidden_layers", num_layers, 1, kMaxLayers));
  TANDEM_RETURN_IF_ERROR(CheckRange("num_attention_heads", num_heads, 1, kMaxHeads));
  TANDEM_RETURN_IF_ERROR(CheckRange("num_key_value_heads", num_kv_heads, 1, num_heads));
  if (num_heads % num_kv_heads != 0) {
    return InvalidArgumentError("model config: num_attention_heads (" + std::to_string(num_heads) +
                                ") is not a multiple of num_key_value_heads (" + std::to_string(num_kv_heads) + ")");
  }
  TANDEM_RETURN_IF_ERROR(CheckRange("head_dim", head_dim, 2, kMaxHeadDim));
  if (head_dim % 2 != 0) return InvalidArgumentError("model config: head_dim must be even for RoPE");
  TANDEM_RETURN_IF_ERROR(CheckRange("max_position_embeddings", max_position_embeddings, 1, 1 << 24));
  if (!(rms_norm_eps > 0 && rms_norm_eps < 1)) {
    return InvalidArgumentError("model config: rms_norm_eps must be in (0, 1)");
  }
  if (dtype != DType::kBF16 && dtype != DType::kF16 && dtype != DType::kF32) {
    return InvalidArgumentError("model config: dtype must be bfloat16, float16 or float32");
  }
  if (sliding_window) TANDEM_RETURN_IF_ERROR(CheckRange("sliding_window", *sliding_window, 1, 1 << 24));
  TANDEM_RETURN_IF_ERROR(ValidateRope(*this));
  return ValidateTokenIds(*this);
}

}  // namespace tandem::model
