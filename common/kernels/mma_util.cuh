// Tensor-core and cp.async building blocks shared by the attention kernels
// (prefill_attention.cu, decode_attention_impl.cuh): the m16n8k16 bf16 mma, ldmatrix
// fragment loads, bf16 packing and the 16-byte asynchronous global-to-shared copy.
// Private to this folder.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace tandem::kernels::detail {

constexpr float kLog2e = 1.4426950408889634f;

// d += a · b: a is a 16x16 row-major bf16 fragment, b a 16x8 column-major one, d fp32.
__device__ __forceinline__ void Mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Four 8x8 bf16 matrices from shared memory; each lane gives one row address.
__device__ __forceinline__ void LdMatrixX4(uint32_t (&r)[4], const void* smem_row) {
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(smem_row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
}

// The same, transposed (B fragments of V for the P·V mma).
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

__device__ __forceinline__ uint32_t Ld32(const __nv_bfloat16* p) { return *reinterpret_cast<const uint32_t*>(p); }

// 16 bytes global -> shared, bypassing L1.
__device__ __forceinline__ void CpAsync16(void* smem, const void* gmem) {
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
}

// The same with the L2::128B prefetch hint: L2 fetches whole 128-byte lines (a K/V row is
// 128 or 256 bytes, read by 8 or 16 neighbouring threads). Decode attention on the H200,
// same run: 2-3 % more bandwidth on the >= 1 GB shapes (64 x 4K: 277 -> 271 us); L2::256B
// gave nothing. Prefill attention (compute-bound) keeps the plain copy: not measured.
__device__ __forceinline__ void CpAsync16L2(void* smem, const void* gmem) {
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
}

__device__ __forceinline__ void CpAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::); }

// Waits until at most kPending of this thread's committed groups are still in flight.
template <int kPending>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

}  // namespace tandem::kernels::detail
