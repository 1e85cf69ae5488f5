// Building blocks of the decode attention kernel (decode_attention.cu): loading a K/V tile
// of the paged cache with cp.async, the per-warp tensor-core step over one tile, and the
// merge of the warps' partial results. Private to this folder.
//
// Per block: 4 warps; a tile is 64 tokens, warp w owns tokens [16w, 16w + 16) of each tile.
// The query heads of one KV group are the rows of a 16-row mma tile (rows >= group are 0).
#pragma once

#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>

#include "common/kernels/decode_attention.h"
#include "common/kernels/mma_util.cuh"

namespace tandem::kernels::decode_detail {

using namespace detail;  // NOLINT: the shared mma/cp.async helpers

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kTile = 64;      // tokens per shared-memory tile
constexpr int kMaxGroup = 16;  // query heads per KV head: the rows of one mma tile

// Where element `col` of row `row` of a K or V tile lives in shared memory (bf16 elements
// from the tile's start): rows of exactly kHeadDim, and the 16-byte chunk c of row r at
// chunk c ^ (r % 8). Each 128-byte line of the cache lands in one aligned 128-byte piece of
// shared memory, so cp.async moves whole lines (with rows padded to kHeadDim + 8 the H200
// splits the requests: 2.3 sectors per L2 request instead of 4). The fragment reads of 8
// rows at one column still hit 8 different bank groups.
template <int kHeadDim>
struct KvTile {
  static constexpr int kRow = kHeadDim;
  __device__ __forceinline__ static int Offset(int row, int col) { return row * kRow + (col ^ ((row & 7) << 3)); }
};

template <int kHeadDim>
struct Dims {
  using Tile = KvTile<kHeadDim>;                // the K/V stages
  static constexpr int kRow = kHeadDim + 8;     // padded smem row of q (bf16): conflict-free fragments
  static constexpr int kChunks = kHeadDim / 8;  // 16-byte chunks per row
  static constexpr int kDimTiles = kHeadDim / 8;
  static constexpr size_t kStageBytes = size_t{2} * kTile * Tile::kRow * 2;  // K and V of one tile
  static constexpr size_t kQBytes = size_t{kMaxGroup} * kRow * 2;
  static constexpr size_t kStateBytes = size_t{2} * kWarps * kMaxGroup * 4;  // m, l per warp
  static constexpr size_t kMergeBytes = size_t{kWarps} * kMaxGroup * kHeadDim * 4;
  static constexpr size_t kNewKvBytes = size_t{2} * kHeadDim * 2;  // the newest token's K and V
};

// One warp's online-softmax state for the 16 rows of its mma tile (rows g and g + 8 here).
template <int kHeadDim>
struct WarpState {
  uint32_t qf[kHeadDim / 16][4];
  float o[kHeadDim / 8][4];
  float m[2];
  float l[2];
};

// Copies the group's query rows into q_s (zero rows past the group). All threads.
template <int kHeadDim>
__device__ __forceinline__ void LoadQ(const DecodeAttentionParams& p, int seq, int kvh, int group, __nv_bfloat16* q_s) {
  using D = Dims<kHeadDim>;
  for (int i = threadIdx.x; i < kMaxGroup * D::kChunks; i += kThreads) {
    const int r = i / D::kChunks, c = i % D::kChunks;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (r < group)
      v = *reinterpret_cast<const uint4*>(
          p.q + (static_cast<int64_t>(seq) * p.num_q_heads + kvh * group + r) * kHeadDim + c * 8);
    *reinterpret_cast<uint4*>(q_s + r * D::kRow + c * 8) = v;
  }
}

// REQUIRES: q_s written and synchronized.
template <int kHeadDim>
__device__ __forceinline__ void InitState(WarpState<kHeadDim>& st, const __nv_bfloat16* q_s) {
  constexpr int kRow = Dims<kHeadDim>::kRow;
  const int lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
#pragma unroll
  for (int kk = 0; kk < kHeadDim / 16; ++kk) {
    st.qf[kk][0] = Ld32(q_s + g * kRow + kk * 16 + t4 * 2);
    st.qf[kk][1] = Ld32(q_s + (g + 8) * kRow + kk * 16 + t4 * 2);
    st.qf[kk][2] = Ld32(q_s + g * kRow + kk * 16 + t4 * 2 + 8);
    st.qf[kk][3] = Ld32(q_s + (g + 8) * kRow + kk * 16 + t4 * 2 + 8);
  }
#pragma unroll
  for (int j = 0; j < kHeadDim / 8; ++j) st.o[j][0] = st.o[j][1] = st.o[j][2] = st.o[j][3] = 0.f;
  st.m[0] = st.m[1] = -INFINITY;
  st.l[0] = st.l[1] = 0.f;
}

// Queues cp.async copies of tile `tile` of (seq, kvh) into one stage (k_stage / v_stage:
// kTile rows in the Dims::Tile layout), all but position `skip` (-1: none), which the caller
// fills itself. Rows
// past the context get zero V: their p is 0, but 0 * (stale NaN bits) would be NaN (stale
// K rows are harmless: their scores are replaced by -inf). All threads; the caller commits
// the group. Thread -> (chunk c, rows r0 + kRowsPerPass * k): the
// unrolled loop issues all block-table reads of the tile together (one latency).
template <int kHeadDim>
__device__ __forceinline__ void IssueTile(const DecodeAttentionParams& p, int seq, int kvh, int ctx, int tile, int skip,
                                          __nv_bfloat16* k_stage, __nv_bfloat16* v_stage) {
  using D = Dims<kHeadDim>;
  constexpr int kRowsPerPass = kThreads / D::kChunks;
  constexpr int kPasses = kTile / kRowsPerPass;
  const int32_t* table = p.block_tables + static_cast<int64_t>(seq) * p.max_blocks_per_seq;
  const int64_t block_elems = 2ll * p.num_kv_heads * p.block_size * kHeadDim;
  const int64_t head_off = static_cast<int64_t>(kvh) * p.block_size * kHeadDim;
  const int64_t v_off = static_cast<int64_t>(p.num_kv_heads) * p.block_size * kHeadDim;
  const int bs_shift = __ffs(p.block_size) - 1;
  const int start = tile * kTile;
  const int n_valid = min(kTile, ctx - start);
  const int c = threadIdx.x % D::kChunks, r0 = threadIdx.x / D::kChunks;
  if (n_valid == kTile && (skip < start || skip >= start + kTile)) {
    // A whole tile without the skipped row: no per-row checks, and 32-bit offsets where the
    // general path below does 64-bit math per row. Tiles start at multiples of kTile, a
    // multiple of the block size, so row r0 + kRowsPerPass * k has the same page slot and
    // in-page row in every tile; kRowsPerPass % 8 == 0 keeps the swizzle of the thread's rows
    // equal, so pass k lands at a constant offset from pass 0. (H200, 256 x 1K: 75 M
    // instructions and 261 us, against 106 M and 275 us with the general path for every tile.)
    static_assert(kRowsPerPass % 8 == 0, "the swizzle repeats every 8 rows");
    const int32_t* row_pages = table + (start >> bs_shift);
    const char* base = reinterpret_cast<const char*>(p.kv_cache + head_off + c * 8);
    const int block_bytes = static_cast<int>(block_elems * 2);  // < 2^31: ValidateShapes' limits
    const int64_t v_bytes = v_off * 2;
    const int dst0 = D::Tile::Offset(r0, c * 8);
    int32_t pg[kPasses];
#pragma unroll
    for (int k = 0; k < kPasses; ++k) pg[k] = row_pages[(r0 + k * kRowsPerPass) >> bs_shift];
#pragma unroll
    for (int k = 0; k < kPasses; ++k) {
      const int row = (r0 + k * kRowsPerPass) & (p.block_size - 1);
      const char* src = base + static_cast<int64_t>(pg[k]) * block_bytes + row * (kHeadDim * 2);
      const int dst = dst0 + k * kRowsPerPass * D::Tile::kRow;
      CpAsync16L2(k_stage + dst, src);
      CpAsync16L2(v_stage + dst, src + v_bytes);
    }
    return;
  }
  int64_t page[kPasses];
#pragma unroll
  for (int k = 0; k < kPasses; ++k) {
    const int tt = r0 + k * kRowsPerPass;
    page[k] = tt < n_valid ? table[(start + tt) >> bs_shift] : 0;  // no __ldg: see WaitForPreviousKernel
  }
#pragma unroll
  for (int k = 0; k < kPasses; ++k) {
    const int tt = r0 + k * kRowsPerPass;
    const int dst = D::Tile::Offset(tt, c * 8);
    if (tt < n_valid) {
      if (start + tt == skip) continue;
      const __nv_bfloat16* src =
          p.kv_cache + page[k] * block_elems + head_off + ((start + tt) & (p.block_size - 1)) * kHeadDim + c * 8;
      CpAsync16L2(k_stage + dst, src);
      CpAsync16L2(v_stage + dst, src + v_off);
    } else {
      *reinterpret_cast<uint4*>(v_stage + dst) = make_uint4(0, 0, 0, 0);
    }
  }
}

// One warp's step over its 16 tokens of a tile in shared memory (K and V rows in the
// KvTile<kHeadDim> layout). `tile_valid` is the number of valid tokens of the whole tile.
// REQUIRES: the stage is complete and visible.
template <int kHeadDim>
__device__ __forceinline__ void ComputeTile(WarpState<kHeadDim>& st, const __nv_bfloat16* k_stage,
                                            const __nv_bfloat16* v_stage, int tile_valid, float scale_log2) {
  using D = Dims<kHeadDim>;
  constexpr int kRow = D::Tile::kRow;
  const int lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
  const int warp = threadIdx.x >> 5;
  const int n_valid = tile_valid - warp * 16;  // this warp's valid keys
  if (n_valid <= 0) return;
  const __nv_bfloat16* ks = k_stage + warp * 16 * kRow;
  // Rows j * 8 + g of the warp's 16 (row % 8 == g): KvTile::Offset's column swizzle is ^ g8.
  const int g8 = g << 3;
  float s[2][4];
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
    const __nv_bfloat16* kr = ks + (j * 8 + g) * kRow + t4 * 2;
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; ++kk)
      Mma16816(s[j], st.qf[kk], Ld32(kr + ((kk * 16) ^ g8)), Ld32(kr + ((kk * 16 + 8) ^ g8)));
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
    const float m_new = fmaxf(st.m[r], mx[r]);  // finite: key 0 of this warp is valid
    alpha[r] = exp2f(st.m[r] - m_new);
    st.m[r] = m_new;
    st.l[r] *= alpha[r];
  }
#pragma unroll
  for (int j = 0; j < 2; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      s[j][e] = exp2f(s[j][e] - st.m[e >> 1]);
      st.l[e >> 1] += s[j][e];
    }
  uint32_t a[4];
  a[0] = PackBf16(s[0][0], s[0][1]);
  a[1] = PackBf16(s[0][2], s[0][3]);
  a[2] = PackBf16(s[1][0], s[1][1]);
  a[3] = PackBf16(s[1][2], s[1][3]);
  // ldmatrix rows: lanes 0-7 keys 0-7, 8-15 keys 8-15 (dims d0); lanes 16-31 the same at d0+8.
  // The lane's chunk j + (lane >> 4) (j even) of a row with key % 8 == lane % 8 is at chunk
  // j ^ ((lane >> 4) ^ (lane % 8)).
  const int ldm_key = warp * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
  const int v8 = ((lane >> 4) ^ (lane & 7)) << 3;
  const __nv_bfloat16* vrow = v_stage + ldm_key * kRow;
#pragma unroll
  for (int j = 0; j < D::kDimTiles; j += 2) {
    uint32_t b[4];
    LdMatrixX4Trans(b, vrow + ((j * 8) ^ v8));
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      st.o[j][e] *= alpha[e >> 1];
      st.o[j + 1][e] *= alpha[e >> 1];
    }
    Mma16816(st.o[j], a, b[0], b[1]);
    Mma16816(st.o[j + 1], a, b[2], b[3]);
  }
}

// Warp `slot`'s state for rows < group into shared memory: m and l at [slot * kMaxGroup +
// row], o at [(slot * kMaxGroup + row) * kHeadDim + d]. The whole warp.
template <int kHeadDim>
__device__ __forceinline__ void StoreWarpState(const WarpState<kHeadDim>& st, int group, int slot, float* o_s,
                                               float* m_s, float* l_s) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = g + 8 * r;
    float lr = st.l[r];
    lr += __shfl_xor_sync(0xffffffffu, lr, 1);
    lr += __shfl_xor_sync(0xffffffffu, lr, 2);
    if (row >= group) continue;  // rows >= group are padding
    if (t4 == 0) {
      m_s[slot * kMaxGroup + row] = st.m[r];
      l_s[slot * kMaxGroup + row] = lr;
    }
#pragma unroll
    for (int j = 0; j < kHeadDim / 8; ++j)
      *reinterpret_cast<float2*>(o_s + (slot * kMaxGroup + row) * kHeadDim + j * 8 + t4 * 2) =
          make_float2(st.o[j][2 * r], st.o[j][2 * r + 1]);
  }
}

// Element d of row `row` of the warps' merged output (StoreWarpState's layout), with the
// merged max (mx) and softmax denominator (den) for the log2-sum-exp mx + log2(den).
template <int kHeadDim>
__device__ __forceinline__ float MergeWarpStates(int row, int d, const float* o_s, const float* m_s, const float* l_s,
                                                 float& mx, float& den) {
  mx = -INFINITY;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, m_s[w * kMaxGroup + row]);
  float num = 0.f;
  den = 0.f;
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
  return den > 0.f ? num / den : 0.f;
}

// Merges the warps' states for rows < group and writes the output (1 split) or the split's
// partial output and log2-sum-exp. All threads; o_s/m_s/l_s must not be in use by others.
// o_s holds kWarps * kMaxGroup rows of kHeadDim floats, m_s and l_s kWarps * kMaxGroup floats.
template <int kHeadDim>
__device__ __forceinline__ void MergeAndStore(const DecodeAttentionParams& p, const WarpState<kHeadDim>& st, int seq,
                                              int kvh, int split, int group, float* o_s, float* m_s, float* l_s) {
  StoreWarpState<kHeadDim>(st, group, threadIdx.x >> 5, o_s, m_s, l_s);
  __syncthreads();
  for (int i = threadIdx.x; i < group * kHeadDim; i += kThreads) {
    const int row = i / kHeadDim, d = i % kHeadDim;
    float mx, den;
    const float out = MergeWarpStates<kHeadDim>(row, d, o_s, m_s, l_s, mx, den);
    const int64_t qh = static_cast<int64_t>(seq) * p.num_q_heads + kvh * group + row;
    if (p.num_splits == 1) {
      p.out[qh * kHeadDim + d] = __float2bfloat16(out);
    } else {
      float* o_part = p.workspace;
      float* lse = p.workspace + static_cast<int64_t>(p.num_seqs) * p.num_q_heads * p.num_splits * kHeadDim;
      o_part[(qh * p.num_splits + split) * kHeadDim + d] = out;
      if (d == 0) lse[qh * p.num_splits + split] = den > 0.f ? mx + log2f(den) : -INFINITY;
    }
  }
}

}  // namespace tandem::kernels::decode_detail
