// RoPE fused with the write of K and V into the paged KV cache, with an optional
// per-head RMSNorm of q and k before the rotation (Qwen3-style q_norm / k_norm).
//
// Input is the fused QKV projection row of each token: [q heads | k heads | v heads].
// Rotation follows Hugging Face "rotate_half": for j < head_dim/2, with x1 = x[j],
// x2 = x[j + head_dim/2] and angle = position * inv_freq[j]:
//   out[j] = x1*cos - x2*sin,   out[j + head_dim/2] = x2*cos + x1*sin.
// K (rotated) and V go to the cache slot slot_mapping[t] (block = slot / block_size,
// offset = slot % block_size) in the layout of common/kv_cache/kv_layout.h.
// Thread rule: launchers only queue work on the given stream.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "common/base/status.h"

namespace tandem::kernels {

enum class RopeScaling : int { kNone = 0, kLinear = 1, kLlama3 = 2 };

struct RopeConfig {
  float theta = 10000.f;  // rope_theta
  RopeScaling scaling = RopeScaling::kNone;
  float factor = 1.f;                  // linear and llama3: frequencies divided by this
  float low_freq_factor = 1.f;         // llama3 only
  float high_freq_factor = 4.f;        // llama3 only
  float original_max_position = 8192;  // llama3 only: original_max_position_embeddings
};

struct RopeKvWriteParams {
  const __nv_bfloat16* qkv = nullptr;            // [num_tokens, qkv_stride]; q, k, v heads packed
  int64_t qkv_stride = 0;                        // elements between rows (>= (Hq + 2*Hkv) * head_dim)
  const int32_t* positions = nullptr;            // [num_tokens] absolute positions
  const int64_t* slot_mapping = nullptr;         // [num_tokens] cache slot; < 0: do not write K/V
  __nv_bfloat16* q_out = nullptr;                // [num_tokens, num_q_heads, head_dim] rotated q
  __nv_bfloat16* kv_cache = nullptr;             // one layer of the pool: [num_blocks, 2, Hkv, bs, hd]
  int64_t num_cache_blocks = 0;                  // blocks in the layer (slots beyond it are skipped)
  const __nv_bfloat16* q_norm_weight = nullptr;  // [head_dim] or nullptr (no q norm)
  const __nv_bfloat16* k_norm_weight = nullptr;  // [head_dim] or nullptr (no k norm)
  float norm_eps = 1e-6f;
  int num_tokens = 0;
  int num_q_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;    // 64, 128, 256 (fast); any other even value (generic)
  int block_size = 0;  // tokens per cache block (power of two)
  RopeConfig rope;
};

// InvalidArgument on null pointers, bad sizes or rope settings (LaunchRopeKvWrite's checks,
// also used by the decode attention that fuses this op).
Status ValidateRopeKvWrite(const RopeKvWriteParams& params);

// Errors: ValidateRopeKvWrite's; Internal on launch.
Status LaunchRopeKvWrite(const RopeKvWriteParams& params, cudaStream_t stream);

}  // namespace tandem::kernels
