#include "common/runtime/llama_weights.h"

#include <fmt/format.h>

#include "common/base/logging.h"

namespace tandem::runtime {
namespace {

// One device tensor to load: where it goes and the checkpoint parts it is made of.
struct PlannedWeight {
  Buffer* dst;
  std::vector<WeightPart> parts;
};

// Every weight `c` calls for, into `out` (whose layers it sizes), in upload order.
// Optional tensors (o_proj biases) are planned when the checkpoint has them.
std::vector<PlannedWeight> Plan(const model::ModelConfig& c, const model::ModelWeights& w, LlamaWeights* out) {
  const int64_t vocab = c.vocab_size, hidden = c.hidden_size, q_dim = int64_t{c.num_heads} * c.head_dim;
  const int64_t kv_dim = int64_t{c.num_kv_heads} * c.head_dim, ffn = c.intermediate_size;
  std::vector<PlannedWeight> plan;
  plan.push_back({&out->embed_tokens, {{"model.embed_tokens.weight", {vocab, hidden}}}});
  plan.push_back({&out->final_norm, {{"model.norm.weight", {hidden}}}});
  if (!c.tie_word_embeddings) plan.push_back({&out->lm_head, {{"lm_head.weight", {vocab, hidden}}}});
  out->layers.resize(c.num_layers);
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string p = fmt::format("model.layers.{}.", i);
    LlamaLayerWeights& l = out->layers[i];
    plan.push_back({&l.input_norm, {{p + "input_layernorm.weight", {hidden}}}});
    plan.push_back({&l.qkv_proj,
                    {{p + "self_attn.q_proj.weight", {q_dim, hidden}},
                     {p + "self_attn.k_proj.weight", {kv_dim, hidden}},
                     {p + "self_attn.v_proj.weight", {kv_dim, hidden}}}});
    // Qwen2 always has qkv biases; others when attention_bias is set.
    if (c.attention_bias || c.family == model::ModelFamily::kQwen2) {
      plan.push_back({&l.qkv_bias,
                      {{p + "self_attn.q_proj.bias", {q_dim}},
                       {p + "self_attn.k_proj.bias", {kv_dim}},
                       {p + "self_attn.v_proj.bias", {kv_dim}}}});
    }
    if (c.qk_norm) {
      plan.push_back({&l.q_norm, {{p + "self_attn.q_norm.weight", {c.head_dim}}}});
      plan.push_back({&l.k_norm, {{p + "self_attn.k_norm.weight", {c.head_dim}}}});
    }
    plan.push_back({&l.o_proj, {{p + "self_attn.o_proj.weight", {hidden, q_dim}}}});
    // Llama/Qwen3 with attention_bias also bias o_proj; Qwen2 never does.
    if (w.Contains(p + "self_attn.o_proj.bias")) plan.push_back({&l.o_bias, {{p + "self_attn.o_proj.bias", {hidden}}}});
    plan.push_back({&l.post_attention_norm, {{p + "post_attention_layernorm.weight", {hidden}}}});
    plan.push_back(
        {&l.gate_up_proj, {{p + "mlp.gate_proj.weight", {ffn, hidden}}, {p + "mlp.up_proj.weight", {ffn, hidden}}}});
    plan.push_back({&l.down_proj, {{p + "mlp.down_proj.weight", {hidden, ffn}}}});
  }
  return plan;
}

// Device bytes of `plan` in `dtype`.
int64_t PlannedBytes(const std::vector<PlannedWeight>& plan, DType dtype) {
  int64_t bytes = 0;
  for (const PlannedWeight& weight : plan) {
    for (const WeightPart& part : weight.parts) {
      int64_t n = static_cast<int64_t>(DTypeSize(dtype));
      for (int64_t d : part.shape) n *= d;
      bytes += n;
    }
  }
  return bytes;
}

}  // namespace

StatusOr<LlamaWeights> LlamaWeights::Load(const model::ModelConfig& c, const model::ModelWeights& w, Backend* backend,
                                          const WeightUploadOptions& options, WeightUploadStats* stats) {
  LlamaWeights out;
  const std::vector<PlannedWeight> plan = Plan(c, w, &out);
  const int64_t total = PlannedBytes(plan, backend->compute_dtype());
  WeightUploader uploader(backend, w, total, options);
  TANDEM_LOG_INFO("loading weights: {:.2f} GB in {} tensors, {} fill threads", total / 1e9, plan.size(),
                  uploader.num_threads());
  for (size_t i = 0; i < plan.size(); ++i) {
    // A cold page cache reads the next weight while this one uploads.
    if (i + 1 < plan.size()) {
      for (const WeightPart& part : plan[i + 1].parts) w.WillNeed(part.name);
    }
    TANDEM_ASSIGN_OR_RETURN(*plan[i].dst, uploader.Upload(plan[i].parts));
  }
  const WeightUploadStats& s = uploader.stats();
  TANDEM_LOG_INFO(
      "weights loaded: {:.2f} GB in {:.2f} s, {:.2f} GB/s ({:.2f} GB converted; filling {:.2f} s, "
      "allocating {:.2f} s)",
      s.bytes / 1e9, s.seconds, s.seconds > 0 ? s.bytes / 1e9 / s.seconds : 0.0, s.converted_bytes / 1e9,
      s.fill_seconds, s.allocate_seconds);
  if (stats != nullptr) *stats = s;
  return out;
}

}  // namespace tandem::runtime
