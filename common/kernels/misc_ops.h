// Small kernels the CUDA backend needs besides the fast paths:
//  - a generic paged attention for any shape the tensor-core kernels do not take
//    (head_dim not 64/128, block size outside [8, 64], GQA groups over 16): one warp per
//    (query row, head), fp32 online softmax; slow but exact enough to be a fallback and
//    the path of the tiny test models (head_dim 16);
//  - a row gather for any element size and a bias add.
// Thread rule: launchers only queue work on the given stream.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "common/base/status.h"

namespace tandem::kernels {

struct GenericAttentionParams {
  const __nv_bfloat16* q = nullptr;         // [num_tokens, num_q_heads, head_dim]
  const __nv_bfloat16* kv_cache = nullptr;  // one layer: [num_blocks, 2, Hkv, block_size, hd]
  const int32_t* block_tables = nullptr;    // [num_seqs, max_blocks_per_seq]
  const int32_t* query_start = nullptr;     // [num_seqs + 1]
  const int32_t* context_lens = nullptr;    // [num_seqs] tokens in the cache incl. the new ones
  __nv_bfloat16* out = nullptr;             // [num_tokens, num_q_heads, head_dim]
  int num_seqs = 0;
  int num_q_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;    // even, <= 256
  int block_size = 0;  // > 0
  int max_blocks_per_seq = 0;
  int max_q_len = 0;  // >= every query count (sizes the grid)
  float softmax_scale = 0.f;
};

// Causal: query i of sequence s (of n_s) sits at position context_lens[s] - n_s + i.
// Errors: InvalidArgument on bad shapes or null pointers; Internal on launch.
Status LaunchGenericAttention(const GenericAttentionParams& params, cudaStream_t stream);

// out[i] = src[indices[i]] for rows of `row_bytes` bytes (indices out of range give zeros).
Status LaunchGatherRows(const void* src, int64_t num_src_rows, size_t row_bytes, const int32_t* indices,
                        int num_indices, void* out, cudaStream_t stream);

// y[r, c] += bias[c] for y of `rows` x `cols`, bf16 or fp32 (y_is_f32).
Status LaunchAddBias(void* y, bool y_is_f32, const __nv_bfloat16* bias, int64_t rows, int64_t cols,
                     cudaStream_t stream);

}  // namespace tandem::kernels
