// A whole decode step of a Llama-family model in one persistent kernel, for small
// decode-only batches (at most kDecodeStepMaxSeqs sequences, one new token each), where
// the op-by-op forward loses its time at kernel boundaries rather than on HBM.
//
// One thread block per SM: 4 producer warps and 8 consumer warps. The producers stream,
// through a ring of 16 KB shared-memory stages (mbarrier-completed), every byte the SM's
// share of the step reads from HBM in the order the consumers use it: for each layer its
// rows of the QKV weights, the K/V of its attention items (all but each sequence's newest
// token, which earlier steps wrote), its rows of the o, gate/up and down weights; at the
// end its rows of the LM head. Weight stages are bulk tensor copies (boxes of 8 rows x 256
// columns, from descriptors WriteDecodeStepTensorMaps puts in the workspace), K/V stages
// 16-byte cp.async copies into padded rows. None of that depends on this step's
// activations, so the producers run ahead of the consumers by the whole ring: while the
// consumers wait at a phase boundary, or run a small phase, HBM keeps streaming.
//
// The consumers run the phases between grid-wide barriers (an arrival counter per
// barrier in the workspace; the last block to leave resets them for the next launch):
//   embedding -> per layer: RMSNorm -> QKV -> RoPE + K/V write + attention over splits of
//   the context (FlashDecoding; the last split of each sequence and KV head to finish
//   merges them) -> o (+= residual) -> RMSNorm -> gate/up with SiLU-mul -> down
//   (+= residual) -> final RMSNorm of the logits rows -> LM head.
// Every phase splits its output rows (or items) over the blocks; each output element is
// computed by one block (no atomics on data), and each RMSNorm sums per-block partial sums
// of squares in block order, so a step is deterministic on a given GPU.
//
// Numerics follow the per-op CUDA forward (bf16 activations and KV, fp32 accumulation, an
// fp32 residual stream that the o and down projections add into, the same roundings of q,
// K, V, P, the gate/up outputs and the normalized activations); sums run in other orders,
// so results agree with the per-op forward to bf16 rounding, not bit for bit.
//
// Status (H200, docs/perf.md): correct, but slower than the op-by-op step it replaces
// (Llama-3-8B shape, b=1 1K: 5.7 ms against 4.3 ms), so CudaBackend runs it only when
// asked (CudaBackendOptions::fused_decode). DecodeStepParams::trace records where a
// step's time goes.
//
// Plan/run split as in decode_attention.h: PlanDecodeStep picks the attention split count
// from the batch size and a bound on the context length, so one captured graph serves
// every context length up to the bound.
// Thread rule: launchers only queue work on the given stream.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "common/base/status.h"
#include "common/kernels/rope_kv_write.h"

namespace tandem::kernels {

constexpr int kDecodeStepMaxSeqs = 8;     // tokens (= sequences) per step
constexpr int kDecodeStepMaxLayers = 96;  // layers whose weight pointers fit the parameters
constexpr int kDecodeStepMaxGroup = 8;    // query heads per KV head
constexpr int kDecodeStepMaxBlocks = 256; // thread blocks (SMs) the partial sums are sized for

struct DecodeStepLayer {
  const __nv_bfloat16* input_norm = nullptr;  // [hidden]
  const __nv_bfloat16* qkv = nullptr;         // [(Hq + 2 Hkv) * hd, hidden]
  const __nv_bfloat16* qkv_bias = nullptr;    // optional [(Hq + 2 Hkv) * hd]
  const __nv_bfloat16* q_norm = nullptr;      // optional [hd] (set both or neither)
  const __nv_bfloat16* k_norm = nullptr;      // optional [hd]
  const __nv_bfloat16* o = nullptr;           // [hidden, Hq * hd]
  const __nv_bfloat16* o_bias = nullptr;      // optional [hidden]
  const __nv_bfloat16* post_norm = nullptr;   // [hidden]
  const __nv_bfloat16* gate_up = nullptr;     // [2 * ffn, hidden]: gate rows, then up rows
  const __nv_bfloat16* down = nullptr;        // [hidden, ffn]
};

struct DecodeStepParams {
  // Model.
  int num_layers = 0;
  int hidden = 0;        // multiple of 32
  int ffn = 0;           // multiple of 32
  int vocab = 0;
  int num_q_heads = 0;
  int num_kv_heads = 0;  // num_q_heads / num_kv_heads <= kDecodeStepMaxGroup
  int head_dim = 0;      // 64 or 128
  float eps = 1e-6f;     // RMSNorm epsilon (also of q_norm / k_norm)
  float softmax_scale = 0.f;
  RopeConfig rope;
  DecodeStepLayer layers[kDecodeStepMaxLayers];
  const __nv_bfloat16* embed = nullptr;       // [vocab, hidden]
  const __nv_bfloat16* final_norm = nullptr;  // [hidden]
  const __nv_bfloat16* lm_head = nullptr;     // [vocab, hidden]

  // KV cache: the whole pool, layer-major; layer l starts at kv_pool + l * kv_layer_stride
  // elements and is [num_blocks, 2, Hkv, block_size, hd] (common/kv_cache/kv_layout.h).
  __nv_bfloat16* kv_pool = nullptr;
  int64_t kv_layer_stride = 0;
  int num_cache_blocks = 0;
  int block_size = 0;  // power of two in [8, 64]

  // Step (device memory written before the launch).
  const int32_t* token_ids = nullptr;     // [num_seqs]
  const int32_t* positions = nullptr;     // [num_seqs]: context_lens[s] - 1
  const int64_t* slot_mapping = nullptr;  // [num_seqs]: where the new K/V go; < 0: not stored
  const int32_t* context_lens = nullptr;  // [num_seqs], incl. the new token, in [1, max_context_len]
  const int32_t* block_tables = nullptr;  // [num_seqs, max_blocks_per_seq]
  const int32_t* logits_rows = nullptr;   // [num_logits_rows]: which sequences want logits
  int num_seqs = 0;                       // 1 .. kDecodeStepMaxSeqs
  int num_logits_rows = 0;                // 0 .. num_seqs
  int max_blocks_per_seq = 0;
  int max_context_len = 0;                // the plan's bound
  float* logits = nullptr;                // [num_logits_rows, vocab] fp32

  // From the plan.
  int num_splits = 1;
  int num_blocks = 0;              // grid size: one block per SM
  void* workspace = nullptr;       // plan.workspace_bytes, 256-byte aligned

  // Optional timeline for benchmarks: [num_blocks][DecodeStepTraceStride(num_layers)]
  // int64 per block: globaltimer (ns) and clock64 at the block's start; for each grid
  // barrier its arrival and release (ns) and the cycles consumer thread 0 waited for ring
  // stages since the previous barrier; for each phase's loads (5 per layer: QKV, attention
  // K/V, o, gate/up, down; then the LM head) when the producer had issued them (ns) and the
  // cycles it waited for free ring slots meanwhile; globaltimer and clock64 at the end.
  int64_t* trace = nullptr;
};

// Layout of one block's events in DecodeStepParams::trace.
// Grid barriers of one launch: after the embedding, 7 per layer, after the final norm.
constexpr int DecodeStepTraceBarriers(int num_layers) { return 7 * num_layers + 2; }
constexpr int DecodeStepTraceBarrier(int k) { return 2 + 3 * k; }  // arrive, release, wait cycles
constexpr int DecodeStepTraceProducer(int num_layers, int e) {      // issued, wait cycles
  return 2 + 3 * DecodeStepTraceBarriers(num_layers) + 2 * e;
}
constexpr int DecodeStepTraceStride(int num_layers) {
  return DecodeStepTraceProducer(num_layers, 5 * num_layers + 1) + 2;
}

struct DecodeStepPlan {
  int num_splits = 1;
  int num_blocks = 0;
  size_t workspace_bytes = 0;
};

// Whether the kernel takes this model shape (head_dim 64/128, GQA group <= 8, hidden and
// ffn multiples of 32, layers <= kDecodeStepMaxLayers, block size a power of two in
// [8, 64]); InvalidArgument naming the first thing it does not take.
Status CheckDecodeStepShape(const DecodeStepParams& params);

// Split count, grid and workspace for `params` (pointers ignored) on a GPU with `num_sms`
// multiprocessors. Errors: InvalidArgument for shapes CheckDecodeStepShape refuses.
StatusOr<DecodeStepPlan> PlanDecodeStep(const DecodeStepParams& params, int num_sms);

// Workspace for any batch of up to kDecodeStepMaxSeqs sequences with contexts up to
// `max_context_len`: the most any plan for those asks.
StatusOr<size_t> DecodeStepMaxWorkspaceBytes(const DecodeStepParams& params, int num_sms, int max_context_len);

// Writes into params.workspace the bulk-copy descriptors (CUDA tensor maps) of every weight
// matrix of params (queued on `stream`; the host memory is staged before this returns).
// REQUIRES: once per workspace and set of weights, before the first launch with them.
// Errors: InvalidArgument for shapes CheckDecodeStepShape refuses; Internal when the
// driver cannot encode a map.
Status WriteDecodeStepTensorMaps(const DecodeStepParams& params, cudaStream_t stream);

// Runs the step. REQUIRES: num_splits, num_blocks and workspace from a plan for the same
// shapes, the weights' tensor maps written into the workspace (WriteDecodeStepTensorMaps);
// the workspace's barrier counters zero before the first launch (the kernel leaves
// them zero); no other kernel running on the GPU that could keep a block from being
// resident (the launch is cooperative: it fails rather than deadlocks when the blocks do
// not fit). Errors: InvalidArgument on bad shapes or pointers; Internal on launch. A
// barrier that waits for over 10 s (a bug) traps, which fails the stream.
Status LaunchDecodeStep(const DecodeStepParams& params, cudaStream_t stream);

}  // namespace tandem::kernels
