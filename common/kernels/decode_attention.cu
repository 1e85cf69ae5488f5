#include "common/kernels/decode_attention.h"

#include <algorithm>
#include <cmath>

#include "common/cuda/cuda_status.h"
#include "common/kernels/kernel_util.cuh"

namespace tandem::kernels {
namespace {

constexpr int kThreads = 128;        // 4 warps; warp w takes tokens [16w, 16w + 16) of a tile
constexpr int kWarps = kThreads / 32;
constexpr int kTile = 64;             // tokens per shared-memory tile
constexpr int kDefaultStages = 3;     // cp.async pipeline depth when params.num_stages == 0
constexpr int kMinTilesPerSplit = 4;  // keeps the partial-output traffic small
constexpr int kMaxGroup = 16;         // query heads per KV head: the rows of one mma tile
constexpr float kLog2e = 1.4426950408889634f;

__device__ __forceinline__ void CpAsync16(void* smem, const void* gmem) {
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
}
__device__ __forceinline__ void CpAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int kPending>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

__device__ __forceinline__ void Mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Four 8x8 bf16 matrices, transposed: B fragments of V for two n-tiles of the P·V mma.
__device__ __forceinline__ void LdMatrixX4Trans(uint32_t (&r)[4], const void* smem_row) {
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(smem_row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
}

__device__ __forceinline__ uint32_t PackBf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

__device__ __forceinline__ uint32_t Ld32(const __nv_bfloat16* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}

template <int kHeadDim, int kStages>
struct Smem {
  static constexpr int kRow = kHeadDim + 8;  // padded row (bf16): conflict-free fragment loads
  static constexpr size_t kKvBytes = size_t{2} * kStages * kTile * kRow * 2;  // K and V stages
  static constexpr size_t kQBytes = size_t{kMaxGroup} * kRow * 2;
  static constexpr size_t kStateBytes = size_t{2} * kWarps * kMaxGroup * 4;  // m, l per warp
  static constexpr size_t kBytes = kKvBytes + kQBytes + kStateBytes;
  static_assert(size_t{kWarps} * kMaxGroup * kHeadDim * 4 <= kKvBytes, "merge buffer fits");
};

// Grid: (num_splits, num_kv_heads, num_seqs); kThreads threads. The query heads of the KV
// group are the rows of a 16-row mma tile (rows >= group are zero). Each warp keeps its own
// online-softmax state over its 16 tokens of every tile; the warps merge at the end.
template <int kHeadDim, int kStages>
__global__ void __launch_bounds__(kThreads)
    DecodeAttentionKernel(DecodeAttentionParams p, float scale_log2) {
  using S = Smem<kHeadDim, kStages>;
  constexpr int kRow = S::kRow;
  constexpr int kChunks = kHeadDim / 8;  // 16-byte chunks per row
  constexpr int kDimTiles = kHeadDim / 8;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  __nv_bfloat16* kbuf = reinterpret_cast<__nv_bfloat16*>(smem_raw);  // [stages][kTile][kRow]
  __nv_bfloat16* vbuf = kbuf + kStages * kTile * kRow;               // [stages][kTile][kRow]
  __nv_bfloat16* q_s = vbuf + kStages * kTile * kRow;                // [16][kRow]
  float* m_s = reinterpret_cast<float*>(smem_raw + S::kKvBytes + S::kQBytes);  // [warps][16]
  float* l_s = m_s + kWarps * kMaxGroup;                                       // [warps][16]

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, t4 = lane & 3;
  const int split = blockIdx.x, kvh = blockIdx.y, seq = blockIdx.z;
  const int group = p.num_q_heads / p.num_kv_heads;
  const int ctx = p.context_lens[seq];
  const int num_tiles = (ctx + kTile - 1) / kTile;
  const int max_tiles = (p.max_context_len + kTile - 1) / kTile;
  const int tiles_per_split = (max_tiles + p.num_splits - 1) / p.num_splits;
  const int tile_begin = split * tiles_per_split;
  const int tile_end = min(num_tiles, tile_begin + tiles_per_split);

  const int32_t* table = p.block_tables + static_cast<int64_t>(seq) * p.max_blocks_per_seq;
  const int64_t block_elems = 2ll * p.num_kv_heads * p.block_size * kHeadDim;
  const int64_t head_off = static_cast<int64_t>(kvh) * p.block_size * kHeadDim;
  const int64_t v_off = static_cast<int64_t>(p.num_kv_heads) * p.block_size * kHeadDim;
  const int bs_shift = __ffs(p.block_size) - 1;
  // Thread -> (chunk c, token rows r0 + kRowsPerPass * k): all of a tile's block-table
  // reads are independent, so the unrolled loop issues them together (one latency).
  constexpr int kRowsPerPass = kThreads / kChunks;
  constexpr int kPasses = kTile / kRowsPerPass;
  auto issue_tile = [&](int tile) {
    const int stage = (tile - tile_begin) % kStages;
    const int start = tile * kTile;
    const int n_valid = min(kTile, ctx - start);
    const int c = tid % kChunks, r0 = tid / kChunks;
    int64_t page[kPasses];
#pragma unroll
    for (int k = 0; k < kPasses; ++k) {
      const int tt = r0 + k * kRowsPerPass;
      page[k] = tt < n_valid ? __ldg(table + ((start + tt) >> bs_shift)) : 0;
    }
#pragma unroll
    for (int k = 0; k < kPasses; ++k) {
      const int tt = r0 + k * kRowsPerPass;
      const int dst = (stage * kTile + tt) * kRow + c * 8;
      if (tt < n_valid) {
        const __nv_bfloat16* src = p.kv_cache + page[k] * block_elems + head_off +
                                   ((start + tt) & (p.block_size - 1)) * kHeadDim + c * 8;
        CpAsync16(kbuf + dst, src);
        CpAsync16(vbuf + dst, src + v_off);
      } else {
        // Rows past the context get zero V: their p is 0, but 0 * (stale NaN bits) is NaN.
        // (Stale K rows are harmless: their scores are replaced by -inf, not multiplied.)
        *reinterpret_cast<uint4*>(vbuf + dst) = make_uint4(0, 0, 0, 0);
      }
    }
  };

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (tile_begin + s < tile_end) issue_tile(tile_begin + s);
    CpAsyncCommit();
  }
  for (int i = tid; i < kMaxGroup * kChunks; i += kThreads) {
    const int r = i / kChunks, c = i % kChunks;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (r < group)
      v = *reinterpret_cast<const uint4*>(
          p.q + (static_cast<int64_t>(seq) * p.num_q_heads + kvh * group + r) * kHeadDim + c * 8);
    *reinterpret_cast<uint4*>(q_s + r * kRow + c * 8) = v;
  }

  __syncthreads();  // q_s

  uint32_t qf[kHeadDim / 16][4];
#pragma unroll
  for (int kk = 0; kk < kHeadDim / 16; ++kk) {
    qf[kk][0] = Ld32(q_s + g * kRow + kk * 16 + t4 * 2);
    qf[kk][1] = Ld32(q_s + (g + 8) * kRow + kk * 16 + t4 * 2);
    qf[kk][2] = Ld32(q_s + g * kRow + kk * 16 + t4 * 2 + 8);
    qf[kk][3] = Ld32(q_s + (g + 8) * kRow + kk * 16 + t4 * 2 + 8);
  }
  float o[kDimTiles][4];
#pragma unroll
  for (int j = 0; j < kDimTiles; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  // ldmatrix row addresses: lanes 0-7 keys 0-7, 8-15 keys 8-15 (dims d0); 16-31 the same at d0+8.
  const int ldm_key = warp * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
  const int ldm_dim = (lane >> 4) * 8;

  for (int tile = tile_begin; tile < tile_end; ++tile) {
    CpAsyncWait<kStages - 2>();
    __syncthreads();  // tile's data visible; the stage refilled below is no longer read
    if (tile + kStages - 1 < tile_end) issue_tile(tile + kStages - 1);
    CpAsyncCommit();

    const int stage = (tile - tile_begin) % kStages;
    const int n_valid = min(kTile, ctx - tile * kTile) - warp * 16;  // this warp's valid keys
    if (n_valid <= 0) continue;
    const __nv_bfloat16* ks = kbuf + (stage * kTile + warp * 16) * kRow;
    float s[2][4];
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
      const __nv_bfloat16* kr = ks + (j * 8 + g) * kRow + t4 * 2;
#pragma unroll
      for (int kk = 0; kk < kHeadDim / 16; ++kk)
        Mma16816(s[j], qf[kk], Ld32(kr + kk * 16), Ld32(kr + kk * 16 + 8));
    }
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = j * 8 + t4 * 2 + (e & 1);
        s[j][e] = key < n_valid ? s[j][e] * scale_log2 : -INFINITY;
        mx[e >> 1] = fmaxf(mx[e >> 1], s[j][e]);
      }
    float alpha[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
      const float m_new = fmaxf(m[r], mx[r]);  // finite: key 0 of this warp is valid
      alpha[r] = exp2f(m[r] - m_new);
      m[r] = m_new;
      l[r] *= alpha[r];
    }
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[j][e] = exp2f(s[j][e] - m[e >> 1]);
        l[e >> 1] += s[j][e];
      }
    uint32_t a[4];
    a[0] = PackBf16(s[0][0], s[0][1]);
    a[1] = PackBf16(s[0][2], s[0][3]);
    a[2] = PackBf16(s[1][0], s[1][1]);
    a[3] = PackBf16(s[1][2], s[1][3]);
    const __nv_bfloat16* vrow = vbuf + (stage * kTile + ldm_key) * kRow + ldm_dim;
#pragma unroll
    for (int j = 0; j < kDimTiles; j += 2) {
      uint32_t b[4];
      LdMatrixX4Trans(b, vrow + j * 8);
      o[j][0] *= alpha[0];
      o[j][1] *= alpha[0];
      o[j][2] *= alpha[1];
      o[j][3] *= alpha[1];
      o[j + 1][0] *= alpha[0];
      o[j + 1][1] *= alpha[0];
      o[j + 1][2] *= alpha[1];
      o[j + 1][3] *= alpha[1];
      Mma16816(o[j], a, b[0], b[1]);
      Mma16816(o[j + 1], a, b[2], b[3]);
    }
  }
  CpAsyncWait<0>();
  __syncthreads();  // all warps done with the tiles: reuse the K/V space for the merge

  // Merge the warps: each stores its (m, l, unnormalized o) for rows g and g + 8.
  float* o_s = reinterpret_cast<float*>(smem_raw);  // [warps][16][hd]
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = g + 8 * r;
    float lr = l[r];
    lr += __shfl_xor_sync(0xffffffffu, lr, 1);
    lr += __shfl_xor_sync(0xffffffffu, lr, 2);
    if (t4 == 0) {
      m_s[warp * kMaxGroup + row] = m[r];
      l_s[warp * kMaxGroup + row] = lr;
    }
#pragma unroll
    for (int j = 0; j < kDimTiles; ++j)
      *reinterpret_cast<float2*>(o_s + (warp * kMaxGroup + row) * kHeadDim + j * 8 + t4 * 2) =
          make_float2(o[j][2 * r], o[j][2 * r + 1]);
  }
  __syncthreads();
  for (int i = tid; i < group * kHeadDim; i += kThreads) {
    const int row = i / kHeadDim, d = i % kHeadDim;
    float mx = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, m_s[w * kMaxGroup + row]);
    float num = 0.f, den = 0.f;
    if (mx != -INFINITY) {
#pragma unroll
      for (int w = 0; w < kWarps; ++w) {
        const float mw = m_s[w * kMaxGroup + row];
        if (mw == -INFINITY) continue;  // this warp saw no keys
        const float f = exp2f(mw - mx);
        num += f * o_s[(w * kMaxGroup + row) * kHeadDim + d];
        den += f * l_s[w * kMaxGroup + row];
      }
    }
    const float out = den > 0.f ? num / den : 0.f;
    const int64_t qh = static_cast<int64_t>(seq) * p.num_q_heads + kvh * group + row;
    if (p.num_splits == 1) {
      p.out[qh * kHeadDim + d] = __float2bfloat16(out);
    } else {
      float* o_part = p.workspace;
      float* lse = p.workspace + static_cast<int64_t>(p.num_seqs) * p.num_q_heads *
                                     p.num_splits * kHeadDim;
      o_part[(qh * p.num_splits + split) * kHeadDim + d] = out;
      if (d == 0) lse[qh * p.num_splits + split] = den > 0.f ? mx + log2f(den) : -INFINITY;
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
      p.num_q_heads % p.num_kv_heads != 0 || p.num_q_heads / p.num_kv_heads > kMaxGroup)
    return InvalidArgumentError("DecodeAttention: need Hq % Hkv == 0 and Hq / Hkv <= 16");
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

template <int kHeadDim, int kStages>
Status LaunchTyped(const DecodeAttentionParams& p, cudaStream_t stream) {
  const size_t smem = Smem<kHeadDim, kStages>::kBytes;
  auto kernel = DecodeAttentionKernel<kHeadDim, kStages>;
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
  if (p.num_stages != 0 && (p.num_stages < 2 || p.num_stages > 4))
    return InvalidArgumentError("DecodeAttention: num_stages must be 0 (auto) or 2..4");
  if (p.num_splits < 1 || p.num_splits > 256)
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
