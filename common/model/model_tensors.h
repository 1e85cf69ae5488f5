// The tensors a Llama-family checkpoint holds, by Hugging Face name and shape,
// derived from its ModelConfig; and a check that a ModelWeights has them all.
// Thread rule: free functions, no state.
#pragma once

#include <vector>

#include "common/model/model_config.h"
#include "common/model/safetensors_writer.h"
#include "common/model/weights.h"

namespace tandem::model {

// Every tensor of `config`'s checkpoint, with dtype config.dtype, in order:
// model.embed_tokens.weight; per layer i: model.layers.{i}.input_layernorm,
// self_attn.{q,k,v}_proj (.weight, plus .bias with attention_bias),
// self_attn.o_proj, self_attn.{q,k}_norm (qk_norm), post_attention_layernorm,
// mlp.{gate,up,down}_proj; model.norm.weight; lm_head.weight unless tied.
// REQUIRES: config.Validate() is OK.
std::vector<TensorSpec> ExpectedTensors(const ModelConfig& config);

// OK when `weights` has every tensor of ExpectedTensors(config) with that shape
// and a float dtype (F32, F16, BF16); otherwise the first problem, naming the tensor.
Status CheckModelWeights(const ModelConfig& config, const ModelWeights& weights);

}  // namespace tandem::model
