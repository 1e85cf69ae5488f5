#include "common/kernels/rope_kv_write.h"

#include <algorithm>

#include "common/cuda/cuda_status.h"
#include "common/kernels/kernel_util.cuh"
#include "common/kernels/rope_util.cuh"

namespace tandem::kernels {
namespace {

using rope_detail::InvFreq;

// One warp per (token, head) (rope_util.cuh). The angles depend only on the position (step
// metadata, copied before the step's first kernel) and the config, so they are computed
// before waiting for the kernel that writes qkv.
template <int kHeadDim>
__global__ void RopeKvWriteKernel(RopeKvWriteParams p) {
  constexpr int kPairs = rope_detail::LaneAngles<kHeadDim>::kPairs;
  const int t = blockIdx.x;
  const int num_heads = p.num_q_heads + 2 * p.num_kv_heads;
  const int64_t slot = p.slot_mapping[t];
  const bool write_cache = slot >= 0 && slot / p.block_size < p.num_cache_blocks;
  const int64_t block = write_cache ? slot / p.block_size : 0;
  const int offset = write_cache ? static_cast<int>(slot % p.block_size) : 0;
  const auto angles = rope_detail::AnglesAt<kHeadDim>(p.rope, static_cast<float>(p.positions[t]));
  detail::WaitForPreviousKernel();
  detail::AllowNextKernel();
  const __nv_bfloat16* row = p.qkv + t * p.qkv_stride;
  for (int h = threadIdx.x >> 5; h < num_heads; h += blockDim.x >> 5) {
    const bool is_q = h < p.num_q_heads;
    const bool is_v = h >= p.num_q_heads + p.num_kv_heads;
    __nv_bfloat16* dst;
    if (is_q) {
      dst = p.q_out + (static_cast<int64_t>(t) * p.num_q_heads + h) * kHeadDim;
    } else {
      if (!write_cache) continue;
      const int kv = is_v ? 1 : 0;
      const int kh = h - p.num_q_heads - kv * p.num_kv_heads;
      dst = detail::KvCacheRow(p.kv_cache, block, kv, kh, offset, p.num_kv_heads, p.block_size, kHeadDim);
    }
    float x1[kPairs], x2[kPairs];
    rope_detail::LoadHead<kHeadDim>(row + h * kHeadDim, is_q ? p.q_norm_weight : p.k_norm_weight, p.norm_eps, !is_v,
                                    angles, x1, x2);
    rope_detail::StoreHead<kHeadDim>(dst, x1, x2);
  }
}

// Any even head_dim (the tiny test models use 16): one warp per (token, head), lanes
// stride over the rotation pairs; the q/k norm reads the head twice. Same math as above.
__global__ void RopeKvWriteGenericKernel(RopeKvWriteParams p) {
  detail::WaitForPreviousKernel();
  detail::AllowNextKernel();
  const int lane = threadIdx.x & 31;
  const int t = blockIdx.x;
  const int hd = p.head_dim, half = hd / 2;
  const int num_heads = p.num_q_heads + 2 * p.num_kv_heads;
  const __nv_bfloat16* row = p.qkv + t * p.qkv_stride;
  const int64_t slot = p.slot_mapping[t];
  const bool write_cache = slot >= 0 && slot / p.block_size < p.num_cache_blocks;
  const int64_t block = write_cache ? slot / p.block_size : 0;
  const int offset = write_cache ? static_cast<int>(slot % p.block_size) : 0;
  const float pos = static_cast<float>(p.positions[t]);
  for (int h = threadIdx.x >> 5; h < num_heads; h += blockDim.x >> 5) {
    const __nv_bfloat16* src = row + h * hd;
    const bool is_q = h < p.num_q_heads;
    const bool is_v = h >= p.num_q_heads + p.num_kv_heads;
    __nv_bfloat16* dst;
    if (is_q) {
      dst = p.q_out + (static_cast<int64_t>(t) * p.num_q_heads + h) * hd;
    } else {
      if (!write_cache) continue;
      const int kv = is_v ? 1 : 0;
      const int kh = h - p.num_q_heads - kv * p.num_kv_heads;
      dst = detail::KvCacheRow(p.kv_cache, block, kv, kh, offset, p.num_kv_heads, p.block_size, hd);
    }
    if (is_v) {
      for (int d = lane; d < hd; d += 32) dst[d] = src[d];
      continue;
    }
    const __nv_bfloat16* nw = is_q ? p.q_norm_weight : p.k_norm_weight;
    float inv_rms = 1.f;
    if (nw != nullptr) {
      float ss = 0.f;
      for (int d = lane; d < hd; d += 32) {
        const float x = __bfloat162float(src[d]);
        ss += x * x;
      }
      inv_rms = rsqrtf(detail::WarpSum(ss) / hd + p.norm_eps);
    }
    for (int j = lane; j < half; j += 32) {
      float x1 = __bfloat162float(src[j]), x2 = __bfloat162float(src[j + half]);
      if (nw != nullptr) {
        x1 = __bfloat162float(__float2bfloat16(x1 * inv_rms * __bfloat162float(nw[j])));
        x2 = __bfloat162float(__float2bfloat16(x2 * inv_rms * __bfloat162float(nw[j + half])));
      }
      float sn, cs;
      sincosf(pos * InvFreq(p.rope, j, hd), &sn, &cs);
      dst[j] = __float2bfloat16(x1 * cs - x2 * sn);
      dst[j + half] = __float2bfloat16(x2 * cs + x1 * sn);
    }
  }
}

}  // namespace

Status ValidateRopeKvWrite(const RopeKvWriteParams& p) {
  if (p.qkv == nullptr || p.positions == nullptr || p.slot_mapping == nullptr || p.q_out == nullptr ||
      p.kv_cache == nullptr)
    return InvalidArgumentError("RopeKvWrite: null pointer");
  if (p.num_tokens < 0 || p.num_q_heads <= 0 || p.num_kv_heads <= 0 || p.num_q_heads % p.num_kv_heads != 0 ||
      p.num_cache_blocks <= 0)
    return InvalidArgumentError("RopeKvWrite: bad head counts or cache size");
  if (p.block_size <= 0 || (p.block_size & (p.block_size - 1)) != 0)
    return InvalidArgumentError("RopeKvWrite: block_size must be a power of two");
  if (p.qkv_stride < static_cast<int64_t>(p.num_q_heads + 2 * p.num_kv_heads) * p.head_dim)
    return InvalidArgumentError("RopeKvWrite: qkv_stride smaller than the packed heads");
  const RopeConfig& r = p.rope;
  if (!(r.theta > 1.f) || !(r.factor > 0.f)) return InvalidArgumentError("RopeKvWrite: need theta > 1 and factor > 0");
  if (r.scaling == RopeScaling::kLlama3 &&
      !(r.high_freq_factor > r.low_freq_factor && r.low_freq_factor > 0.f && r.original_max_position > 0.f))
    return InvalidArgumentError("RopeKvWrite: bad llama3 rope scaling");
  return Status::Ok();
}

Status LaunchRopeKvWrite(const RopeKvWriteParams& p, cudaStream_t stream) {
  TANDEM_RETURN_IF_ERROR(ValidateRopeKvWrite(p));
  if (p.num_tokens == 0) return Status::Ok();
  // A warp per head where the block allows (at most 1024 threads): the heads of a token run
  // side by side instead of one after another in a few warps.
  const int threads = 32 * std::min(p.num_q_heads + 2 * p.num_kv_heads, 32);
  switch (p.head_dim) {
    case 64: return detail::LaunchPdl("RopeKvWriteKernel", RopeKvWriteKernel<64>, p.num_tokens, threads, 0, stream, p);
    case 128:
      return detail::LaunchPdl("RopeKvWriteKernel", RopeKvWriteKernel<128>, p.num_tokens, threads, 0, stream, p);
    case 256:
      return detail::LaunchPdl("RopeKvWriteKernel", RopeKvWriteKernel<256>, p.num_tokens, threads, 0, stream, p);
    default:
      if (p.head_dim <= 0 || p.head_dim % 2 != 0 || p.head_dim > 1024)
        return InvalidArgumentError("RopeKvWrite: head_dim must be even and <= 1024");
      return detail::LaunchPdl("RopeKvWriteGenericKernel", RopeKvWriteGenericKernel, p.num_tokens, threads, 0, stream,
                               p);
  }
}

}  // namespace tandem::kernels
