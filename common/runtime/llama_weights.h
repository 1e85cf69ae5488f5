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
#include "common/runtime/weight_upload.h"

namespace tandem::runtime {

struct LlamaLayerWeights {
  Buffer input_norm;           // [hidden]
  Buffer qkv_proj;             // [(heads + 2 * kv_heads) * head_dim, hidden]: q, k, v rows fused
  Buffer qkv_bias;             // [(heads + 2 * kv_heads) * head_dim] (qkv bias) or empty
  Buffer q_norm, k_norm;       // [head_dim] (Qwen3) or empty
  Buffer o_proj;               // [hidden, heads * head_dim]
  Buffer o_bias;               // [hidden] when the checkpoint has it, or empty
  Buffer post_attention_norm;  // [hidden]
  Buffer gate_up_proj;         // [2 * ffn, hidden]: gate rows then up rows
  Buffer down_proj;            // [hidden, ffn]
};

struct LlamaWeights {
  Buffer embed_tokens;  // [vocab, hidden]
  Buffer final_norm;    // [hidden]
  Buffer lm_head;       // [vocab, hidden]; empty when tied to embed_tokens
  std::vector<LlamaLayerWeights> layers;

  Tensor LmHead() const { return lm_head.tensor().defined() ? lm_head.tensor() : embed_tokens.tensor(); }

  // Uploads every tensor `config` calls for, checking names and shapes (WeightUploader),
  // logging progress and a summary at INFO; `stats`, when given, gets the upload's counters.
  // Errors name the tensor (NotFound, InvalidArgument) or the device (ResourceExhausted).
  static StatusOr<LlamaWeights> Load(const model::ModelConfig& config, const model::ModelWeights& weights,
                                     Backend* backend, const WeightUploadOptions& options = {},
                                     WeightUploadStats* stats = nullptr);
};

}  // namespace tandem::runtime
