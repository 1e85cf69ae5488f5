#include "common/runtime/llama_model.h"

#include <fmt/format.h>

#include <cmath>
#include <utility>

#include "common/runtime/rope.h"

namespace tandem::runtime {

// Activation buffers at capacity, and this step's metadata views.
struct LlamaModel::Workspace {
  Buffer meta;             // I32 [MaxPackedSize(limits)]
  Buffer slots;            // I64 [max_tokens]
  Buffer residual;         // F32 [max_tokens, hidden]: the residual stream (fp32 on every backend:
                           // fewer roundings between layers, closer to the reference); the o and
                           // down projections add into it
  Buffer normed;           // [max_tokens, hidden]: the RMSNorm of the residual stream a sub-layer projects
  Buffer qkv;              // [max_tokens, (heads + 2 * kv_heads) * head_dim]
  Buffer q, attn;          // [max_tokens, heads, head_dim]
  Buffer gate_up;          // [max_tokens, 2 * ffn]
  Buffer act;              // [max_tokens, ffn]
  Buffer attn_workspace;   // U8 [Backend::AttentionWorkspaceBytes]
  Buffer logits_residual;  // F32 [max_logits_rows, hidden]: picked residual rows
  Buffer logits_normed;    // [max_logits_rows, hidden]: their final norm
  Buffer logits;           // F32 [max_logits_rows, vocab]

  // Views of `meta` for the current step.
  Tensor token_ids, positions, slot_mapping, query_start, context_lens, block_tables, logits_rows;
};

namespace {

Status CheckConfig(const model::ModelConfig& c) {
  if (c.vocab_size <= 0 || c.hidden_size <= 0 || c.intermediate_size <= 0 || c.num_layers <= 0 || c.num_heads <= 0 ||
      c.num_kv_heads <= 0 || c.head_dim <= 0) {
    return InvalidArgumentError("model config needs positive vocab, hidden, ffn, layers, heads and head_dim");
  }
  if (c.num_heads % c.num_kv_heads != 0) {
    return InvalidArgumentError(
        fmt::format("{} attention heads not divisible by {} KV heads", c.num_heads, c.num_kv_heads));
  }
  if (c.head_dim % 2 != 0) return InvalidArgumentError("rope needs an even head_dim");
  if (!(c.rms_norm_eps > 0.0)) return InvalidArgumentError("rms_norm_eps must be positive");
  TANDEM_RETURN_IF_ERROR(RopeInvFreq(c.head_dim, c.rope_theta, c.rope_scaling));
  if (c.max_position_embeddings <= 0) return InvalidArgumentError("max_position_embeddings must be positive");
  return Status::Ok();
}

}  // namespace

Status RuntimeOptions::Validate() const {
  if (max_num_tokens <= 0 || max_num_seqs <= 0 || max_logits_rows <= 0 || max_model_len < 0) {
    return InvalidArgumentError("runtime options: max_num_tokens, max_num_seqs, max_logits_rows must be positive");
  }
  if (kv_block_size <= 0 || (kv_block_size & (kv_block_size - 1)) != 0) {
    return InvalidArgumentError(fmt::format("runtime options: kv_block_size {} is not a power of two", kv_block_size));
  }
  return Status::Ok();
}

LlamaModel::LlamaModel(const model::ModelConfig& config, const RuntimeOptions& options, Backend* backend)
    : config_(config), options_(options), backend_(backend), ws_(std::make_unique<Workspace>()) {
  if (options_.max_model_len == 0) options_.max_model_len = config_.max_position_embeddings;
}

LlamaModel::~LlamaModel() = default;

StatusOr<std::unique_ptr<LlamaModel>> LlamaModel::Create(const model::ModelConfig& config,
                                                         const model::ModelWeights& weights, Backend* backend,
                                                         const RuntimeOptions& options) {
  TANDEM_RETURN_IF_ERROR(CheckConfig(config));
  TANDEM_RETURN_IF_ERROR(options.Validate());
  TANDEM_ASSIGN_OR_RETURN(LlamaWeights uploaded, LlamaWeights::Load(config, weights, backend));
  return CreateWithWeights(config, std::move(uploaded), backend, options);
}

StatusOr<std::unique_ptr<LlamaModel>> LlamaModel::CreateWithWeights(const model::ModelConfig& config,
                                                                    LlamaWeights weights, Backend* backend,
                                                                    const RuntimeOptions& options) {
  TANDEM_RETURN_IF_ERROR(CheckConfig(config));
  TANDEM_RETURN_IF_ERROR(options.Validate());
  if (static_cast<int>(weights.layers.size()) != config.num_layers) {
    return InvalidArgumentError(
        fmt::format("{} layers of weights for a model of {}", weights.layers.size(), config.num_layers));
  }
  std::unique_ptr<LlamaModel> m(new LlamaModel(config, options, backend));
  m->weights_ = std::move(weights);
  TANDEM_RETURN_IF_ERROR(m->AllocateWorkspace());
  return m;
}

Status LlamaModel::AllocateWorkspace() {
  const DType act = backend_->compute_dtype();
  const int64_t t = options_.max_num_tokens, r = options_.max_logits_rows, h = config_.hidden_size;
  const int64_t ffn = config_.intermediate_size, d = config_.head_dim;
  BatchLimits limits{.block_size = options_.kv_block_size,
                     .max_model_len = options_.max_model_len,
                     .max_num_tokens = options_.max_num_tokens,
                     .max_num_seqs = options_.max_num_seqs,
                     .max_logits_rows = options_.max_logits_rows};
  Workspace& w = *ws_;
  TANDEM_ASSIGN_OR_RETURN(w.meta, backend_->Allocate(DType::kI32, {static_cast<int64_t>(MaxPackedSize(limits))}));
  TANDEM_ASSIGN_OR_RETURN(w.residual, backend_->Allocate(DType::kF32, {t, h}));
  TANDEM_ASSIGN_OR_RETURN(w.normed, backend_->Allocate(act, {t, h}));
  TANDEM_ASSIGN_OR_RETURN(w.slots, backend_->Allocate(DType::kI64, {t}));
  TANDEM_ASSIGN_OR_RETURN(w.qkv, backend_->Allocate(act, {t, (config_.num_heads + 2 * config_.num_kv_heads) * d}));
  TANDEM_ASSIGN_OR_RETURN(w.q, backend_->Allocate(act, {t, config_.num_heads, d}));
  TANDEM_ASSIGN_OR_RETURN(w.attn, backend_->Allocate(act, {t, config_.num_heads, d}));
  TANDEM_ASSIGN_OR_RETURN(w.gate_up, backend_->Allocate(act, {t, 2 * ffn}));
  TANDEM_ASSIGN_OR_RETURN(w.act, backend_->Allocate(act, {t, ffn}));
  // Attention scratch for the largest step: every sequence at the full model length.
  PagedAttentionParams max_shape{.q = Tensor(nullptr, act, backend_->device(), {t, config_.num_heads, d}),
                                 .layout = KvLayoutFor(0),
                                 .num_seqs = options_.max_num_seqs,
                                 .max_query_len = options_.max_num_tokens,
                                 .max_context_len = options_.max_model_len,
                                 .scale = 1.0f};
  const size_t attn_bytes = backend_->AttentionWorkspaceBytes(max_shape);
  if (attn_bytes > 0) {
    TANDEM_ASSIGN_OR_RETURN(w.attn_workspace, backend_->Allocate(DType::kU8, {static_cast<int64_t>(attn_bytes)}));
  }
  TANDEM_ASSIGN_OR_RETURN(w.logits_residual, backend_->Allocate(DType::kF32, {r, h}));
  TANDEM_ASSIGN_OR_RETURN(w.logits_normed, backend_->Allocate(act, {r, h}));
  TANDEM_ASSIGN_OR_RETURN(w.logits, backend_->Allocate(DType::kF32, {r, config_.vocab_size}));
  return Status::Ok();
}

kv_cache::KvLayout LlamaModel::KvLayoutFor(int num_blocks) const {
  return KvLayoutForModel(config_, options_.kv_block_size, num_blocks, backend_->compute_dtype());
}

Status LlamaModel::CheckCache(const PagedKvCache& cache) const {
  const kv_cache::KvLayout& l = cache.layout();
  if (l.num_layers != config_.num_layers || l.num_kv_heads != config_.num_kv_heads || l.head_dim != config_.head_dim ||
      l.dtype != backend_->compute_dtype()) {
    return InvalidArgumentError("KV cache layout does not fit the model: " + l.DebugString());
  }
  if (cache.pool().device != backend_->device()) return InvalidArgumentError("KV cache is on another device");
  return Status::Ok();
}

Status LlamaModel::RunLayer(int layer, const BatchPlan& plan, PagedKvCache& cache) {
  const LlamaLayerWeights& lw = weights_.layers[layer];
  Workspace& w = *ws_;
  const int64_t n = plan.num_tokens, d = config_.head_dim;
  const float eps = static_cast<float>(config_.rms_norm_eps);
  Tensor residual = w.residual.tensor().Rows(0, n), normed = w.normed.tensor().Rows(0, n);
  Tensor q = w.q.tensor().Rows(0, n), qkv = w.qkv.tensor().Rows(0, n);
  Tensor attn = w.attn.tensor().Rows(0, n);

  // `normed` holds this layer's input norm (from the previous layer, or Forward for layer 0).
  // The o and down projections add their outputs to the residual stream; each is followed
  // by the norm the next projection reads.
  TANDEM_RETURN_IF_ERROR(
      backend_->Linear({.x = normed, .weight = lw.qkv_proj.tensor(), .bias = lw.qkv_bias.tensor(), .out = qkv}));
  const kv_cache::KvLayout& layout = cache.layout();
  TANDEM_RETURN_IF_ERROR(
      backend_->RopeKvWriteAndAttention({.qkv = qkv,
                                         .q_out = q,
                                         .q_norm = lw.q_norm.tensor(),
                                         .k_norm = lw.k_norm.tensor(),
                                         .norm_eps = eps,
                                         .positions = w.positions,
                                         .slot_mapping = w.slot_mapping,
                                         .kv_pool = cache.pool(),
                                         .layout = layout,
                                         .layer = layer,
                                         .rope = {config_.rope_theta, config_.rope_scaling}},
                                        {.q = q,
                                         .out = attn,
                                         .kv_pool = cache.pool(),
                                         .layout = layout,
                                         .layer = layer,
                                         .query_start = w.query_start,
                                         .context_lens = w.context_lens,
                                         .block_tables = w.block_tables,
                                         .num_seqs = plan.num_seqs,
                                         .max_query_len = plan.max_query_len,
                                         .max_context_len = plan.max_context_len,
                                         .scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d))),
                                         .workspace = w.attn_workspace.tensor()}));
  TANDEM_RETURN_IF_ERROR(backend_->Linear({.x = attn.Reshape({n, config_.num_heads * d}),
                                           .weight = lw.o_proj.tensor(),
                                           .bias = lw.o_bias.tensor(),
                                           .out = residual,
                                           .accumulate = true}));
  TANDEM_RETURN_IF_ERROR(
      backend_->RmsNorm({.x = residual, .weight = lw.post_attention_norm.tensor(), .out = normed, .eps = eps}));

  Tensor act = w.act.tensor().Rows(0, n);
  TANDEM_RETURN_IF_ERROR(backend_->Linear({.x = normed,
                                           .weight = lw.gate_up_proj.tensor(),
                                           .out = act,
                                           .silu_mul = true,
                                           .scratch = w.gate_up.tensor().Rows(0, n)}));
  TANDEM_RETURN_IF_ERROR(
      backend_->Linear({.x = act, .weight = lw.down_proj.tensor(), .out = residual, .accumulate = true}));
  // The next layer's input norm; after the last layer the final norm runs on the picked rows only.
  if (layer + 1 == config_.num_layers) return Status::Ok();
  return backend_->RmsNorm(
      {.x = residual, .weight = weights_.layers[layer + 1].input_norm.tensor(), .out = normed, .eps = eps});
}

StatusOr<Tensor> LlamaModel::Forward(std::span<const SeqChunk> chunks, PagedKvCache& cache,
                                     const std::function<void(int layer)>& after_layer) {
  TANDEM_RETURN_IF_ERROR(CheckCache(cache));
  const kv_cache::KvLayout& layout = cache.layout();
  BatchLimits limits{.vocab_size = config_.vocab_size,
                     .block_size = layout.block_size,
                     .num_blocks = layout.num_blocks,
                     .max_model_len = options_.max_model_len,
                     .max_num_tokens = options_.max_num_tokens,
                     .max_num_seqs = options_.max_num_seqs,
                     .max_logits_rows = options_.max_logits_rows,
                     .pad_decode_batches = options_.pad_decode_batches};
  TANDEM_ASSIGN_OR_RETURN(BatchPlan plan, BatchPlan::Build(chunks, limits));
  Workspace& w = *ws_;
  const int64_t packed = static_cast<int64_t>(plan.packed.size());
  if (packed > w.meta.tensor().shape[0]) {
    return InvalidArgumentError(fmt::format("step metadata of {} ints exceeds the workspace (block size {} < {}?)",
                                            packed, layout.block_size, options_.kv_block_size));
  }
  Tensor meta = w.meta.tensor().Rows(0, packed);
  TANDEM_RETURN_IF_ERROR(backend_->CopyToDevice(plan.packed.data(), packed * sizeof(int32_t), meta));
  const int64_t n = plan.num_tokens, s = plan.num_seqs, r = plan.num_logits_rows;
  w.token_ids = meta.Rows(plan.token_ids_offset, n);
  w.positions = meta.Rows(plan.positions_offset, n);
  w.slot_mapping = w.slots.tensor().Rows(0, n);
  TANDEM_RETURN_IF_ERROR(backend_->CopyToDevice(plan.slot_mapping.data(), n * sizeof(int64_t), w.slot_mapping));
  w.query_start = meta.Rows(plan.query_start_offset, s + 1);
  w.context_lens = meta.Rows(plan.context_lens_offset, s);
  w.block_tables = meta.Rows(plan.block_tables_offset, s * plan.table_width).Reshape({s, plan.table_width});
  w.logits_rows = meta.Rows(plan.logits_rows_offset, r);

  Tensor logits = w.logits.tensor().Rows(0, r);
  Tensor residual = w.residual.tensor().Rows(0, n);
  TANDEM_RETURN_IF_ERROR(backend_->Embedding(w.token_ids, weights_.embed_tokens.tensor(), residual));
  // Layer 0's input norm (each layer ends with the next one's).
  TANDEM_RETURN_IF_ERROR(backend_->RmsNorm({.x = residual,
                                            .weight = weights_.layers[0].input_norm.tensor(),
                                            .out = w.normed.tensor().Rows(0, n),
                                            .eps = static_cast<float>(config_.rms_norm_eps)}));
  for (int layer = 0; layer < config_.num_layers; ++layer) {
    TANDEM_RETURN_IF_ERROR(RunLayer(layer, plan, cache).WithContext(fmt::format("layer {}", layer)));
    if (after_layer) after_layer(layer);
  }
  if (r == 0) return logits;
  // Final norm and LM head only for the rows that want logits.
  Tensor picked = w.logits_residual.tensor().Rows(0, r), normed = w.logits_normed.tensor().Rows(0, r);
  TANDEM_RETURN_IF_ERROR(backend_->GatherRows(residual, w.logits_rows, picked));
  TANDEM_RETURN_IF_ERROR(backend_->RmsNorm({.x = picked,
                                            .weight = weights_.final_norm.tensor(),
                                            .out = normed,
                                            .eps = static_cast<float>(config_.rms_norm_eps)}));
  TANDEM_RETURN_IF_ERROR(backend_->Linear({normed, weights_.LmHead(), Tensor(), logits}));
  return logits;
}

StatusOr<std::vector<float>> LlamaModel::ForwardToHost(std::span<const SeqChunk> chunks, PagedKvCache& cache) {
  TANDEM_ASSIGN_OR_RETURN(Tensor logits, Forward(chunks, cache));
  std::vector<float> host(logits.NumElements());
  TANDEM_RETURN_IF_ERROR(backend_->CopyToHost(logits, host.data(), host.size() * sizeof(float)));
  return host;
}

}  // namespace tandem::runtime
