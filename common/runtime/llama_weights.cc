#include "common/runtime/llama_weights.h"

#include <fmt/format.h>

#include "common/runtime/weight_upload.h"

namespace tandem::runtime {
namespace {

// Uploads `name` if the checkpoint has it; an empty Buffer otherwise.
StatusOr<Buffer> UploadOptional(Backend* backend, const model::ModelWeights& weights, const std::string& name,
                                const std::vector<int64_t>& shape) {
  if (!weights.Contains(name)) return Buffer();
  return UploadWeight(backend, weights, {{name, shape}});
}

StatusOr<LlamaLayerWeights> LoadLayer(const model::ModelConfig& c, const model::ModelWeights& w, Backend* b,
                                      int layer) {
  const std::string p = fmt::format("model.layers.{}.", layer);
  const int64_t hidden = c.hidden_size, q_dim = int64_t{c.num_heads} * c.head_dim;
  const int64_t kv_dim = int64_t{c.num_kv_heads} * c.head_dim, ffn = c.intermediate_size;
  LlamaLayerWeights l;
  TANDEM_ASSIGN_OR_RETURN(l.input_norm, UploadWeight(b, w, {{p + "input_layernorm.weight", {hidden}}}));
  TANDEM_ASSIGN_OR_RETURN(l.qkv_proj, UploadWeight(b, w, {{p + "self_attn.q_proj.weight", {q_dim, hidden}},
                                                          {p + "self_attn.k_proj.weight", {kv_dim, hidden}},
                                                          {p + "self_attn.v_proj.weight", {kv_dim, hidden}}}));
  // Qwen2 always has qkv biases; others when attention_bias is set.
  if (c.attention_bias || c.family == model::ModelFamily::kQwen2) {
    TANDEM_ASSIGN_OR_RETURN(l.qkv_bias, UploadWeight(b, w, {{p + "self_attn.q_proj.bias", {q_dim}},
                                                            {p + "self_attn.k_proj.bias", {kv_dim}},
                                                            {p + "self_attn.v_proj.bias", {kv_dim}}}));
  }
  if (c.qk_norm) {
    TANDEM_ASSIGN_OR_RETURN(l.q_norm, UploadWeight(b, w, {{p + "self_attn.q_norm.weight", {c.head_dim}}}));
    TANDEM_ASSIGN_OR_RETURN(l.k_norm, UploadWeight(b, w, {{p + "self_attn.k_norm.weight", {c.head_dim}}}));
  }
  TANDEM_ASSIGN_OR_RETURN(l.o_proj, UploadWeight(b, w, {{p + "self_attn.o_proj.weight", {hidden, q_dim}}}));
  // Llama/Qwen3 with attention_bias also bias o_proj; Qwen2 never does.
  TANDEM_ASSIGN_OR_RETURN(l.o_bias, UploadOptional(b, w, p + "self_attn.o_proj.bias", {hidden}));
  TANDEM_ASSIGN_OR_RETURN(l.post_attention_norm,
                          UploadWeight(b, w, {{p + "post_attention_layernorm.weight", {hidden}}}));
  TANDEM_ASSIGN_OR_RETURN(l.gate_up_proj, UploadWeight(b, w, {{p + "mlp.gate_proj.weight", {ffn, hidden}},
                                                              {p + "mlp.up_proj.weight", {ffn, hidden}}}));
  TANDEM_ASSIGN_OR_RETURN(l.down_proj, UploadWeight(b, w, {{p + "mlp.down_proj.weight", {hidden, ffn}}}));
  return l;
}

}  // namespace

StatusOr<LlamaWeights> LlamaWeights::Load(const model::ModelConfig& c, const model::ModelWeights& w,
                                          Backend* backend) {
  LlamaWeights out;
  const int64_t vocab = c.vocab_size, hidden = c.hidden_size;
  TANDEM_ASSIGN_OR_RETURN(out.embed_tokens, UploadWeight(backend, w, {{"model.embed_tokens.weight", {vocab, hidden}}}));
  TANDEM_ASSIGN_OR_RETURN(out.final_norm, UploadWeight(backend, w, {{"model.norm.weight", {hidden}}}));
  if (!c.tie_word_embeddings) {
    TANDEM_ASSIGN_OR_RETURN(out.lm_head, UploadWeight(backend, w, {{"lm_head.weight", {vocab, hidden}}}));
  }
  out.layers.reserve(c.num_layers);
  for (int i = 0; i < c.num_layers; ++i) {
    TANDEM_ASSIGN_OR_RETURN(LlamaLayerWeights layer, LoadLayer(c, w, backend, i));
    out.layers.push_back(std::move(layer));
  }
  return out;
}

}  // namespace tandem::runtime
