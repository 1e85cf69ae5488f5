// RoPE device helpers shared by the RoPE + KV write kernel (rope_kv_write.cu) and the
// decode attention kernel that fuses it (decode_attention.cu). Both go through these
// functions so that a rotated q or K row is the same bits whichever kernel made it.
// Private to this folder.
//
// Warp layout: one warp per head; lane handles the rotation pairs j = lane + 32 * r
// (r < kHeadDim / 64), i.e. elements j and j + kHeadDim / 2.
#pragma once

#include <cuda_bf16.h>

#include "common/kernels/kernel_util.cuh"
#include "common/kernels/rope_kv_write.h"

namespace tandem::kernels::rope_detail {

// Inverse frequency of rotation pair j, with the configured scaling (fp32 as in HF).
__device__ __forceinline__ float InvFreq(const RopeConfig& c, int j, int head_dim) {
  float inv = 1.f / powf(c.theta, static_cast<float>(2 * j) / head_dim);
  if (c.scaling == RopeScaling::kLinear) return inv / c.factor;
  if (c.scaling == RopeScaling::kLlama3) {
    const float low_wavelen = c.original_max_position / c.low_freq_factor;
    const float high_wavelen = c.original_max_position / c.high_freq_factor;
    const float wavelen = 2.f * 3.14159265358979f / inv;
    if (wavelen < high_wavelen) return inv;
    if (wavelen > low_wavelen) return inv / c.factor;
    const float smooth =
        (c.original_max_position / wavelen - c.low_freq_factor) / (c.high_freq_factor - c.low_freq_factor);
    return (1.f - smooth) * inv / c.factor + smooth * inv;
  }
  return inv;
}

template <int kHeadDim>
struct LaneAngles {
  static constexpr int kPairs = kHeadDim / 64;
  float sin[kPairs], cos[kPairs];
};

// The angles of this lane's pairs at position `pos`.
template <int kHeadDim>
__device__ __forceinline__ LaneAngles<kHeadDim> AnglesAt(const RopeConfig& c, float pos) {
  const int lane = threadIdx.x & 31;
  LaneAngles<kHeadDim> a;
#pragma unroll
  for (int r = 0; r < LaneAngles<kHeadDim>::kPairs; ++r)
    sincosf(pos * InvFreq(c, lane + 32 * r, kHeadDim), &a.sin[r], &a.cos[r]);
  return a;
}

// This lane's values of head `src`: x1[r] = src[j], x2[r] = src[j + kHeadDim / 2].
// kCoherent: `src` is read through L2 only (data another block of the same launch wrote).
template <int kHeadDim, bool kCoherent = false>
__device__ __forceinline__ void LoadHeadValues(const __nv_bfloat16* src, float (&x1)[LaneAngles<kHeadDim>::kPairs],
                                               float (&x2)[LaneAngles<kHeadDim>::kPairs]) {
  constexpr int kHalf = kHeadDim / 2;
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int r = 0; r < LaneAngles<kHeadDim>::kPairs; ++r) {
    x1[r] = __bfloat162float(kCoherent ? __ldcg(src + lane + 32 * r) : src[lane + 32 * r]);
    x2[r] = __bfloat162float(kCoherent ? __ldcg(src + lane + 32 * r + kHalf) : src[lane + 32 * r + kHalf]);
  }
}

// A q or k head's values (`rotate`): RMSNorm with `norm_weight` first when it is set
// (rounded to bf16, as the norm's output would be stored), then rotated by `a`. V heads:
// rotate = false, left as they are. Unrounded; StoreHead rounds. The whole warp calls it
// (the norm sums over lanes).
template <int kHeadDim>
__device__ __forceinline__ void NormAndRotateHead(const __nv_bfloat16* norm_weight, float eps, bool rotate,
                                                  const LaneAngles<kHeadDim>& a,
                                                  float (&x1)[LaneAngles<kHeadDim>::kPairs],
                                                  float (&x2)[LaneAngles<kHeadDim>::kPairs]) {
  constexpr int kPairs = LaneAngles<kHeadDim>::kPairs;
  constexpr int kHalf = kHeadDim / 2;
  const int lane = threadIdx.x & 31;
  if (!rotate) return;
  if (norm_weight != nullptr) {
    float ss = 0.f;
#pragma unroll
    for (int r = 0; r < kPairs; ++r) ss += x1[r] * x1[r] + x2[r] * x2[r];
    const float inv_rms = rsqrtf(detail::WarpSum(ss) / kHeadDim + eps);
#pragma unroll
    for (int r = 0; r < kPairs; ++r) {
      x1[r] = __bfloat162float(__float2bfloat16(x1[r] * inv_rms * __bfloat162float(norm_weight[lane + 32 * r])));
      x2[r] =
          __bfloat162float(__float2bfloat16(x2[r] * inv_rms * __bfloat162float(norm_weight[lane + 32 * r + kHalf])));
    }
  }
#pragma unroll
  for (int r = 0; r < kPairs; ++r) {
    const float c = x1[r] * a.cos[r] - x2[r] * a.sin[r];
    const float s = x2[r] * a.cos[r] + x1[r] * a.sin[r];
    x1[r] = c;
    x2[r] = s;
  }
}

// LoadHeadValues then NormAndRotateHead.
template <int kHeadDim, bool kCoherent = false>
__device__ __forceinline__ void LoadHead(const __nv_bfloat16* src, const __nv_bfloat16* norm_weight, float eps,
                                         bool rotate, const LaneAngles<kHeadDim>& a,
                                         float (&x1)[LaneAngles<kHeadDim>::kPairs],
                                         float (&x2)[LaneAngles<kHeadDim>::kPairs]) {
  LoadHeadValues<kHeadDim, kCoherent>(src, x1, x2);
  NormAndRotateHead<kHeadDim>(norm_weight, eps, rotate, a, x1, x2);
}

// Writes this lane's values of a head, rounded to bf16.
template <int kHeadDim>
__device__ __forceinline__ void StoreHead(__nv_bfloat16* dst, const float (&x1)[LaneAngles<kHeadDim>::kPairs],
                                          const float (&x2)[LaneAngles<kHeadDim>::kPairs]) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int r = 0; r < LaneAngles<kHeadDim>::kPairs; ++r) {
    dst[lane + 32 * r] = __float2bfloat16(x1[r]);
    dst[lane + 32 * r + kHeadDim / 2] = __float2bfloat16(x2[r]);
  }
}

}  // namespace tandem::kernels::rope_detail
