#include "common/kernels/decode_attention.h"

#include <algorithm>
#include <cmath>

#include "common/cuda/cuda_status.h"
#include "common/kernels/kernel_util.cuh"

namespace tandem::kernels {
namespace {

constexpr int kThreads = 128;
constexpr int kTile = 64;             // tokens per shared-memory tile
constexpr int kMinTilesPerSplit = 4;  // keeps the partial-output traffic small
constexpr float kLog2e = 1.4426950408889634f;

__device__ __forceinline__ void CpAsync16(void* smem, const void* gmem) {
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
}
__device__ __forceinline__ void CpAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void CpAsyncWaitAll() { asm volatile("cp.async.wait_group 0;\n" ::); }

template <int kHeadDim>
struct Smem {
  static constexpr int kRow = kHeadDim + 8;  // padded row (bf16): conflict-free 16-byte reads
  static constexpr size_t kKvBytes = 2ull * 2 * kTile * kRow * 2;  // [K,V][2 stages][tile][row]
};

template <int kHeadDim, int kMaxGroup>
size_t SmemBytes() {
  return Smem<kHeadDim>::kKvBytes + kMaxGroup * kHeadDim * 4 + 2 * kMaxGroup * kTile * 4 +
         kTile * kMaxGroup * 4 + 3 * kMaxGroup * 4;
}

// Grid: (num_splits, num_kv_heads, num_seqs); kThreads threads.
template <int kHeadDim, int kMaxGroup>
__global__ void __launch_bounds__(kThreads)
    DecodeAttentionKernel(DecodeAttentionParams p, float q_scale) {
  constexpr int kRow = Smem<kHeadDim>::kRow;
  constexpr int kChunks = kHeadDim / 8;       // 16-byte chunks per row
  constexpr int kHalf = kHeadDim / 2;         // dims per score thread
  constexpr int kSub = kThreads / kChunks;    // token subsets in the PV phase
  extern __shared__ __align__(16) unsigned char smem_raw[];
  __nv_bfloat16* kbuf = reinterpret_cast<__nv_bfloat16*>(smem_raw);          // [2][kTile][kRow]
  __nv_bfloat16* vbuf = kbuf + 2 * kTile * kRow;                             // [2][kTile][kRow]
  float* q_s = reinterpret_cast<float*>(smem_raw + Smem<kHeadDim>::kKvBytes); // [G][hd]
  float* sp = q_s + kMaxGroup * kHeadDim;                                    // [2][G][kTile]
  float* p_s = sp + 2 * kMaxGroup * kTile;                                   // [kTile][G]
  float* m_s = p_s + kTile * kMaxGroup;
  float* l_s = m_s + kMaxGroup;
  float* alpha_s = l_s + kMaxGroup;

  const int tid = threadIdx.x;
  const int split = blockIdx.x, kvh = blockIdx.y, seq = blockIdx.z;
  const int group = p.num_q_heads / p.num_kv_heads;
  const int ctx = p.context_lens[seq];
  const int num_tiles = (ctx + kTile - 1) / kTile;
  const int max_tiles = (p.max_context_len + kTile - 1) / kTile;
  const int tiles_per_split = (max_tiles + p.num_splits - 1) / p.num_splits;
  const int tile_begin = split * tiles_per_split;
  const int tile_end = min(num_tiles, tile_begin + tiles_per_split);

  for (int i = tid; i < kMaxGroup * kHeadDim; i += kThreads) {
    const int g = i / kHeadDim, d = i % kHeadDim;
    q_s[i] = g < group ? __bfloat162float(p.q[(static_cast<int64_t>(seq) * p.num_q_heads +
                                                kvh * group + g) * kHeadDim + d]) * q_scale
                       : 0.f;
  }
  if (tid < kMaxGroup) {
    m_s[tid] = -INFINITY;
    l_s[tid] = 0.f;
    alpha_s[tid] = 1.f;
  }

  const int32_t* table = p.block_tables + static_cast<int64_t>(seq) * p.max_blocks_per_seq;
  const int64_t block_elems = 2ll * p.num_kv_heads * p.block_size * kHeadDim;
  const int64_t head_off = static_cast<int64_t>(kvh) * p.block_size * kHeadDim;
  const int64_t v_off = static_cast<int64_t>(p.num_kv_heads) * p.block_size * kHeadDim;
  const int bs_shift = __ffs(p.block_size) - 1;
  auto issue_tile = [&](int tile, int stage) {
    const int start = tile * kTile;
    const int n_valid = min(kTile, ctx - start);
    const int c = tid % kChunks;
    for (int tt = tid / kChunks; tt < n_valid; tt += kThreads / kChunks) {
      const int tok = start + tt;
      const int64_t page = table[tok >> bs_shift];
      const __nv_bfloat16* src = p.kv_cache + page * block_elems + head_off +
                                 (tok & (p.block_size - 1)) * kHeadDim + c * 8;
      const int dst = (stage * kTile + tt) * kRow + c * 8;
      CpAsync16(kbuf + dst, src);
      CpAsync16(vbuf + dst, src + v_off);
    }
    CpAsyncCommit();
  };

  float acc[kMaxGroup][8];
#pragma unroll
  for (int g = 0; g < kMaxGroup; ++g)
#pragma unroll
    for (int i = 0; i < 8; ++i) acc[g][i] = 0.f;

  const int pv_chunk = tid % kChunks, pv_sub = tid / kChunks;
  if (tile_begin < tile_end) issue_tile(tile_begin, 0);
  for (int tile = tile_begin; tile < tile_end; ++tile) {
    const int stage = (tile - tile_begin) & 1;
    const int n_valid = min(kTile, ctx - tile * kTile);
    CpAsyncWaitAll();
    __syncthreads();
    if (tile + 1 < tile_end) issue_tile(tile + 1, stage ^ 1);

    {  // Scores: thread (token t, half part) -> partial dot products for all heads.
      const int t = tid % kTile, part = tid / kTile;
      const __nv_bfloat16* krow = kbuf + (stage * kTile + t) * kRow + part * kHalf;
      const float* qp = q_s + part * kHalf;
      float s[kMaxGroup];
#pragma unroll
      for (int g = 0; g < kMaxGroup; ++g) s[g] = 0.f;
#pragma unroll
      for (int c = 0; c < kHalf / 8; ++c) {
        float k[8];
        detail::Bf16x8ToFloat(*reinterpret_cast<const uint4*>(krow + c * 8), k);
#pragma unroll
        for (int g = 0; g < kMaxGroup; ++g) {
          const float4 a = *reinterpret_cast<const float4*>(qp + g * kHeadDim + c * 8);
          const float4 b = *reinterpret_cast<const float4*>(qp + g * kHeadDim + c * 8 + 4);
          s[g] += a.x * k[0] + a.y * k[1] + a.z * k[2] + a.w * k[3] + b.x * k[4] + b.y * k[5] +
                  b.z * k[6] + b.w * k[7];
        }
      }
#pragma unroll
      for (int g = 0; g < kMaxGroup; ++g) sp[(part * kMaxGroup + g) * kTile + t] = s[g];
    }
    __syncthreads();

    {  // Online softmax: warp w handles heads w, w + 4, ...
      const int lane = tid & 31;
      for (int g = tid >> 5; g < kMaxGroup; g += kThreads / 32) {
        if (g >= group) {
          p_s[lane * kMaxGroup + g] = 0.f;
          p_s[(lane + 32) * kMaxGroup + g] = 0.f;
          if (lane == 0) alpha_s[g] = 1.f;
          continue;
        }
        const float* s0 = sp + g * kTile;
        const float* s1 = sp + (kMaxGroup + g) * kTile;
        const float x0 = lane < n_valid ? s0[lane] + s1[lane] : -INFINITY;
        const float x1 = lane + 32 < n_valid ? s0[lane + 32] + s1[lane + 32] : -INFINITY;
        const float m_old = m_s[g];
        const float m_new = fmaxf(m_old, detail::WarpMax(fmaxf(x0, x1)));  // finite: n_valid >= 1
        const float e0 = exp2f(x0 - m_new), e1 = exp2f(x1 - m_new);
        p_s[lane * kMaxGroup + g] = e0;
        p_s[(lane + 32) * kMaxGroup + g] = e1;
        const float sum = detail::WarpSum(e0 + e1);
        if (lane == 0) {
          const float alpha = exp2f(m_old - m_new);
          alpha_s[g] = alpha;
          l_s[g] = l_s[g] * alpha + sum;
          m_s[g] = m_new;
        }
      }
    }
    __syncthreads();

    {  // P·V: thread (chunk of 8 dims, token subset) accumulates all heads.
#pragma unroll
      for (int g = 0; g < kMaxGroup; ++g) {
        const float a = alpha_s[g];
#pragma unroll
        for (int i = 0; i < 8; ++i) acc[g][i] *= a;
      }
      const __nv_bfloat16* vbase = vbuf + stage * kTile * kRow + pv_chunk * 8;
      for (int t = pv_sub; t < n_valid; t += kSub) {
        float v[8];
        detail::Bf16x8ToFloat(*reinterpret_cast<const uint4*>(vbase + t * kRow), v);
        float pr[kMaxGroup];
#pragma unroll
        for (int g = 0; g < kMaxGroup; ++g) pr[g] = p_s[t * kMaxGroup + g];
#pragma unroll
        for (int g = 0; g < kMaxGroup; ++g)
#pragma unroll
          for (int i = 0; i < 8; ++i) acc[g][i] += pr[g] * v[i];
      }
    }
  }
  __syncthreads();

  // Merge the token subsets through shared memory (the K/V tiles are free now).
  float* red = reinterpret_cast<float*>(smem_raw);  // [kSub][G][hd]
#pragma unroll
  for (int g = 0; g < kMaxGroup; ++g) {
    float4* dst = reinterpret_cast<float4*>(red + (pv_sub * kMaxGroup + g) * kHeadDim + pv_chunk * 8);
    dst[0] = make_float4(acc[g][0], acc[g][1], acc[g][2], acc[g][3]);
    dst[1] = make_float4(acc[g][4], acc[g][5], acc[g][6], acc[g][7]);
  }
  __syncthreads();
  for (int i = tid; i < group * kHeadDim; i += kThreads) {
    const int g = i / kHeadDim, d = i % kHeadDim;
    float o = 0.f;
#pragma unroll
    for (int j = 0; j < kSub; ++j) o += red[(j * kMaxGroup + g) * kHeadDim + d];
    const float l = l_s[g];
    o = l > 0.f ? o / l : 0.f;
    const int64_t qh = static_cast<int64_t>(seq) * p.num_q_heads + kvh * group + g;
    if (p.num_splits == 1) {
      p.out[qh * kHeadDim + d] = __float2bfloat16(o);
    } else {
      float* o_part = p.workspace;
      float* lse = p.workspace + static_cast<int64_t>(p.num_seqs) * p.num_q_heads *
                                     p.num_splits * kHeadDim;
      o_part[(qh * p.num_splits + split) * kHeadDim + d] = o;
      if (d == 0) lse[qh * p.num_splits + split] = l > 0.f ? m_s[g] + log2f(l) : -INFINITY;
    }
  }
}

// Grid: num_seqs * num_q_heads blocks of head_dim threads.
__global__ void DecodeAttentionMergeKernel(DecodeAttentionParams p) {
  const int64_t qh = blockIdx.x;
  const int d = threadIdx.x, hd = p.head_dim, S = p.num_splits;
  const float* o_part = p.workspace;
  const float* lse = p.workspace + static_cast<int64_t>(p.num_seqs) * p.num_q_heads * S * hd;
  float m = -INFINITY;
  for (int s = 0; s < S; ++s) m = fmaxf(m, lse[qh * S + s]);
  float num = 0.f, den = 0.f;
  if (m != -INFINITY) {
    for (int s = 0; s < S; ++s) {
      const float w = exp2f(lse[qh * S + s] - m);
      den += w;
      num += w * o_part[(qh * S + s) * hd + d];
    }
  }
  p.out[qh * hd + d] = __float2bfloat16(den > 0.f ? num / den : 0.f);
}

Status ValidateShapes(const DecodeAttentionParams& p) {
  if (p.num_seqs < 0 || p.num_q_heads <= 0 || p.num_kv_heads <= 0 ||
      p.num_q_heads % p.num_kv_heads != 0 || p.num_q_heads / p.num_kv_heads > 8)
    return InvalidArgumentError("DecodeAttention: need Hq % Hkv == 0 and Hq / Hkv <= 8");
  if (p.head_dim != 64 && p.head_dim != 128)
    return InvalidArgumentError("DecodeAttention: head_dim must be 64 or 128");
  if (p.block_size < 8 || p.block_size > 64 || (p.block_size & (p.block_size - 1)) != 0)
    return InvalidArgumentError("DecodeAttention: block_size must be a power of two in [8, 64]");
  if (p.max_context_len < 0 ||
      static_cast<int64_t>(p.max_blocks_per_seq) * p.block_size < p.max_context_len)
    return InvalidArgumentError("DecodeAttention: max_blocks_per_seq * block_size < max_context_len");
  if (!(p.softmax_scale > 0.f)) return InvalidArgumentError("DecodeAttention: softmax_scale <= 0");
  return Status::Ok();
}

size_t WorkspaceBytes(const DecodeAttentionParams& p, int splits) {
  if (splits <= 1) return 0;
  return static_cast<size_t>(p.num_seqs) * p.num_q_heads * splits * (p.head_dim + 1) * 4;
}

template <int kHeadDim, int kMaxGroup>
Status LaunchTyped(const DecodeAttentionParams& p, cudaStream_t stream) {
  const size_t smem = SmemBytes<kHeadDim, kMaxGroup>();
  auto kernel = DecodeAttentionKernel<kHeadDim, kMaxGroup>;
  TANDEM_RETURN_IF_CUDA_ERROR(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  dim3 grid(p.num_splits, p.num_kv_heads, p.num_seqs);
  kernel<<<grid, kThreads, smem, stream>>>(p, p.softmax_scale * kLog2e);
  TANDEM_RETURN_IF_ERROR(cuda::LastLaunchStatus("DecodeAttentionKernel"));
  if (p.num_splits > 1) {
    DecodeAttentionMergeKernel<<<p.num_seqs * p.num_q_heads, p.head_dim, 0, stream>>>(p);
    TANDEM_RETURN_IF_ERROR(cuda::LastLaunchStatus("DecodeAttentionMergeKernel"));
  }
  return Status::Ok();
}

template <int kHeadDim>
Status DispatchGroup(const DecodeAttentionParams& p, cudaStream_t stream) {
  const int group = p.num_q_heads / p.num_kv_heads;
  if (group == 1) return LaunchTyped<kHeadDim, 1>(p, stream);
  if (group == 2) return LaunchTyped<kHeadDim, 2>(p, stream);
  if (group <= 4) return LaunchTyped<kHeadDim, 4>(p, stream);
  return LaunchTyped<kHeadDim, 8>(p, stream);
}

}  // namespace

StatusOr<DecodeAttentionPlan> PlanDecodeAttention(const DecodeAttentionParams& p, int num_sms) {
  TANDEM_RETURN_IF_ERROR(ValidateShapes(p));
  if (num_sms <= 0) return InvalidArgumentError("PlanDecodeAttention: num_sms <= 0");
  DecodeAttentionPlan plan;
  const int64_t base_blocks = static_cast<int64_t>(p.num_seqs) * p.num_kv_heads;
  const int max_tiles = (p.max_context_len + kTile - 1) / kTile;
  const int64_t target_blocks = 4ll * num_sms;  // ~2 waves at 2 resident blocks per SM
  int64_t splits = base_blocks > 0 ? (target_blocks + base_blocks - 1) / base_blocks : 1;
  const int64_t max_splits = std::max(1, (max_tiles + kMinTilesPerSplit - 1) / kMinTilesPerSplit);
  splits = std::min<int64_t>(std::min<int64_t>(splits, max_splits), 256);
  plan.num_splits = static_cast<int>(std::max<int64_t>(splits, 1));
  plan.workspace_bytes = WorkspaceBytes(p, plan.num_splits);
  return plan;
}

Status LaunchDecodeAttention(const DecodeAttentionParams& p, cudaStream_t stream) {
  TANDEM_RETURN_IF_ERROR(ValidateShapes(p));
  if (p.q == nullptr || p.kv_cache == nullptr || p.block_tables == nullptr ||
      p.context_lens == nullptr || p.out == nullptr)
    return InvalidArgumentError("DecodeAttention: null pointer");
  if (p.num_splits < 1 || p.num_splits > 256)
    return InvalidArgumentError("DecodeAttention: num_splits must be in [1, 256]");
  if (p.num_splits > 1 && p.workspace == nullptr)
    return InvalidArgumentError("DecodeAttention: num_splits > 1 needs the plan's workspace");
  if (p.num_seqs == 0) return Status::Ok();
  if (p.head_dim == 64) return DispatchGroup<64>(p, stream);
  return DispatchGroup<128>(p, stream);
}

}  // namespace tandem::kernels
