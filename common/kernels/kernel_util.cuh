// Device helpers shared by the kernels in this folder (not a public header).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <utility>

#include "common/cuda/cuda_status.h"

namespace tandem::kernels::detail {

// Programmatic dependent launch (PDL, sm_90+). A kernel launched with LaunchPdl may be
// scheduled while the kernel before it in the stream is still running; the hardware
// only guarantees that grid's completion (and memory visibility) once
// WaitForPreviousKernel returns. So every such kernel calls it before its first access
// to memory another kernel writes or reads. What may come first: weights (nobody writes
// them), and a forward step's metadata (positions, slots, block tables, context lengths):
// host copies write it before the step's first kernel, a plain launch, and every kernel
// here lets the next one start only after its own wait (so when kernel N starts, kernel
// N - 2 and all before it have completed). AllowNextKernel lets the next PDL kernel be
// scheduled early (its blocks then wait in WaitForPreviousKernel, or prefetch weights). Both are no-ops below sm_90 and
// when the launch had no PDL attribute. Transitive: a kernel that waited has seen every
// earlier kernel complete.
__device__ __forceinline__ void WaitForPreviousKernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void AllowNextKernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// kernel<<<grid, block, smem, stream>>>(args...) with the PDL attribute. REQUIRES: the
// kernel calls WaitForPreviousKernel as described above, and the stream's previous
// operation is a kernel (a PDL launch orders itself after the previous kernel only).
template <typename... Params, typename... Args>
Status LaunchPdl(const char* name, void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                 Args&&... args) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = attr;
  config.numAttrs = 1;
  cudaError_t err = cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
  if (err != cudaSuccess) {
    cudaGetLastError();  // not sticky: clear it so later launches are not blamed
    return cuda::CudaStatus(err, name);
  }
  return cuda::LastLaunchStatus(name);
}

// Row (block, kv: 0 K / 1 V, head, offset in the block) of one layer of the paged KV cache,
// [num_blocks, 2, num_kv_heads, block_size, head_dim] (common/kv_cache/kv_layout.h).
template <typename T>
__device__ __forceinline__ T* KvCacheRow(T* layer, int64_t block, int kv, int head, int offset, int num_kv_heads,
                                         int block_size, int head_dim) {
  return layer + ((block * 2 + kv) * num_kv_heads + head) * static_cast<int64_t>(block_size) * head_dim +
         static_cast<int64_t>(offset) * head_dim;
}

__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float WarpMax(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over the block; `scratch` holds at least 32 floats. All threads get the result.
__device__ __forceinline__ float BlockSum(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int num_warps = (blockDim.x + 31) >> 5;
  v = WarpSum(v);
  __syncthreads();  // scratch may still be read from a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float t = lane < num_warps ? scratch[lane] : 0.f;
  return WarpSum(t);
}

// 8 bf16 values in one 16-byte vector.
union Bf16x8 {
  uint4 u;
  __nv_bfloat162 h2[4];
};

__device__ __forceinline__ void Bf16x8ToFloat(const uint4& u, float (&f)[8]) {
  Bf16x8 v;
  v.u = u;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float2 p = __bfloat1622float2(v.h2[i]);
    f[2 * i] = p.x;
    f[2 * i + 1] = p.y;
  }
}

__device__ __forceinline__ uint4 FloatToBf16x8(const float (&f)[8]) {
  Bf16x8 v;
#pragma unroll
  for (int i = 0; i < 4; ++i) v.h2[i] = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
  return v.u;
}

__device__ __forceinline__ float RoundToBf16(float v) { return __bfloat162float(__float2bfloat16_rn(v)); }

// silu(gate) * up, silu(x) = x / (1 + exp(-x)): the one formula of every SiLU-mul here.
__device__ __forceinline__ float SiluMul(float gate, float up) { return gate / (1.f + __expf(-gate)) * up; }

// Calls f(x, index) for this thread's share of one row of `vocab` floats, read by a block
// of kBlockThreads threads: float4 loads, four in flight per thread, where the row is
// 16-byte aligned (a block reading a whole row alone goes as fast as the loads it keeps in
// flight), one float at a time otherwise. The order of the calls is unspecified.
template <int kBlockThreads, typename F>
__device__ __forceinline__ void ForEachInRow(const float* row, int vocab, F&& f) {
  if ((reinterpret_cast<uintptr_t>(row) & 15) == 0) {
    const int n4 = vocab / 4;
    const float4* row4 = reinterpret_cast<const float4*>(row);
#pragma unroll 4
    for (int i = threadIdx.x; i < n4; i += kBlockThreads) {
      const float4 v = row4[i];
      f(v.x, 4 * i);
      f(v.y, 4 * i + 1);
      f(v.z, 4 * i + 2);
      f(v.w, 4 * i + 3);
    }
    for (int i = 4 * n4 + threadIdx.x; i < vocab; i += kBlockThreads) f(row[i], i);
  } else {
    for (int i = threadIdx.x; i < vocab; i += kBlockThreads) f(row[i], i);
  }
}

}  // namespace tandem::kernels::detail
