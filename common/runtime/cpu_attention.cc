// CpuBackend's RoPE + paged KV write and paged attention (the reference for
// the CUDA kernels). Two-pass softmax per query row, in fp32.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "common/runtime/cpu_backend.h"
#include "common/runtime/op_checks.h"
#include "common/runtime/rope.h"

namespace tandem::runtime {
namespace {

// Rotates one head in place (rotate_half: pairs (i, i + half)).
void RotateHead(float* x, const float* cos_v, const float* sin_v, int half) {
  for (int i = 0; i < half; ++i) {
    float a = x[i], b = x[i + half];
    x[i] = a * cos_v[i] - b * sin_v[i];
    x[i + half] = b * cos_v[i] + a * sin_v[i];
  }
}

// dst = RMSNorm(src) * weight over one head (weight null: plain copy).
void NormHead(const float* src, const float* weight, float eps, int dim, float* dst) {
  if (weight == nullptr) {
    std::memcpy(dst, src, dim * sizeof(float));
    return;
  }
  float sum = 0.0f;
  for (int i = 0; i < dim; ++i) sum += src[i] * src[i];
  const float inv_rms = 1.0f / std::sqrt(sum / static_cast<float>(dim) + eps);
  for (int i = 0; i < dim; ++i) dst[i] = weight[i] * (src[i] * inv_rms);
}

}  // namespace

Status CpuBackend::RopeKvWrite(const RopeKvWriteParams& p) {
  TANDEM_RETURN_IF_ERROR(CheckRopeKvWrite(p, DType::kF32));
  TANDEM_ASSIGN_OR_RETURN(std::vector<float> inv_freq, RopeInvFreq(p.layout.head_dim, p.rope.theta, p.rope.scaling));
  const auto& l = p.layout;
  const int d = l.head_dim, half = d / 2;
  const int64_t n = p.q_out.shape[0], heads = p.q_out.shape[1], row = (heads + 2 * l.num_kv_heads) * d;
  const float* q_norm = p.q_norm.defined() ? p.q_norm.As<float>() : nullptr;
  const float* k_norm = p.k_norm.defined() ? p.k_norm.As<float>() : nullptr;
  std::vector<float> cos_v(half), sin_v(half), k(d);
  float* pool = p.kv_pool.As<float>();
  for (int64_t t = 0; t < n; ++t) {
    const int32_t pos = p.positions.As<int32_t>()[t];
    const int64_t slot = p.slot_mapping.As<int64_t>()[t];
    const int64_t block = slot < 0 ? -1 : slot / l.block_size;
    if (pos < 0 || block >= l.num_blocks) {
      return InvalidArgumentError(fmt::format("RopeKvWrite: token {} has position {} slot {}", t, pos, slot));
    }
    for (int i = 0; i < half; ++i) {
      // Angle rounded to fp32 first, as Hugging Face computes it.
      const float angle = static_cast<float>(pos) * inv_freq[i];
      cos_v[i] = static_cast<float>(std::cos(static_cast<double>(angle)));
      sin_v[i] = static_cast<float>(std::sin(static_cast<double>(angle)));
    }
    const float* qkv = p.qkv.As<float>() + t * row;
    for (int64_t h = 0; h < heads; ++h) {
      float* q = p.q_out.As<float>() + (t * heads + h) * d;
      NormHead(qkv + h * d, q_norm, p.norm_eps, d, q);
      RotateHead(q, cos_v.data(), sin_v.data(), half);
    }
    if (block < 0) continue;  // K/V not stored (padding)
    const int in_block = static_cast<int>(slot % l.block_size);
    for (int h = 0; h < l.num_kv_heads; ++h) {
      NormHead(qkv + (heads + h) * d, k_norm, p.norm_eps, d, k.data());
      RotateHead(k.data(), cos_v.data(), sin_v.data(), half);
      const float* v = qkv + (heads + l.num_kv_heads + h) * d;
      const int b = static_cast<int>(block);
      std::memcpy(pool + l.ElementOffset(p.layer, b, 0, h, in_block), k.data(), d * sizeof(float));
      std::memcpy(pool + l.ElementOffset(p.layer, b, 1, h, in_block), v, d * sizeof(float));
    }
  }
  return Status::Ok();
}

Status CpuBackend::PagedAttention(const PagedAttentionParams& p) {
  TANDEM_RETURN_IF_ERROR(CheckPagedAttention(p, DType::kF32));
  const auto& l = p.layout;
  const int64_t num_heads = p.q.shape[1], group = num_heads / l.num_kv_heads, dim = l.head_dim;
  const int64_t table_width = p.block_tables.shape[1];
  const int32_t* qs = p.query_start.As<int32_t>();
  const float* pool = p.kv_pool.As<float>();
  scores_.resize(std::max<size_t>(scores_.size(), p.max_context_len));
  for (int s = 0; s < p.num_seqs; ++s) {
    int32_t n = qs[s + 1] - qs[s], context_len = p.context_lens.As<int32_t>()[s];
    const int32_t* table = p.block_tables.As<int32_t>() + s * table_width;
    if (n < 0 || qs[s] < 0 || qs[s + 1] > p.q.shape[0] || context_len < n || context_len > p.max_context_len) {
      return InvalidArgumentError(
          fmt::format("PagedAttention: sequence {} has {} queries, context_len {}", s, n, context_len));
    }
    for (int32_t b = 0; b < (context_len + l.block_size - 1) / l.block_size; ++b) {
      if (table[b] < 0 || table[b] >= l.num_blocks) {
        return InvalidArgumentError(fmt::format("PagedAttention: sequence {} uses block {}", s, table[b]));
      }
    }
    for (int32_t i = 0; i < n; ++i) {
      const int64_t row = qs[s] + i;
      const int32_t visible = context_len - n + i + 1;  // causal: positions [0, own position]
      for (int64_t h = 0; h < num_heads; ++h) {
        const float* q = p.q.As<float>() + (row * num_heads + h) * dim;
        float* out = p.out.As<float>() + (row * num_heads + h) * dim;
        const int kv_head = static_cast<int>(h / group);
        float max_score = -std::numeric_limits<float>::infinity();
        for (int32_t j = 0; j < visible; ++j) {
          const float* k = pool + l.ElementOffset(p.layer, table[j / l.block_size], 0, kv_head, j % l.block_size);
          float score = 0.0f;
          for (int64_t d = 0; d < dim; ++d) score += q[d] * k[d];
          scores_[j] = score * p.scale;
          max_score = std::max(max_score, scores_[j]);
        }
        float sum = 0.0f;
        for (int32_t j = 0; j < visible; ++j) {
          scores_[j] = std::exp(scores_[j] - max_score);
          sum += scores_[j];
        }
        std::fill(out, out + dim, 0.0f);
        for (int32_t j = 0; j < visible; ++j) {
          const float* v = pool + l.ElementOffset(p.layer, table[j / l.block_size], 1, kv_head, j % l.block_size);
          const float weight = scores_[j] / sum;
          for (int64_t d = 0; d < dim; ++d) out[d] += weight * v[d];
        }
      }
    }
  }
  return Status::Ok();
}

}  // namespace tandem::runtime
