// LlamaWeights: the weights of a Llama-family checkpoint (Llama, Mistral,
// Qwen2, Qwen3) on a backend device, in its compute dtype. Hugging Face
// tensor names; optional tensors (biases, q/k norms, lm_head when tied) are
// empty Buffers whose tensor() is undefined.
// Thread rule: immutable after Load; engine thread (owns device memory).
#pragma once

#include <vector>

#include "common/model/model_config.h"
#include "common/model/weights.h"
#include "common/runtime/backend.h"

namespace tandem::runtime {

struct LlamaLayerWeights {
  Buffer input_norm;         // [hidden]
  Buffer q_proj, q_bias;     // [heads * head_dim, hidden], [heads * head_dim] (qkv bias)
  Buffer k_proj, k_bias;     // [kv_heads * head_dim, hidden], [kv_heads * head_dim]
  Buffer v_proj, v_bias;     // same as k
  Buffer q_norm, k_norm;     // [head_dim] (Qwen3)
  Buffer o_proj, o_bias;     // [hidden, heads * head_dim], [hidden] (when the checkpoint has it)
  Buffer post_attention_norm;  // [hidden]
  Buffer gate_proj, up_proj;   // [ffn, hidden]
  Buffer down_proj;            // [hidden, ffn]
};

struct LlamaWeights {
  Buffer embed_tokens;  // [vocab, hidden]
  Buffer final_norm;    // [hidden]
  Buffer lm_head;       // [vocab, hidden]; empty when tied to embed_tokens
  Buffer rope_inv_freq; // F32 [head_dim / 2], scaling applied
  std::vector<LlamaLayerWeights> layers;

  Tensor LmHead() const { return lm_head.tensor().defined() ? lm_head.tensor() : embed_tokens.tensor(); }

  // Uploads every tensor `config` calls for, checking names and shapes.
  // Errors name the tensor (NotFound, InvalidArgument) or the device (ResourceExhausted).
  static StatusOr<LlamaWeights> Load(const model::ModelConfig& config, const model::ModelWeights& weights,
                                     Backend* backend);
};

}  // namespace tandem::runtime
