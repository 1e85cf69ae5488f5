// Paged decode attention (one new query token per sequence) for GQA, FlashDecoding style.
//
// One thread block handles (sequence, KV head, split): it streams its share of the
// sequence's K/V blocks through shared memory once (cp.async, a 3-stage pipeline of 64-token
// tiles in a swizzled layout, so that every copy moves whole 128-byte lines) and computes
// all query heads of that KV group from each load on tensor cores (mma.sync m16n8k16: the
// group's heads are the rows of one 16-row tile). With
// num_splits > 1 each block writes a partial result (fp32 output + log-sum-exp) to the
// workspace and a second kernel merges the splits.
//
// Under PDL the kernel loads K/V of every position but each sequence's newest before the
// previous kernel has finished: that kernel may write the newest token's K/V (RoPE + KV
// write in a decode step) and nothing else the attention reads. The newest row is read
// after the wait, or, with `rope` set, made by this kernel itself: RoPE + KV write fused in,
// so a decode step runs QKV GEMM -> attention (-> merge) -> o GEMM.
//
// Plan/run split: PlanDecodeAttention picks num_splits and the workspace size from the
// batch shape and an upper bound on the context length, so a captured CUDA graph can
// replay one launch for any context lengths up to that bound.
// Thread rule: launchers only queue work on the given stream.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "common/base/status.h"
#include "common/kernels/rope_kv_write.h"

namespace tandem::kernels {

struct DecodeAttentionParams {
  const __nv_bfloat16* q = nullptr;         // [num_seqs, num_q_heads, head_dim]
  const __nv_bfloat16* kv_cache = nullptr;  // one layer: [num_blocks, 2, Hkv, block_size, hd]
  const int32_t* block_tables = nullptr;    // [num_seqs, max_blocks_per_seq] block ids
  const int32_t* context_lens = nullptr;    // [num_seqs] tokens in the cache, incl. the new one
  __nv_bfloat16* out = nullptr;             // [num_seqs, num_q_heads, head_dim]
  float* workspace = nullptr;               // plan.workspace_bytes (unused when 1 split)
  int num_seqs = 0;
  int num_q_heads = 0;
  int num_kv_heads = 0;        // num_q_heads / num_kv_heads <= 16
  int head_dim = 0;            // 64 or 128
  int block_size = 0;          // 16, 32 or 64 (any power of two in [8, 64])
  int max_blocks_per_seq = 0;  // row stride of block_tables
  int max_context_len = 0;     // >= every context_lens[i]; the plan's bound
  float softmax_scale = 0.f;   // usually 1/sqrt(head_dim)
  int num_splits = 1;          // from the plan
  int num_stages = 0;          // K/V tiles in flight + 1 (2..4); 0: default (3)
  // Optional, rope.qkv != nullptr: RoPE + K/V write of each sequence's newest token fused in
  // (the decode step's LaunchRopeKvWrite, bit for bit). q is then unused: each block rotates
  // its group's query heads from rope.qkv (rope.q_out is not written), and the block whose
  // split holds the newest position stores that token's K and V at rope.slot_mapping[seq]
  // and attends to them. REQUIRES: rope.num_tokens == num_seqs, each sequence's newest token
  // at position context_lens[s] - 1, rope.kv_cache == kv_cache, the same head counts, head
  // dim and block size.
  RopeKvWriteParams rope;
  // The kernel after this one (the merge; with one split, the next op) may launch (PDL) only
  // once the last block has ended, not as soon as the blocks have waited for their
  // predecessor. A kernel launched early onto the attention's SMs runs with their large
  // shared-memory configuration: skinny GEMMs there have a small L1, which bounds the weight
  // loads they keep in flight (H200, b=1 8K: the down projection takes 47 instead of 30 us).
  // Launched at the end, the next kernel finds drained SMs.
  bool late_next = false;
};

struct DecodeAttentionPlan {
  int num_splits = 1;          // thread blocks per (sequence, KV head)
  size_t workspace_bytes = 0;  // fp32 partial outputs and log-sum-exps
};

// Chooses the split count for `params` (pointers are ignored) on a GPU with
// `num_sms` multiprocessors: the count (>= 1 tile per split) whose blocks best fill whole
// waves of the blocks that fit on the GPU at once (CUDA occupancy calculator; 2 per SM
// without a GPU). Errors: InvalidArgument on bad shapes.
StatusOr<DecodeAttentionPlan> PlanDecodeAttention(const DecodeAttentionParams& params, int num_sms);

// Workspace bytes a launch of `params` with its num_splits needs (the plan's for its count).
size_t DecodeAttentionWorkspaceBytes(const DecodeAttentionParams& params);

// Runs attention. REQUIRES: params.num_splits and params.workspace from a plan made for the
// same shapes. Context lengths must be in [0, max_context_len]; a sequence with 0 tokens
// gets a zero output. Errors: InvalidArgument on bad shapes or pointers; Internal on launch.
Status LaunchDecodeAttention(const DecodeAttentionParams& params, cudaStream_t stream);

}  // namespace tandem::kernels
