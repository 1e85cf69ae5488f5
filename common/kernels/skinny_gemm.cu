#include "common/kernels/skinny_gemm.h"

#include <cstdint>

#include "common/cuda/cuda_status.h"
#include "common/kernels/kernel_util.cuh"

namespace tandem::kernels {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;
// One warp step covers 32 k-values of 16 weight rows: lane (g = lane / 4, t = lane % 4)
// loads the 8 consecutive values k0 + 8t .. k0 + 8t + 7 of rows g and g + 8 and of x
// row g. The mma only needs the same k-permutation on both operands, and this one
// turns each fragment into one 16-byte load (see MmaStep).
constexpr int kStepK = 32;
// Features and k up to which one wave of 16-row blocks with 4 k-steps in flight wins.
constexpr int kMaxFeaturesFor16RowsUnroll4 = 16 * 2 * 132;
constexpr int kMaxKFor16RowsUnroll4 = 4096;
// Keeps the k offsets of the unrolled loop far from int overflow; no model comes close.
constexpr int kMaxK = 1 << 24;

// The loads are predicated inside the asm (zeros when `pred` is false), so no compiler
// speculation can turn a guarded load past the end of a row or matrix into a real one.
// Weights are read once: keep them out of L1 (x stays there) and let L2 fetch whole
// 256-byte lines (the other warps of the block read the rest of them next).
__device__ __forceinline__ uint4 LoadStreaming(const __nv_bfloat16* ptr, bool pred) {
  uint4 v;
  asm("{\n"
      "  .reg .pred p;\n"
      "  setp.ne.b32 p, %5, 0;\n"
      "  mov.b32 %0, 0;\n  mov.b32 %1, 0;\n  mov.b32 %2, 0;\n  mov.b32 %3, 0;\n"
      "  @p ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];\n"
      "}\n"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(ptr), "r"(static_cast<int>(pred)));
  return v;
}

// x with an ordinary (coherent) load, cached in L1 (every block re-reads x). Not the
// read-only .nc path: under PDL this kernel starts before the kernel writing x ends, and
// .nc data is only guaranteed for memory nobody writes during the kernel's lifetime.
__device__ __forceinline__ uint4 LoadCached(const __nv_bfloat16* ptr, bool pred) {
  uint4 v;
  asm volatile(
      "{\n"
      "  .reg .pred p;\n"
      "  setp.ne.b32 p, %5, 0;\n"
      "  mov.b32 %0, 0;\n  mov.b32 %1, 0;\n  mov.b32 %2, 0;\n  mov.b32 %3, 0;\n"
      "  @p ld.global.v4.u32 {%0,%1,%2,%3}, [%4];\n"
      "}\n"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(ptr), "r"(static_cast<int>(pred))
      : "memory");  // volatile + memory: never hoisted above WaitForPreviousKernel
  return v;
}

// d += a · b for a 16x16 (rows x k) bf16 tile a and a 16x8 (k x cols) tile b.
__device__ __forceinline__ void Mma16816(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                         uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// One warp step for a 16-row tile and an 8-column tile of x. In mma fragment terms the
// lane holds A(g, 2t..2t+1), A(g + 8, 2t..2t+1), A(g, 2t+8..2t+9), A(g + 8, 2t+8..2t+9)
// and B(2t..2t+1, g), B(2t+8..2t+9, g). Mapping logical k (2t, 2t+1, 2t+8, 2t+9) of the
// first mma to physical k0 + 8t + (0, 1, 2, 3), and of the second mma to
// k0 + 8t + (4, 5, 6, 7), is a bijection of the 32 values that both operands share.
// The two mmas go to two accumulators: half the length of the dependent mma chain that
// stands between one batch of loads and the next.
__device__ __forceinline__ void MmaStep(float (&acc)[2][4], const uint4& w_lo, const uint4& w_hi, const uint4& xv) {
  Mma16816(acc[0], w_lo.x, w_hi.x, w_lo.y, w_hi.y, xv.x, xv.y);
  Mma16816(acc[1], w_lo.z, w_hi.z, w_lo.w, w_hi.w, xv.z, xv.w);
}

__device__ __forceinline__ void StoreOut(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }
__device__ __forceinline__ void StoreOut(float* p, float v) { *p = v; }

// Grid: one block per 16 * kRowTiles output features (silu_mul: per 8 * kRowTiles features,
// each 16-row tile holding the gate rows of 8 features and then their up rows). Warp w
// handles the k-steps w, w + 8, w + 16, ... (the 8 warps together read 8 * 64 contiguous
// bytes of each row), kUnroll steps of loads in flight before the first mma. kTokenTiles:
// 1 for m <= 8, 2 above.
template <int kTokenTiles, int kRowTiles, int kUnroll, typename OutT>
__global__ void __launch_bounds__(kThreads, 2) SkinnyGemmKernel(const SkinnyGemmParams p) {
  constexpr int kRows = 16 * kRowTiles;
  __shared__ float4 partial[kWarps][kRowTiles][kTokenTiles][32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const bool silu = p.silu_mul;
  const int64_t half = p.n / 2;
  // First output column of this block: a feature of y (silu_mul: of the gate/up pairs).
  const int64_t col_base = static_cast<int64_t>(blockIdx.x) * (silu ? kRows / 2 : kRows);
  const int k_total = p.k;

  // Per lane: 2 weight rows per row tile (tile rows g, g + 8) and 1 x row per token tile
  // (g, 8 + g). silu_mul: tile rows g and g + 8 are the gate and up rows of one feature.
  const __nv_bfloat16* w_ptr[kRowTiles][2];
  bool w_ok[kRowTiles][2];
#pragma unroll
  for (int r = 0; r < kRowTiles; ++r)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      int64_t row;
      if (silu) {
        const int64_t feature = col_base + 8 * r + g;
        w_ok[r][h] = feature < half;
        row = h * half + feature;
      } else {
        row = col_base + 16 * r + 8 * h + g;
        w_ok[r][h] = row < p.n;
      }
      w_ptr[r][h] = p.w + (w_ok[r][h] ? row : 0) * k_total + 8 * t;
    }
  const __nv_bfloat16* x_ptr[kTokenTiles];
  bool x_ok[kTokenTiles];
#pragma unroll
  for (int c = 0; c < kTokenTiles; ++c) {
    const int token = 8 * c + g;
    x_ok[c] = token < p.m;
    x_ptr[c] = p.x + (x_ok[c] ? token : 0) * p.ldx + 8 * t;
  }

  float acc[kRowTiles][kTokenTiles][2][4] = {};
  const int num_steps = (k_total + kStepK - 1) / kStepK;
  // Launched with PDL: the first batch of weight loads (nobody writes weights) goes out
  // while the previous kernel finishes; x and y only after it has. Once this kernel has
  // waited, the next one may launch: a GEMM after it takes each SM as this one leaves it and
  // starts loading its weights. Its loads in flight need the large L1 of a small
  // shared-memory carveout, so a kernel of large shared memory before a skinny GEMM lets it
  // launch only as it ends (DecodeAttentionParams::late_next).
  bool waited = false;
#pragma unroll 1
  for (int s0 = warp; s0 < num_steps; s0 += kWarps * kUnroll) {
    uint4 wv[kUnroll][kRowTiles][2], xv[kUnroll][kTokenTiles];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int k0 = (s0 + u * kWarps) * kStepK;
      const bool k_ok = k0 + 8 * t < k_total;  // k % 8 == 0: a lane's 8 values are all in or out
#pragma unroll
      for (int r = 0; r < kRowTiles; ++r)
#pragma unroll
        for (int h = 0; h < 2; ++h) wv[u][r][h] = LoadStreaming(w_ptr[r][h] + k0, k_ok && w_ok[r][h]);
    }
    if (!waited) {
      detail::WaitForPreviousKernel();
      detail::AllowNextKernel();
      waited = true;
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int k0 = (s0 + u * kWarps) * kStepK;
      const bool k_ok = k0 + 8 * t < k_total;
#pragma unroll
      for (int c = 0; c < kTokenTiles; ++c) xv[u][c] = LoadCached(x_ptr[c] + k0, k_ok && x_ok[c]);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int r = 0; r < kRowTiles; ++r)
#pragma unroll
        for (int c = 0; c < kTokenTiles; ++c) MmaStep(acc[r][c], wv[u][r][0], wv[u][r][1], xv[u][c]);
  }

#pragma unroll
  for (int r = 0; r < kRowTiles; ++r)
#pragma unroll
    for (int c = 0; c < kTokenTiles; ++c) {
      const float(&a)[4] = acc[r][c][0];
      const float(&b)[4] = acc[r][c][1];
      partial[warp][r][c][lane] = make_float4(a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3]);
    }
  if (!waited) detail::WaitForPreviousKernel();  // a warp without k-steps still writes y below
  __syncthreads();

  // Output o = token * cols + column: consecutive threads write consecutive columns.
  // The mma's D fragment puts (row i, column j) of a tile in lane (i % 8) * 4 + j / 2,
  // element (i / 8) * 2 + j % 2.
  const int cols = silu ? kRows / 2 : kRows;
  const int64_t num_cols = silu ? half : p.n;
  OutT* y = static_cast<OutT*>(p.y);
  for (int base = 0; base < cols * p.m; base += kThreads) {
    const int o = base + threadIdx.x;
    const int token = o / cols, col = o % cols;
    const int64_t n = col_base + col;
    if (o < cols * p.m && n < num_cols) {
      const int c = token / 8, j = token % 8;
      // Tile row i of row tile r, summed over the warps.
      auto product = [&](int r, int i) {
        const int src_lane = (i % 8) * 4 + j / 2, elem = (i / 8) * 2 + j % 2;
        float sum = 0.f;
#pragma unroll
        for (int w = 0; w < kWarps; ++w) sum += reinterpret_cast<const float*>(&partial[w][r][c][src_lane])[elem];
        return sum;
      };
      OutT* dst = y + token * p.ldy + n;
      if (silu) {
        if constexpr (sizeof(OutT) == 2) {
          float gate = product(col / 8, col % 8), up = product(col / 8, col % 8 + 8);
          if (p.bias != nullptr) gate += __bfloat162float(p.bias[n]), up += __bfloat162float(p.bias[half + n]);
          *dst = __float2bfloat16_rn(detail::SiluMul(detail::RoundToBf16(gate), detail::RoundToBf16(up)));
        }
      } else {
        float sum = product(col / 16, col % 16);
        if (p.bias != nullptr) sum += __bfloat162float(p.bias[n]);
        if constexpr (sizeof(OutT) == 4) {
          if (p.accumulate) sum = *dst + sum;
        }
        StoreOut(dst, sum);
      }
    }
  }
}

template <int kTokenTiles, int kRowTiles, int kUnroll>
Status LaunchTiled(const SkinnyGemmParams& p, cudaStream_t stream) {
  const int64_t cols_per_block = p.silu_mul ? 8 * kRowTiles : 16 * kRowTiles;
  const int64_t cols = p.silu_mul ? p.n / 2 : p.n;
  const int64_t blocks = (cols + cols_per_block - 1) / cols_per_block;
  if (p.y_dtype == DType::kF32) {
    return detail::LaunchPdl("SkinnyGemmKernel", SkinnyGemmKernel<kTokenTiles, kRowTiles, kUnroll, float>,
                             static_cast<unsigned>(blocks), kThreads, 0, stream, p);
  }
  return detail::LaunchPdl("SkinnyGemmKernel", SkinnyGemmKernel<kTokenTiles, kRowTiles, kUnroll, __nv_bfloat16>,
                           static_cast<unsigned>(blocks), kThreads, 0, stream, p);
}

template <int kTokenTiles>
Status LaunchForTiling(const SkinnyGemmParams& p, SkinnyGemmTiling tiling, cudaStream_t stream) {
  switch (tiling) {
    case SkinnyGemmTiling::k16RowsUnroll4: return LaunchTiled<kTokenTiles, 1, 4>(p, stream);
    case SkinnyGemmTiling::k16RowsUnroll8: return LaunchTiled<kTokenTiles, 1, 8>(p, stream);
    case SkinnyGemmTiling::k32RowsUnroll2: return LaunchTiled<kTokenTiles, 2, 2>(p, stream);
    case SkinnyGemmTiling::k32RowsUnroll4: return LaunchTiled<kTokenTiles, 2, 4>(p, stream);
    case SkinnyGemmTiling::kAuto: break;
  }
  return InternalError("SkinnyGemm: tiling not resolved");
}

// Every tiling fits 2 blocks (16 warps) per SM and no more (80-128 registers, no spills
// with nvcc 13), so the ones with 8 KB of weights in flight per warp win on paper. The
// 32-row blocks (x fragments shared by two row tiles) are slower than 16 x 8 on the large
// GEMMs (H200, gate/up 28672 x 4096 alone: 58.5 against 56.4 us at m = 1, 62.2 against 58.3
// at m = 8). A GEMM whose 16-row blocks fit in one wave at k <= 4096 (the o projection of an
// 8B model) takes 4 KB per warp and batch, four batches a warp (H200, o_proj 4096 x 4096 at
// m = 1: 9.42 against 9.88 us alone).
SkinnyGemmTiling ChooseTiling(const SkinnyGemmParams& p) {
  if (p.k <= kMaxKFor16RowsUnroll4 && p.n <= kMaxFeaturesFor16RowsUnroll4) return SkinnyGemmTiling::k16RowsUnroll4;
  return SkinnyGemmTiling::k16RowsUnroll8;
}

bool Aligned16(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }

}  // namespace

const char* SkinnyGemmTilingName(SkinnyGemmTiling tiling) {
  switch (tiling) {
    case SkinnyGemmTiling::kAuto: return "auto";
    case SkinnyGemmTiling::k16RowsUnroll4: return "16x4";
    case SkinnyGemmTiling::k16RowsUnroll8: return "16x8";
    case SkinnyGemmTiling::k32RowsUnroll2: return "32x2";
    case SkinnyGemmTiling::k32RowsUnroll4: return "32x4";
  }
  return "unknown";
}

Status ValidateSkinnyGemm(const SkinnyGemmParams& p) {
  if (p.x == nullptr || p.w == nullptr || p.y == nullptr)
    return InvalidArgumentError("SkinnyGemm: x, w and y must not be null");
  if (p.m < 1 || p.m > kSkinnyGemmMaxM) return InvalidArgumentError("SkinnyGemm: m must be in [1, 16]");
  if (p.n < 1) return InvalidArgumentError("SkinnyGemm: n must be >= 1");
  if (p.k < 8 || p.k % 8 != 0 || p.k > kMaxK)
    return InvalidArgumentError("SkinnyGemm: k must be a multiple of 8 in [8, 2^24]");
  const int64_t y_cols = p.silu_mul ? p.n / 2 : p.n;
  const int64_t ldx = p.ldx == 0 ? p.k : p.ldx, ldy = p.ldy == 0 ? y_cols : p.ldy;
  if (ldx < p.k || ldx % 8 != 0) return InvalidArgumentError("SkinnyGemm: ldx must be >= k and a multiple of 8");
  if (ldy < y_cols) return InvalidArgumentError("SkinnyGemm: ldy must be >= n (n / 2 with silu_mul)");
  if (!Aligned16(p.x) || !Aligned16(p.w)) return InvalidArgumentError("SkinnyGemm: x and w must be 16-byte aligned");
  if (p.y_dtype != DType::kBF16 && p.y_dtype != DType::kF32)
    return InvalidArgumentError("SkinnyGemm: y_dtype must be bf16 or f32");
  const size_t y_elem = p.y_dtype == DType::kF32 ? 4 : 2;
  if (reinterpret_cast<uintptr_t>(p.y) % y_elem != 0 || reinterpret_cast<uintptr_t>(p.bias) % 2 != 0)
    return InvalidArgumentError("SkinnyGemm: y or bias not aligned to its element size");
  if (p.accumulate && p.y_dtype != DType::kF32) return InvalidArgumentError("SkinnyGemm: accumulate needs an f32 y");
  if (p.silu_mul && (p.n % 2 != 0 || p.y_dtype != DType::kBF16 || p.accumulate))
    return InvalidArgumentError("SkinnyGemm: silu_mul needs an even n and a bf16 y, no accumulate");
  const int t = static_cast<int>(p.tiling);
  if (t < 0 || t >= kNumSkinnyGemmTilings) return InvalidArgumentError("SkinnyGemm: unknown tiling");
  return Status::Ok();
}

Status LaunchSkinnyGemm(const SkinnyGemmParams& params, cudaStream_t stream) {
  TANDEM_RETURN_IF_ERROR(ValidateSkinnyGemm(params));
  SkinnyGemmParams p = params;
  if (p.ldx == 0) p.ldx = p.k;
  if (p.ldy == 0) p.ldy = p.silu_mul ? p.n / 2 : p.n;
  const SkinnyGemmTiling tiling = p.tiling == SkinnyGemmTiling::kAuto ? ChooseTiling(p) : p.tiling;
  return p.m <= 8 ? LaunchForTiling<1>(p, tiling, stream) : LaunchForTiling<2>(p, tiling, stream);
}

}  // namespace tandem::kernels
