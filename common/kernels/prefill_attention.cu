#include "common/kernels/prefill_attention.h"

#include <cmath>

#include "common/cuda/cuda_status.h"
#include "common/kernels/kernel_util.cuh"
#include "common/kernels/mma_util.cuh"

namespace tandem::kernels {
namespace {

using namespace detail;  // NOLINT: the shared mma/cp.async helpers

// 8 warps (128 query rows) per block: each K/V tile in shared memory serves twice the rows
// of 4 warps. At head_dim 128 a thread holds 253 registers (nvcc 13), so one block (8 warps)
// runs per SM; its 104 KB of shared memory would allow two. H200, one causal sequence, 32 / 8
// heads of 128: 2K / 4K / 8K tokens 219 / 698 / 2458 us, against 242 / 807 / 2906 with 4
// warps. 4 warps of 32 rows each (two row tiles sharing every K/V fragment, 2 blocks per SM)
// run 8K 7 % faster but 512 14 % slower.
constexpr int kWarps = 8;
constexpr int kBlockM = 16 * kWarps;  // query rows per block
constexpr int kBlockN = 64;           // keys per tile

// Grid: (ceil(max_q_len / kBlockM), num_q_heads, num_seqs); 32 * kWarps threads.
template <int kHeadDim>
__global__ void __launch_bounds__(32 * kWarps) PrefillAttentionKernel(PrefillAttentionParams p, float scale_log2) {
  constexpr int kRow = kHeadDim + 8;
  constexpr int kChunks = kHeadDim / 8;
  constexpr int kDimTiles = kHeadDim / 8;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  __nv_bfloat16* q_s = reinterpret_cast<__nv_bfloat16*>(smem_raw);  // [kBlockM][kRow]
  // K and V tiles, double-buffered: tile t lives in buffer t % 2 ([kBlockN][kRow] each).
  auto k_buf = [&](int tile) { return q_s + (kBlockM + (tile & 1) * kBlockN) * kRow; };
  auto v_buf = [&](int tile) { return q_s + (kBlockM + (2 + (tile & 1)) * kBlockN) * kRow; };

  const int seq = blockIdx.z, h = blockIdx.y;
  const int q_begin = p.cu_q_lens[seq];
  const int q_len = p.cu_q_lens[seq + 1] - q_begin;
  // Last query tiles first: under the causal mask they have the most keys (shorter tail).
  const int row0 = (gridDim.x - 1 - blockIdx.x) * kBlockM;
  if (row0 >= q_len) return;
  const int ctx = p.context_lens[seq];
  const int prefix = ctx - q_len;  // position of query row 0
  const int kvh = h / (p.num_q_heads / p.num_kv_heads);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, t4 = lane & 3;

  for (int i = tid; i < kBlockM * kChunks; i += 32 * kWarps) {
    const int r = i / kChunks, c = i % kChunks;
    uint4* dst = reinterpret_cast<uint4*>(q_s + r * kRow + c * 8);
    if (row0 + r < q_len) {
      CpAsync16(dst, p.q + (static_cast<int64_t>(q_begin + row0 + r) * p.num_q_heads + h) * kHeadDim + c * 8);
    } else {
      *dst = make_uint4(0, 0, 0, 0);
    }
  }
  CpAsyncCommit();

  const int32_t* table = p.block_tables + static_cast<int64_t>(seq) * p.max_blocks_per_seq;
  const int64_t block_elems = 2ll * p.num_kv_heads * p.block_size * kHeadDim;
  const int64_t head_off = static_cast<int64_t>(kvh) * p.block_size * kHeadDim;
  const int64_t v_off = static_cast<int64_t>(p.num_kv_heads) * p.block_size * kHeadDim;
  const int bs_shift = __ffs(p.block_size) - 1;
  // Queues the loads of K/V tile `tile` into buffer tile % 2 (zeros past the context, so
  // masked probabilities never meet garbage: 0 * NaN), as one cp.async group.
  auto load_tile = [&](int tile) {
    const int kv0 = tile * kBlockN;
    __nv_bfloat16* k_s = k_buf(tile);
    __nv_bfloat16* v_s = v_buf(tile);
    for (int i = tid; i < kBlockN * kChunks; i += 32 * kWarps) {
      const int r = i / kChunks, c = i % kChunks, tok = kv0 + r;
      __nv_bfloat16* kd = k_s + r * kRow + c * 8;
      __nv_bfloat16* vd = v_s + r * kRow + c * 8;
      if (tok < ctx) {
        const __nv_bfloat16* src = p.kv_cache + table[tok >> bs_shift] * block_elems + head_off +
                                   (tok & (p.block_size - 1)) * kHeadDim + c * 8;
        CpAsync16(kd, src);
        CpAsync16(vd, src + v_off);
      } else {
        *reinterpret_cast<uint4*>(kd) = make_uint4(0, 0, 0, 0);
        *reinterpret_cast<uint4*>(vd) = make_uint4(0, 0, 0, 0);
      }
    }
    CpAsyncCommit();
  };
  load_tile(0);      // its loads overlap the q fragments below
  CpAsyncWait<1>();  // the q group (committed first) has landed
  __syncthreads();

  uint32_t qf[kHeadDim / 16][4];
  const __nv_bfloat16* qw = q_s + (warp * 16) * kRow;
#pragma unroll
  for (int kk = 0; kk < kHeadDim / 16; ++kk) {
    qf[kk][0] = Ld32(qw + g * kRow + kk * 16 + t4 * 2);
    qf[kk][1] = Ld32(qw + (g + 8) * kRow + kk * 16 + t4 * 2);
    qf[kk][2] = Ld32(qw + g * kRow + kk * 16 + t4 * 2 + 8);
    qf[kk][3] = Ld32(qw + (g + 8) * kRow + kk * 16 + t4 * 2 + 8);
  }

  float o[kDimTiles][4];
#pragma unroll
  for (int j = 0; j < kDimTiles; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  const int qpos[2] = {prefix + row0 + warp * 16 + g, prefix + row0 + warp * 16 + g + 8};

  const int last_key = prefix + min(q_len, row0 + kBlockM) - 1;
  const int num_kv_tiles = last_key / kBlockN + 1;

  for (int tile = 0; tile < num_kv_tiles; ++tile) {
    const int kv0 = tile * kBlockN;
    __syncthreads();  // every warp is done with tile - 1, whose buffer the next loads reuse
    if (tile + 1 < num_kv_tiles) {
      load_tile(tile + 1);
    } else {
      CpAsyncCommit();  // an empty group keeps the count uniform
    }
    CpAsyncWait<1>();  // all but the newest group: this tile
    __syncthreads();
    const __nv_bfloat16* k_s = k_buf(tile);
    const __nv_bfloat16* v_s = v_buf(tile);

    float s[kBlockN / 8][4];
#pragma unroll
    for (int j = 0; j < kBlockN / 8; ++j) {
      s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
      // Lanes 8i..8i+7 address matrix i: keys j*8 + (lane & 7), dims kk*16 + 8i.
      const __nv_bfloat16* kr = k_s + (j * 8 + (lane & 7)) * kRow + (lane >> 3) * 8;
#pragma unroll
      for (int kk = 0; kk < kHeadDim / 16; kk += 2) {
        uint32_t b[4];
        LdMatrixX4(b, kr + kk * 16);
        Mma16816(s[j], qf[kk], b[0], b[1]);
        Mma16816(s[j], qf[kk + 1], b[2], b[3]);
      }
    }
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int j = 0; j < kBlockN / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = kv0 + j * 8 + t4 * 2 + (e & 1);
        const int r = e >> 1;
        s[j][e] = key <= qpos[r] ? s[j][e] * scale_log2 : -INFINITY;
        mx[r] = fmaxf(mx[r], s[j][e]);
      }
    float alpha[2], base[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
      const float m_new = fmaxf(m[r], mx[r]);
      base[r] = m_new == -INFINITY ? 0.f : m_new;
      alpha[r] = exp2f(m[r] - base[r]);
      m[r] = m_new;
      l[r] *= alpha[r];
    }
#pragma unroll
    for (int j = 0; j < kDimTiles; ++j) {
      o[j][0] *= alpha[0];
      o[j][1] *= alpha[0];
      o[j][2] *= alpha[1];
      o[j][3] *= alpha[1];
    }
#pragma unroll
    for (int j = 0; j < kBlockN / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[j][e] = exp2f(s[j][e] - base[e >> 1]);
        l[e >> 1] += s[j][e];
      }
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
      uint32_t a[4];
      a[0] = PackBf16(s[2 * kk][0], s[2 * kk][1]);
      a[1] = PackBf16(s[2 * kk][2], s[2 * kk][3]);
      a[2] = PackBf16(s[2 * kk + 1][0], s[2 * kk + 1][1]);
      a[3] = PackBf16(s[2 * kk + 1][2], s[2 * kk + 1][3]);
      // Lanes 0-7 keys 0-7, 8-15 keys 8-15 (dims j*8); lanes 16-31 the same at dims j*8 + 8.
      const __nv_bfloat16* v0 = v_s + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * kRow + (lane >> 4) * 8;
#pragma unroll
      for (int j = 0; j < kDimTiles; j += 2) {
        uint32_t b[4];
        LdMatrixX4Trans(b, v0 + j * 8);
        Mma16816(o[j], a, b[0], b[1]);
        Mma16816(o[j + 1], a, b[2], b[3]);
      }
    }
  }

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
    l[r] = l[r] > 0.f ? 1.f / l[r] : 0.f;
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = row0 + warp * 16 + g + 8 * r;
    if (row >= q_len) continue;
    __nv_bfloat16* dst = p.out + (static_cast<int64_t>(q_begin + row) * p.num_q_heads + h) * kHeadDim + t4 * 2;
#pragma unroll
    for (int j = 0; j < kDimTiles; ++j)
      *reinterpret_cast<uint32_t*>(dst + j * 8) = PackBf16(o[j][2 * r] * l[r], o[j][2 * r + 1] * l[r]);
  }
}

template <int kHeadDim>
Status LaunchTyped(const PrefillAttentionParams& p, cudaStream_t stream) {
  const int smem = (kBlockM + 4 * kBlockN) * (kHeadDim + 8) * 2;  // q + two K/V tiles
  auto kernel = PrefillAttentionKernel<kHeadDim>;
  TANDEM_RETURN_IF_CUDA_ERROR(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  dim3 grid((p.max_q_len + kBlockM - 1) / kBlockM, p.num_q_heads, p.num_seqs);
  kernel<<<grid, 32 * kWarps, smem, stream>>>(p, p.softmax_scale * kLog2e);
  return cuda::LastLaunchStatus("PrefillAttentionKernel");
}

}  // namespace

Status LaunchPrefillAttention(const PrefillAttentionParams& p, cudaStream_t stream) {
  if (p.q == nullptr || p.kv_cache == nullptr || p.block_tables == nullptr || p.cu_q_lens == nullptr ||
      p.context_lens == nullptr || p.out == nullptr)
    return InvalidArgumentError("PrefillAttention: null pointer");
  if (p.num_seqs < 0 || p.num_q_heads <= 0 || p.num_kv_heads <= 0 || p.num_q_heads % p.num_kv_heads != 0 ||
      p.max_q_len < 0 || p.max_blocks_per_seq <= 0)
    return InvalidArgumentError("PrefillAttention: bad head counts or sizes");
  if (p.block_size < 8 || p.block_size > 64 || (p.block_size & (p.block_size - 1)) != 0)
    return InvalidArgumentError("PrefillAttention: block_size must be a power of two in [8, 64]");
  if (!(p.softmax_scale > 0.f)) return InvalidArgumentError("PrefillAttention: softmax_scale <= 0");
  if (p.num_seqs == 0 || p.max_q_len == 0) return Status::Ok();
  if (p.head_dim == 64) return LaunchTyped<64>(p, stream);
  if (p.head_dim == 128) return LaunchTyped<128>(p, stream);
  return InvalidArgumentError("PrefillAttention: head_dim must be 64 or 128");
}

}  // namespace tandem::kernels
