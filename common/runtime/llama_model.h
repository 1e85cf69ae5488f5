// LlamaModel: the forward pass of the Llama family (Llama, Mistral, Qwen2,
// Qwen3: GQA, RoPE with scaling, RMSNorm, SwiGLU, optional qkv bias, q/k
// norm, tied embeddings) over a paged KV cache, written only against the
// Backend op set, so the CPU reference and the CUDA backend share it.
//
// One Forward runs a mixed batch: each SeqChunk is a prefill chunk of any
// length or one decode token of some sequence. Its K/V are written into the
// chunk's blocks, and logits come out for the rows that asked for them. A
// sequence's logits do not depend on the rest of the batch as long as the
// backend's ops are row-independent (CpuBackend's are).
//
// Activation memory is a fixed workspace sized by RuntimeOptions at Create,
// so a step never allocates.
// Thread rule: engine thread only.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "common/model/model_config.h"
#include "common/model/weights.h"
#include "common/runtime/backend.h"
#include "common/runtime/batch_plan.h"
#include "common/runtime/llama_weights.h"
#include "common/runtime/paged_kv_cache.h"

namespace tandem::runtime {

struct RuntimeOptions {
  // Most tokens in one forward (sum of chunk lengths): the prefill chunk
  // budget. Workspace grows linearly with it.
  int max_num_tokens = 2048;
  // Most sequences (chunks) in one forward: the decode batch size.
  int max_num_seqs = 256;
  // Most logits rows in one forward; each costs vocab_size floats of workspace.
  int max_logits_rows = 256;
  // Longest sequence (prompt + output); 0 means the model's max_position_embeddings.
  int max_model_len = 0;
  // KV block size the metadata workspace is sized for (tokens per block, power of two).
  int kv_block_size = 16;
  // Pads decode-only steps to DecodeBatchBucket sizes (BatchLimits::pad_decode_batches),
  // so CUDA graphs are captured per bucket rather than per batch size.
  bool pad_decode_batches = false;

  Status Validate() const;
};

class LlamaModel {
 public:
  // Validates the config, uploads the weights (converted to the backend's
  // compute dtype) and allocates the workspace. `backend` must outlive the
  // model; `weights` may be closed after Create returns.
  static StatusOr<std::unique_ptr<LlamaModel>> Create(const model::ModelConfig& config,
                                                      const model::ModelWeights& weights, Backend* backend,
                                                      const RuntimeOptions& options);
  // The same with weights already on `backend`, in its compute dtype and shaped as
  // LlamaWeights::Load makes them (benchmarks generate them on the device).
  static StatusOr<std::unique_ptr<LlamaModel>> CreateWithWeights(const model::ModelConfig& config, LlamaWeights weights,
                                                                 Backend* backend, const RuntimeOptions& options);
  ~LlamaModel();

  // Runs one step. Returns F32 logits [rows, vocab_size] on the backend's
  // device, rows ordered by chunk, then by token; the view stays
  // valid until the next Forward. InvalidArgument for bad chunks (see
  // BatchPlan::Build) or a cache whose layout does not fit this model.
  // `after_layer(l)`, when set, runs once layer l's ops are issued (its KV is
  // written in the cache as far as the backend's stream order goes), before
  // layer l + 1's: the hook for streaming KV out while later layers compute.
  StatusOr<Tensor> Forward(std::span<const SeqChunk> chunks, PagedKvCache& cache,
                           const std::function<void(int layer)>& after_layer = {});

  // Forward, with the logits copied to host memory as fp32 (row-major).
  StatusOr<std::vector<float>> ForwardToHost(std::span<const SeqChunk> chunks, PagedKvCache& cache);

  // The cache layout this model needs for `num_blocks` blocks.
  kv_cache::KvLayout KvLayoutFor(int num_blocks) const;

  const model::ModelConfig& config() const { return config_; }
  const RuntimeOptions& options() const { return options_; }

 private:
  struct Workspace;

  LlamaModel(const model::ModelConfig& config, const RuntimeOptions& options, Backend* backend);
  Status AllocateWorkspace();
  // One transformer layer; the workspace's `normed` holds its input norm on entry and the
  // next layer's on return.
  Status RunLayer(int layer, const BatchPlan& plan, PagedKvCache& cache);
  Status CheckCache(const PagedKvCache& cache) const;

  model::ModelConfig config_;
  RuntimeOptions options_;
  Backend* backend_;
  LlamaWeights weights_;
  std::unique_ptr<Workspace> ws_;
};

}  // namespace tandem::runtime
