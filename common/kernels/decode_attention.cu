#include "common/kernels/decode_attention.h"

#include <algorithm>
#include <array>
#include <climits>
#include <cmath>

#include "common/cuda/cuda_status.h"
#include "common/kernels/decode_attention_impl.cuh"
#include "common/kernels/kernel_util.cuh"
#include "common/kernels/rope_util.cuh"

namespace tandem::kernels {
namespace {

using namespace decode_detail;  // NOLINT: this file is the implementation of that detail

constexpr int kDefaultStages = 3;  // cp.async pipeline depth when params.num_stages == 0
// Splits as short as one tile: a b=1 step's splits then have all their tiles in flight
// before the previous kernel ends, and the merge of up to 16 splits is one round of loads
// (H200, b=1 1K decode step, same run: 4.155 ms with splits of at least 1 tile, 4.183 with
// at least 2).
constexpr int kMinTilesPerSplit = 1;
constexpr int kMaxSplits = 256;
template <int kHeadDim, int kStages>
struct Smem {
  using D = Dims<kHeadDim>;
  static constexpr size_t kKvBytes = kStages * D::kStageBytes;
  static constexpr size_t kQOffset = kKvBytes;
  static constexpr size_t kStateOffset = kQOffset + D::kQBytes;
  static constexpr size_t kNewKvOffset = kStateOffset + D::kStateBytes;
  static constexpr size_t kBytes = kNewKvOffset + D::kNewKvBytes;
  static_assert(D::kMergeBytes <= kKvBytes, "merge buffer fits in the K/V space");
};

struct SplitRange {
  int tile_begin, tile_end, ctx;
};

__device__ __forceinline__ SplitRange RangeOf(const DecodeAttentionParams& p, int seq, int split) {
  const int ctx = p.context_lens[seq];
  const int num_tiles = (ctx + kTile - 1) / kTile;
  const int max_tiles = (p.max_context_len + kTile - 1) / kTile;
  const int tiles_per_split = (max_tiles + p.num_splits - 1) / p.num_splits;
  const int begin = split * tiles_per_split;
  return {begin, min(num_tiles, begin + tiles_per_split), ctx};
}

// After the previous kernel: the group's query heads into q_s (rows past the group zero) and,
// when this block's split holds the newest position, that token's K and V into new_kv
// ([K | V], head_dim each). With p.rope: both made from the QKV projection row (RoPE, the
// optional q/k norm, and the K/V store into the cache, as LaunchRopeKvWrite does); without:
// q from p.q and the newest K/V from the cache, where the previous kernel wrote them.
template <int kHeadDim>
__device__ __forceinline__ void LoadQAndNewest(const DecodeAttentionParams& p, int seq, int kvh, int group,
                                               bool has_newest, int newest,
                                               const rope_detail::LaneAngles<kHeadDim>& angles, __nv_bfloat16* q_s,
                                               __nv_bfloat16* new_kv) {
  using D = Dims<kHeadDim>;
  if (p.rope.qkv == nullptr) {
    LoadQ<kHeadDim>(p, seq, kvh, group, q_s);
    if (!has_newest) return;
    const int64_t page = p.block_tables[static_cast<int64_t>(seq) * p.max_blocks_per_seq + newest / p.block_size];
    for (int i = threadIdx.x; i < 2 * D::kChunks; i += kThreads) {
      const int kv = i / D::kChunks, c = i % D::kChunks;
      const __nv_bfloat16* src = detail::KvCacheRow(p.kv_cache, page, kv, kvh, newest & (p.block_size - 1),
                                                    p.num_kv_heads, p.block_size, kHeadDim);
      *reinterpret_cast<uint4*>(new_kv + kv * kHeadDim + c * 8) = *reinterpret_cast<const uint4*>(src + c * 8);
    }
    return;
  }
  constexpr int kPairs = rope_detail::LaneAngles<kHeadDim>::kPairs;
  const RopeKvWriteParams& r = p.rope;
  const __nv_bfloat16* row = r.qkv + seq * r.qkv_stride;
  const int warp = threadIdx.x >> 5;
  const int items = group + (has_newest ? 2 : 0);  // q heads, then the newest K and V
  // Item `it`: q head it, or (it - group) 0 / 1: the newest K / V.
  auto src = [&](int it) {
    return row + (it < group ? kvh * group + it : p.num_q_heads + (it - group) * p.num_kv_heads + kvh) * kHeadDim;
  };
  auto finish = [&](int it, float(&x1)[kPairs], float(&x2)[kPairs]) {
    if (it < group) {
      rope_detail::NormAndRotateHead<kHeadDim>(r.q_norm_weight, r.norm_eps, true, angles, x1, x2);
      rope_detail::StoreHead<kHeadDim>(q_s + it * D::kRow, x1, x2);
      return;
    }
    const int kv = it - group;
    rope_detail::NormAndRotateHead<kHeadDim>(kv == 0 ? r.k_norm_weight : nullptr, r.norm_eps, kv == 0, angles, x1, x2);
    rope_detail::StoreHead<kHeadDim>(new_kv + kv * kHeadDim, x1, x2);
    const int64_t slot = r.slot_mapping[seq];
    if (slot >= 0 && slot / r.block_size < r.num_cache_blocks) {
      rope_detail::StoreHead<kHeadDim>(
          detail::KvCacheRow(r.kv_cache, slot / r.block_size, kv, kvh, static_cast<int>(slot % r.block_size),
                             p.num_kv_heads, r.block_size, kHeadDim),
          x1, x2);
    }
  };
  // Two items per warp and round, both loaded before either is finished: a warp with a
  // second item (the block holding the newest K/V has group + 2 of them) pays one read of
  // the QKV row, not two in a row.
  for (int it = warp; it < items; it += 2 * kWarps) {
    const bool second = it + kWarps < items;
    float a1[kPairs], a2[kPairs], b1[kPairs], b2[kPairs];
    rope_detail::LoadHeadValues<kHeadDim>(src(it), a1, a2);
    if (second) rope_detail::LoadHeadValues<kHeadDim>(src(it + kWarps), b1, b2);
    finish(it, a1, a2);
    if (second) finish(it + kWarps, b1, b2);
  }
  for (int i = threadIdx.x; i < (kMaxGroup - group) * D::kChunks; i += kThreads) {
    const int rr = group + i / D::kChunks, c = i % D::kChunks;
    *reinterpret_cast<uint4*>(q_s + rr * D::kRow + c * 8) = make_uint4(0, 0, 0, 0);
  }
}

// Grid: (num_splits, num_kv_heads, num_seqs); kThreads threads. Each warp keeps its own
// online-softmax state over its 16 tokens of every tile; the warps merge at the end.
//
// Launched with PDL, it loads the split's first tiles before waiting for the previous
// kernel, all but the sequence's newest position: in a decode step that kernel (RoPE + KV
// write) stores only that token's K/V, and every older one was written by earlier steps
// (see DecodeAttentionParams). The newest row goes into its stage after the wait.
template <int kHeadDim, int kStages>
__global__ void __launch_bounds__(kThreads) DecodeAttentionKernel(DecodeAttentionParams p, float scale_log2) {
  using D = Dims<kHeadDim>;
  using L = Smem<kHeadDim, kStages>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  auto k_stage = [&](int s) { return reinterpret_cast<__nv_bfloat16*>(smem_raw + s * D::kStageBytes); };
  auto v_stage = [&](int s) { return k_stage(s) + kTile * D::Tile::kRow; };
  __nv_bfloat16* q_s = reinterpret_cast<__nv_bfloat16*>(smem_raw + L::kQOffset);
  float* m_s = reinterpret_cast<float*>(smem_raw + L::kStateOffset);
  float* l_s = m_s + kWarps * kMaxGroup;
  __nv_bfloat16* new_kv = reinterpret_cast<__nv_bfloat16*>(smem_raw + L::kNewKvOffset);

  const int split = blockIdx.x, kvh = blockIdx.y, seq = blockIdx.z;
  const int group = p.num_q_heads / p.num_kv_heads;
  const SplitRange range = RangeOf(p, seq, split);
  const int newest = range.ctx - 1;  // -1 for an empty sequence
  const int newest_tile = newest / kTile;
  const bool has_newest = newest >= 0 && newest_tile >= range.tile_begin && newest_tile < range.tile_end;
  auto issue = [&](int tile) {
    const int s = (tile - range.tile_begin) % kStages;
    IssueTile<kHeadDim>(p, seq, kvh, range.ctx, tile, newest, k_stage(s), v_stage(s));
  };
  rope_detail::LaneAngles<kHeadDim> angles{};
  if (p.rope.qkv != nullptr)  // positions are step metadata: safe to read before the wait
    angles = rope_detail::AnglesAt<kHeadDim>(p.rope.rope, static_cast<float>(p.rope.positions[seq]));
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (range.tile_begin + s < range.tile_end) issue(range.tile_begin + s);
    CpAsyncCommit();
  }
  detail::WaitForPreviousKernel();
  if (!p.late_next) detail::AllowNextKernel();
  LoadQAndNewest<kHeadDim>(p, seq, kvh, group, has_newest, newest, angles, q_s, new_kv);
  __syncthreads();
  WarpState<kHeadDim> st;
  InitState<kHeadDim>(st, q_s);
  for (int tile = range.tile_begin; tile < range.tile_end; ++tile) {
    CpAsyncWait<kStages - 2>();
    __syncthreads();  // tile's data visible; the stage refilled below is no longer read
    if (tile + kStages - 1 < range.tile_end) issue(tile + kStages - 1);
    CpAsyncCommit();
    const int s = (tile - range.tile_begin) % kStages;
    if (tile == newest_tile) {  // the one row IssueTile skipped
      const int r = newest - tile * kTile;
      for (int i = threadIdx.x; i < 2 * D::kChunks; i += kThreads) {
        const int kv = i / D::kChunks, c = i % D::kChunks;
        *reinterpret_cast<uint4*>((kv == 0 ? k_stage(s) : v_stage(s)) + D::Tile::Offset(r, c * 8)) =
            *reinterpret_cast<const uint4*>(new_kv + kv * kHeadDim + c * 8);
      }
      __syncthreads();
    }
    ComputeTile<kHeadDim>(st, k_stage(s), v_stage(s), min(kTile, range.ctx - tile * kTile), scale_log2);
  }
  CpAsyncWait<0>();
  __syncthreads();  // all warps done with the tiles: reuse the K/V space for the merge
  MergeAndStore<kHeadDim>(p, st, seq, kvh, split, group, reinterpret_cast<float*>(smem_raw), m_s, l_s);
}

// One output element of the merge of S <= kMax splits: every split's log-sum-exp and this
// thread's partial output loaded in one round, then summed in split order.
template <int kMax>
__device__ __forceinline__ float MergeDirect(const float* o_part, const float* lse, int S, int hd) {
  float l[kMax], o[kMax];
#pragma unroll
  for (int s = 0; s < kMax; ++s) {
    l[s] = s < S ? lse[s] : -INFINITY;
    o[s] = s < S ? o_part[static_cast<int64_t>(s) * hd] : 0.f;
  }
  float m = -INFINITY;
#pragma unroll
  for (int s = 0; s < kMax; ++s) m = fmaxf(m, l[s]);
  float num = 0.f, den = 0.f;
#pragma unroll
  for (int s = 0; s < kMax; ++s) {
    if (s < S) {
      const float w = m == -INFINITY ? 0.f : exp2f(l[s] - m);
      den += w;
      num += w * o[s];
    }
  }
  return den > 0.f ? num / den : 0.f;
}

// Grid: num_seqs * num_q_heads blocks of head_dim threads. Up to 64 splits, each thread
// loads every split's log-sum-exp and its own partial output in one round of loads (no
// shared memory, no barrier: this kernel sits on a small batch's critical path). More
// splits: the log-sum-exps go through shared memory in one round of loads, and the
// partial outputs are read kBatch at a time (a loop of dependent loads cost a
// global-memory round trip per split). All sum in split order: the same bits.
__global__ void DecodeAttentionMergeKernel(DecodeAttentionParams p) {
  constexpr int kBatch = 8;
  __shared__ float weight[kMaxSplits];
  detail::WaitForPreviousKernel();
  detail::AllowNextKernel();
  const int64_t qh = blockIdx.x;
  const int d = threadIdx.x, hd = p.head_dim, S = p.num_splits;
  const float* o_part = p.workspace + qh * S * hd + d;
  const float* lse = p.workspace + static_cast<int64_t>(p.num_seqs) * p.num_q_heads * S * hd + qh * S;
  if (S <= 64) {
    const float out = S <= 16 ? MergeDirect<16>(o_part, lse, S, hd) : MergeDirect<64>(o_part, lse, S, hd);
    p.out[qh * hd + d] = __float2bfloat16(out);
    return;
  }
  for (int s = d; s < S; s += blockDim.x) weight[s] = lse[s];
  __syncthreads();
  float m = -INFINITY;
  for (int s = 0; s < S; ++s) m = fmaxf(m, weight[s]);
  __syncthreads();  // all have read the log-sum-exps
  for (int s = d; s < S; s += blockDim.x) weight[s] = m == -INFINITY ? 0.f : exp2f(weight[s] - m);
  __syncthreads();
  float num = 0.f, den = 0.f;
  for (int s0 = 0; s0 < S; s0 += kBatch) {
    float o[kBatch];
#pragma unroll
    for (int j = 0; j < kBatch; ++j) o[j] = s0 + j < S ? o_part[static_cast<int64_t>(s0 + j) * hd] : 0.f;
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      if (s0 + j < S) {
        den += weight[s0 + j];
        num += weight[s0 + j] * o[j];
      }
    }
  }
  p.out[qh * hd + d] = __float2bfloat16(den > 0.f ? num / den : 0.f);
}

Status ValidateShapes(const DecodeAttentionParams& p) {
  if (p.num_seqs < 0 || p.num_q_heads <= 0 || p.num_kv_heads <= 0 || p.num_q_heads % p.num_kv_heads != 0 ||
      p.num_q_heads / p.num_kv_heads > kMaxGroup)
    return InvalidArgumentError("DecodeAttention: need Hq % Hkv == 0 and Hq / Hkv <= 16");
  if (p.head_dim != 64 && p.head_dim != 128) return InvalidArgumentError("DecodeAttention: head_dim must be 64 or 128");
  if (p.block_size < 8 || p.block_size > 64 || (p.block_size & (p.block_size - 1)) != 0)
    return InvalidArgumentError("DecodeAttention: block_size must be a power of two in [8, 64]");
  if (2ll * p.num_kv_heads * p.block_size * p.head_dim * 2 > INT32_MAX)  // IssueTile's 32-bit block offsets
    return InvalidArgumentError("DecodeAttention: a cache block (K and V of every KV head) must be under 2 GiB");
  if (p.max_context_len < 0 || static_cast<int64_t>(p.max_blocks_per_seq) * p.block_size < p.max_context_len)
    return InvalidArgumentError("DecodeAttention: max_blocks_per_seq * block_size < max_context_len");
  if (!(p.softmax_scale > 0.f)) return InvalidArgumentError("DecodeAttention: softmax_scale <= 0");
  return Status::Ok();
}

Status LaunchMerge(const DecodeAttentionParams& p, cudaStream_t stream) {
  if (p.num_splits == 1) return Status::Ok();
  return detail::LaunchPdl("DecodeAttentionMergeKernel", DecodeAttentionMergeKernel, p.num_seqs * p.num_q_heads,
                           p.head_dim, 0, stream, p);
}

template <int kHeadDim, int kStages>
Status LaunchTyped(const DecodeAttentionParams& p, cudaStream_t stream) {
  const size_t smem = Smem<kHeadDim, kStages>::kBytes;
  auto kernel = DecodeAttentionKernel<kHeadDim, kStages>;
  TANDEM_RETURN_IF_CUDA_ERROR(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  dim3 grid(p.num_splits, p.num_kv_heads, p.num_seqs);
  TANDEM_RETURN_IF_ERROR(
      detail::LaunchPdl("DecodeAttentionKernel", kernel, grid, kThreads, smem, stream, p, p.softmax_scale * kLog2e));
  return LaunchMerge(p, stream);
}

// Thread blocks of the kernel for `p`'s head dim and pipeline depth that
// fit on one SM at once (shared memory bound), from the CUDA occupancy calculator; 2 when
// it cannot tell (no GPU).
int ResidentBlocksPerSm(const DecodeAttentionParams& p) {
  // [head_dim 64 | 128][stages 2 | 3 | 4], queried once (the smem attribute must be set
  // first for the large variants, as LaunchTyped does).
  static const std::array<std::array<int, 3>, 2> table = [] {
    auto query = [](auto kernel, size_t smem, int fallback) {
      if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)) !=
          cudaSuccess) {
        cudaGetLastError();
        return fallback;
      }
      int per_sm = 0;
      if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, smem) != cudaSuccess) {
        cudaGetLastError();
        return fallback;
      }
      return std::max(per_sm, 1);
    };
    return std::array<std::array<int, 3>, 2>{{{query(DecodeAttentionKernel<64, 2>, Smem<64, 2>::kBytes, 2),
                                               query(DecodeAttentionKernel<64, 3>, Smem<64, 3>::kBytes, 2),
                                               query(DecodeAttentionKernel<64, 4>, Smem<64, 4>::kBytes, 2)},
                                              {query(DecodeAttentionKernel<128, 2>, Smem<128, 2>::kBytes, 2),
                                               query(DecodeAttentionKernel<128, 3>, Smem<128, 3>::kBytes, 2),
                                               query(DecodeAttentionKernel<128, 4>, Smem<128, 4>::kBytes, 2)}}};
  }();
  const int stages = p.num_stages == 0 ? kDefaultStages : p.num_stages;
  return table[p.head_dim == 64 ? 0 : 1][std::clamp(stages, 2, 4) - 2];
}

}  // namespace

StatusOr<DecodeAttentionPlan> PlanDecodeAttention(const DecodeAttentionParams& p, int num_sms) {
  TANDEM_RETURN_IF_ERROR(ValidateShapes(p));
  if (num_sms <= 0) return InvalidArgumentError("PlanDecodeAttention: num_sms <= 0");
  DecodeAttentionPlan plan;
  const int64_t base_blocks = static_cast<int64_t>(p.num_seqs) * p.num_kv_heads;
  const int max_tiles = (p.max_context_len + kTile - 1) / kTile;
  const int max_splits = std::min(kMaxSplits, std::max(1, (max_tiles + kMinTilesPerSplit - 1) / kMinTilesPerSplit));
  // Split count with the fullest waves of thread blocks: B * S blocks over `slots` resident
  // ones run in ceil(B * S / slots) waves, and a last wave that is mostly empty costs
  // almost a whole wave of time (8 x 32K at 9 splits: 576 blocks in 3 waves of 264, 0.73
  // full). Up to 4 waves' worth; on a tie the fewer splits (less partial-output traffic).
  const int64_t slots = static_cast<int64_t>(num_sms) * ResidentBlocksPerSm(p);
  int best = 1;
  double best_fill = 0.0;
  for (int s = 1; s <= max_splits && (s == 1 || base_blocks * s <= 4 * slots); ++s) {
    const int64_t blocks = base_blocks * s;
    const int64_t waves = (blocks + slots - 1) / slots;
    const double fill = static_cast<double>(blocks) / static_cast<double>(waves * slots);
    if (fill > best_fill + 0.01) {
      best = s;
      best_fill = fill;
    }
  }
  plan.num_splits = best;
  DecodeAttentionParams planned = p;
  planned.num_splits = best;
  plan.workspace_bytes = DecodeAttentionWorkspaceBytes(planned);
  return plan;
}

size_t DecodeAttentionWorkspaceBytes(const DecodeAttentionParams& p) {
  if (p.num_splits <= 1) return 0;
  return static_cast<size_t>(p.num_seqs) * p.num_q_heads * p.num_splits * (p.head_dim + 1) * 4;
}

Status LaunchDecodeAttention(const DecodeAttentionParams& p, cudaStream_t stream) {
  TANDEM_RETURN_IF_ERROR(ValidateShapes(p));
  const bool fused_rope = p.rope.qkv != nullptr;
  if ((p.q == nullptr && !fused_rope) || p.kv_cache == nullptr || p.block_tables == nullptr ||
      p.context_lens == nullptr || p.out == nullptr)
    return InvalidArgumentError("DecodeAttention: null pointer");
  if (fused_rope) {
    const RopeKvWriteParams& r = p.rope;
    TANDEM_RETURN_IF_ERROR(ValidateRopeKvWrite(r));
    if (r.num_tokens != p.num_seqs || r.num_q_heads != p.num_q_heads || r.num_kv_heads != p.num_kv_heads ||
        r.head_dim != p.head_dim || r.block_size != p.block_size || r.kv_cache != p.kv_cache)
      return InvalidArgumentError("DecodeAttention: fused RoPE params disagree with the attention's");
  }
  if (p.num_stages != 0 && (p.num_stages < 2 || p.num_stages > 4))
    return InvalidArgumentError("DecodeAttention: num_stages must be 0 (auto) or 2..4");
  if (p.num_splits < 1 || p.num_splits > kMaxSplits)
    return InvalidArgumentError("DecodeAttention: num_splits must be in [1, 256]");
  if (p.num_splits > 1 && p.workspace == nullptr)
    return InvalidArgumentError("DecodeAttention: num_splits > 1 needs the plan's workspace");
  if (p.num_seqs == 0) return Status::Ok();
  const int stages = p.num_stages == 0 ? kDefaultStages : p.num_stages;
  if (p.head_dim == 64) {
    if (stages == 2) return LaunchTyped<64, 2>(p, stream);
    if (stages == 3) return LaunchTyped<64, 3>(p, stream);
    return LaunchTyped<64, 4>(p, stream);
  }
  if (stages == 2) return LaunchTyped<128, 2>(p, stream);
  if (stages == 3) return LaunchTyped<128, 3>(p, stream);
  return LaunchTyped<128, 4>(p, stream);
}

}  // namespace tandem::kernels
