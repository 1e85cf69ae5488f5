#include "common/model/model_tensors.h"

#include <string>

namespace tandem::model {

std::vector<TensorSpec> ExpectedTensors(const ModelConfig& c) {
  const int64_t hidden = c.hidden_size;
  const int64_t q_dim = static_cast<int64_t>(c.num_heads) * c.head_dim;
  const int64_t kv_dim = static_cast<int64_t>(c.num_kv_heads) * c.head_dim;
  const int64_t ffn = c.intermediate_size;
  std::vector<TensorSpec> out;
  auto add = [&](std::string name, std::vector<int64_t> shape) {
    out.push_back(TensorSpec{std::move(name), c.dtype, std::move(shape)});
  };
  add("model.embed_tokens.weight", {c.vocab_size, hidden});
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string layer = "model.layers." + std::to_string(i) + ".";
    add(layer + "input_layernorm.weight", {hidden});
    const std::pair<const char*, int64_t> projections[] = {{"q", q_dim}, {"k", kv_dim}, {"v", kv_dim}};
    for (const auto& [p, rows] : projections) {
      add(layer + "self_attn." + p + "_proj.weight", {rows, hidden});
      if (c.attention_bias) add(layer + "self_attn." + p + "_proj.bias", {rows});
    }
    add(layer + "self_attn.o_proj.weight", {hidden, q_dim});
    if (c.qk_norm) {
      add(layer + "self_attn.q_norm.weight", {c.head_dim});
      add(layer + "self_attn.k_norm.weight", {c.head_dim});
    }
    add(layer + "post_attention_layernorm.weight", {hidden});
    add(layer + "mlp.gate_proj.weight", {ffn, hidden});
    add(layer + "mlp.up_proj.weight", {ffn, hidden});
    add(layer + "mlp.down_proj.weight", {hidden, ffn});
  }
  add("model.norm.weight", {hidden});
  if (!c.tie_word_embeddings) add("lm_head.weight", {c.vocab_size, hidden});
  return out;
}

Status CheckModelWeights(const ModelConfig& config, const ModelWeights& weights) {
  for (const TensorSpec& spec : ExpectedTensors(config)) {
    TANDEM_ASSIGN_OR_RETURN(TensorView view, weights.Get(spec.name, spec.shape));
    if (view.dtype != DType::kF32 && view.dtype != DType::kF16 && view.dtype != DType::kBF16) {
      return InvalidArgumentError("model weights: tensor '" + spec.name + "' has dtype " +
                                  std::string(DTypeName(view.dtype)) + ", expected a float type");
    }
  }
  return Status::Ok();
}

}  // namespace tandem::model
