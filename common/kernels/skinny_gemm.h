// Skinny bf16 GEMM for decode at small batch: y[m, n] = x[m, k] · w[n, k]ᵀ (+ bias[n])
// for m <= 16 rows, fp32 accumulation, one rounding to the output type; or, with
// `accumulate`, y += x · wᵀ (+ bias) into an fp32 y (the residual stream takes the o and
// down projections directly).
//
// With silu_mul the SiLU-mul between the gate/up and down projections runs in the epilogue
// (no kernel of its own): w is the fused [gate (n/2 rows) | up (n/2 rows)] projection and
// y[:, f] = silu(g_f) * u_f, n/2 columns; g and u are rounded to bf16 first, so the result
// is bit for bit the plain GEMM followed by the SiLU-mul kernel.
//
// Memory-bound by design: every weight element is read from HBM exactly once per call
// (16-byte non-allocating loads), and all m rows of x are applied to it on the tensor
// cores (mma m16n8k16 with the weight rows as the 16-row operand). A thread block owns
// 16 or 32 consecutive output features and splits k across its 8 warps; the warps' fp32
// partial sums meet in shared memory. No atomics: results are deterministic.
//
// Thread rule: launchers only queue work on the given stream; no allocation, no device
// query and no synchronization, so a launch can be captured in a CUDA graph.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "common/base/dtype.h"
#include "common/base/status.h"

namespace tandem::kernels {

// Most rows of x one launch takes (two 8-column mma tiles).
inline constexpr int kSkinnyGemmMaxM = 16;

// Work split of one thread block. kAuto is what callers should use; the explicit ones
// exist so that benchmarks can sweep them on a new GPU.
enum class SkinnyGemmTiling : uint8_t {
  kAuto = 0,
  k16RowsUnroll4 = 1,  // 16 output features per block, 4 k-steps of loads in flight per warp
  k16RowsUnroll8 = 2,  // 16 features, 8 k-steps in flight
  k32RowsUnroll2 = 3,  // 32 features (x fragments reused for two row tiles), 2 k-steps
  k32RowsUnroll4 = 4,  // 32 features, 4 k-steps
};
inline constexpr int kNumSkinnyGemmTilings = 5;
// "auto", "16x4", "16x8", "32x2", "32x4" (features per block x k-steps in flight).
const char* SkinnyGemmTilingName(SkinnyGemmTiling tiling);

struct SkinnyGemmParams {
  const __nv_bfloat16* x = nullptr;     // [m, ldx] row-major, 16-byte aligned; not written
                                        // by anyone while the kernel runs (read-only path)
  const __nv_bfloat16* w = nullptr;     // [n, k] row-major (nn.Linear weight), 16-byte aligned
  const __nv_bfloat16* bias = nullptr;  // [n], or nullptr for no bias
  void* y = nullptr;                    // [m, ldy] row-major, element type y_dtype; must not
                                        // overlap x, w or bias
  DType y_dtype = DType::kBF16;         // kBF16, or kF32 (fp32 logits for the sampler)
  int m = 0;                            // rows of x and y (tokens), 1..kSkinnyGemmMaxM
  int n = 0;                            // output features (rows of w), >= 1, any value
  int k = 0;                            // input features, a multiple of 8 in [8, 2^24]
  int64_t ldx = 0;                      // elements between rows of x; 0 means k. Multiple
                                        // of 8 and >= k (keeps every row 16-byte aligned)
  int64_t ldy = 0;                      // elements between rows of y; 0 means n; >= n
  SkinnyGemmTiling tiling = SkinnyGemmTiling::kAuto;
  bool accumulate = false;  // y += x · wᵀ (+ bias), one fp32 add; y_dtype kF32
  bool silu_mul = false;    // see above: n even, y bf16 [m, n/2], bias in w's row order
};

// OK when `params` is a shape and layout LaunchSkinnyGemm takes (pointers non-null and
// aligned, sizes and strides as documented above), else InvalidArgument naming the
// problem. Callers use it to choose between this kernel and cuBLAS.
Status ValidateSkinnyGemm(const SkinnyGemmParams& params);

// Queues y = x · wᵀ (+ bias) on `stream`. Errors: InvalidArgument as ValidateSkinnyGemm;
// Internal on a launch failure.
Status LaunchSkinnyGemm(const SkinnyGemmParams& params, cudaStream_t stream);

}  // namespace tandem::kernels
