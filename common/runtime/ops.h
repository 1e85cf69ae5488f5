// Ops: the op set the model forward is written against. A backend (CPU fp32
// reference, CUDA) implements every op; the forward never touches tensor
// elements itself, so a new backend plugs in without changing model code.
//
// Conventions for every op:
//  - Tensors are dense row-major views on the backend's device, in the
//    backend's compute dtype (Backend::compute_dtype()) unless noted (I32 for
//    ids and batch metadata). N is the number of tokens in the batch, S the
//    number of sequences.
//  - Ops are enqueued in order on the backend's stream; they never read
//    device memory on the host. Host-side sizes that a launcher needs to plan
//    its grid (num_seqs, max_context_len ...) travel in the params.
//  - Shapes are checked (op_checks.h) and a mismatch is InvalidArgument; the
//    values in device memory (ids, block tables) are the caller's contract.
// Thread rule: an Ops object is used by one thread (the engine thread).
#pragma once

#include "common/base/status.h"
#include "common/kv_cache/kv_layout.h"
#include "common/model/model_config.h"
#include "common/runtime/tensor.h"

namespace tandem::runtime {

// out = RMSNorm(x) * weight, over the last dim, computed in fp32:
// y = x / sqrt(mean(x^2) + eps) * weight (Hugging Face LlamaRMSNorm).
// With `residual`: residual += x first, and the updated residual is normalized
// (the fused "add + norm" between transformer sub-layers).
// x and residual may be F32 instead of the compute dtype (the model's residual stream is
// fp32: fewer roundings between layers); weight and out are in the compute dtype.
struct RmsNormParams {
  Tensor x{};         // [rows, dim], compute dtype or F32
  Tensor residual{};  // optional [rows, dim], x's dtype, updated in place
  Tensor weight{};    // [dim]
  Tensor out{};       // [rows, dim]; may alias x of the same dtype (never residual)
  float eps = 1e-6f;
};

// out = x * weight^T + bias; with `accumulate`, out += x * weight^T + bias (out F32: the
// o and down projections add into the fp32 residual stream, the same one add as
// RmsNormParams::residual would do). With `silu_mul`, weight is the fused [gate (ffn) |
// up (ffn)] projection and out = silu(x · gateᵀ) * (x · upᵀ), [N, ffn]: Linear into
// `scratch` [N, 2 * ffn] then SiluAndMul, which a backend may fold into one kernel (CUDA
// does at decode batch sizes).
struct LinearParams {
  Tensor x{};       // [N, in]
  Tensor weight{};  // [out_features, in] (Hugging Face nn.Linear layout)
  Tensor bias{};    // optional [out_features]
  Tensor out{};     // [N, out_features] (silu_mul: [N, out_features / 2]), activation dtype or
                    // F32 (logits, the residual stream); must not alias x
  bool accumulate = false;
  bool silu_mul = false;
  Tensor scratch{};  // silu_mul: [N, out_features], compute dtype
};

// Rotary embedding parameters (host values; the backend derives the
// frequencies, see rope.h for the exact Hugging Face formulas).
struct RopeParams {
  double theta = 10000.0;      // rope_theta
  model::RopeScaling scaling;  // none, linear or llama3
};

// From the fused QKV projection row of each token, [q heads | k heads | v heads]:
// optional per-head RMSNorm of q and k (Qwen3 q_norm / k_norm), rotary
// embedding of q and k (Hugging Face rotate_half: dims j and j + head_dim/2
// form a pair rotated by position * inv_freq[j]), q written to q_out, and
// k, v stored into the paged KV pool at each token's slot.
struct RopeKvWriteParams {
  Tensor qkv{};     // [N, (num_heads + 2 * num_kv_heads) * head_dim]
  Tensor q_out{};   // [N, num_heads, head_dim]
  Tensor q_norm{};  // optional [head_dim]: RMSNorm weight applied to each q head first
  Tensor k_norm{};  // optional [head_dim]: same for k (set both or neither)
  float norm_eps = 1e-6f;
  Tensor positions{};     // I32 [N]: position of each token in its sequence
  Tensor slot_mapping{};  // I64 [N]: block_id * block_size + slot; < 0: K/V not stored
  Tensor kv_pool{};       // the whole pool (kv_cache::KvLayout), any shape
  kv_cache::KvLayout layout;
  int layer = 0;
  RopeParams rope;
};

// Causal attention over the paged cache for a mixed batch. Sequence s owns
// query rows [query_start[s], query_start[s+1]); those are its newest tokens,
// at positions [context_lens[s] - n_s, context_lens[s]). Query row at position p attends
// to cache positions [0, p] of its own sequence (already written by
// RopeKvWrite). GQA: query head h reads KV head h / (num_heads / num_kv_heads).
struct PagedAttentionParams {
  Tensor q{};        // [N, num_heads, head_dim]
  Tensor out{};      // [N, num_heads, head_dim]
  Tensor kv_pool{};  // the whole pool
  kv_cache::KvLayout layout;
  int layer = 0;
  Tensor query_start{};     // I32 [S + 1], query_start[0] = 0, query_start[S] = N
  Tensor context_lens{};    // I32 [S]: cache length of each sequence after this step
  Tensor block_tables{};    // I32 [S, max_blocks_per_seq], rows padded past the used blocks
  int num_seqs = 0;         // S (host copy, for planning)
  int max_query_len = 0;    // max n_s (host copy)
  int max_context_len = 0;  // max context_lens[s] (host copy)
  float scale = 1.0f;       // softmax scale, 1/sqrt(head_dim)
  Tensor workspace{};       // U8 [Backend::AttentionWorkspaceBytes(...)]; may be undefined when that is 0
};

class Ops {
 public:
  virtual ~Ops() = default;

  // out[i] = table[ids[i]]. ids: I32 [N]; table: [vocab, hidden]; out: [N, hidden], the
  // compute dtype or F32.
  virtual Status Embedding(Tensor ids, Tensor table, Tensor out) = 0;
  virtual Status RmsNorm(const RmsNormParams& p) = 0;
  virtual Status Linear(const LinearParams& p) = 0;
  virtual Status RopeKvWrite(const RopeKvWriteParams& p) = 0;
  virtual Status PagedAttention(const PagedAttentionParams& p) = 0;
  // RopeKvWrite(rope) then PagedAttention(attn), for attn.q == rope.q_out and the same pool
  // and layer. A backend may fuse the two (CUDA does in decode steps) and then need not
  // write rope.q_out: read the attention's output, not q.
  virtual Status RopeKvWriteAndAttention(const RopeKvWriteParams& rope, const PagedAttentionParams& attn) {
    TANDEM_RETURN_IF_ERROR(RopeKvWrite(rope));
    return PagedAttention(attn);
  }
  // out = silu(gate) * up, silu(x) = x / (1 + exp(-x)), where each row of the
  // fused projection is [gate (ffn) | up (ffn)]. gate_up: [N, 2 * ffn]; out: [N, ffn].
  virtual Status SiluAndMul(Tensor gate_up, Tensor out) = 0;
  // out[i] = src[indices[i]]. src: [rows, dim]; indices: I32 [R]; out: [R, dim].
  virtual Status GatherRows(Tensor src, Tensor indices, Tensor out) = 0;
};

}  // namespace tandem::runtime
