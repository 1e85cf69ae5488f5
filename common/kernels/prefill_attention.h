// Causal prefill attention over a paged KV cache, tiled (no S x S matrix), on tensor cores
// (mma.sync m16n8k16 bf16 -> fp32), FlashAttention-2 style online softmax.
//
// The new tokens' K and V must already be in the cache (LaunchRopeKvWrite), so one kernel
// covers plain prefill, prefix-cache hits and chunked prefill: query i of sequence s sits at
// position context_lens[s] - q_len(s) + i and attends keys 0 ..= that position.
// Thread rule: launchers only queue work on the given stream.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "common/base/status.h"

namespace tandem::kernels {

struct PrefillAttentionParams {
  const __nv_bfloat16* q = nullptr;         // [num_tokens, num_q_heads, head_dim], packed seqs
  const __nv_bfloat16* kv_cache = nullptr;  // one layer: [num_blocks, 2, Hkv, block_size, hd]
  const int32_t* block_tables = nullptr;    // [num_seqs, max_blocks_per_seq]
  const int32_t* cu_q_lens = nullptr;       // [num_seqs + 1] prefix sums of new-token counts
  const int32_t* context_lens = nullptr;    // [num_seqs] cached tokens incl. the new ones
  __nv_bfloat16* out = nullptr;             // [num_tokens, num_q_heads, head_dim]
  int num_seqs = 0;
  int num_q_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;    // 64 or 128
  int block_size = 0;  // power of two in [8, 64]
  int max_blocks_per_seq = 0;
  int max_q_len = 0;  // >= every q_len (sizes the grid)
  float softmax_scale = 0.f;
};

// REQUIRES (not checkable on the host): q_len(s) <= context_lens[s] <=
// max_blocks_per_seq * block_size. Errors: InvalidArgument on bad shapes; Internal on launch.
Status LaunchPrefillAttention(const PrefillAttentionParams& params, cudaStream_t stream);

}  // namespace tandem::kernels
