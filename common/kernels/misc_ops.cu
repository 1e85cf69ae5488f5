#include "common/kernels/misc_ops.h"

#include <algorithm>

#include "common/cuda/cuda_status.h"
#include "common/kernels/kernel_util.cuh"

namespace tandem::kernels {
namespace {

constexpr int kMaxPerLane = 8;  // head_dim <= 256 = 32 lanes x 8

// Grid (num_q_heads, max_q_len, num_seqs), one warp. Lane holds dims lane + 32 r.
__global__ void GenericAttentionKernel(GenericAttentionParams p) {
  const int h = blockIdx.x, i = blockIdx.y, s = blockIdx.z, lane = threadIdx.x;
  const int q_begin = p.query_start[s], n = p.query_start[s + 1] - q_begin;
  if (i >= n) return;
  const int ctx = p.context_lens[s];
  const int visible = ctx - n + i + 1;
  const int kvh = h / (p.num_q_heads / p.num_kv_heads);
  const int hd = p.head_dim;
  const int64_t row = q_begin + i;
  const __nv_bfloat16* q = p.q + (row * p.num_q_heads + h) * hd;
  float qv[kMaxPerLane], acc[kMaxPerLane];
#pragma unroll
  for (int r = 0; r < kMaxPerLane; ++r) {
    const int d = lane + 32 * r;
    qv[r] = d < hd ? __bfloat162float(q[d]) * p.softmax_scale : 0.f;
    acc[r] = 0.f;
  }
  const int64_t half_block = static_cast<int64_t>(p.num_kv_heads) * p.block_size * hd;
  const int32_t* table = p.block_tables + static_cast<int64_t>(s) * p.max_blocks_per_seq;
  float m = -INFINITY, l = 0.f;
  for (int j = 0; j < visible; ++j) {
    const int64_t block = table[j / p.block_size];
    const __nv_bfloat16* k =
        p.kv_cache + block * 2 * half_block + (static_cast<int64_t>(kvh) * p.block_size + j % p.block_size) * hd;
    const __nv_bfloat16* v = k + half_block;
    float dot = 0.f;
#pragma unroll
    for (int r = 0; r < kMaxPerLane; ++r) {
      const int d = lane + 32 * r;
      if (d < hd) dot += qv[r] * __bfloat162float(k[d]);
    }
    const float score = detail::WarpSum(dot);
    const float m_new = fmaxf(m, score);
    const float corr = __expf(m - m_new), w = __expf(score - m_new);
    l = l * corr + w;
#pragma unroll
    for (int r = 0; r < kMaxPerLane; ++r) {
      const int d = lane + 32 * r;
      if (d < hd) acc[r] = acc[r] * corr + w * __bfloat162float(v[d]);
    }
    m = m_new;
  }
  __nv_bfloat16* out = p.out + (row * p.num_q_heads + h) * hd;
#pragma unroll
  for (int r = 0; r < kMaxPerLane; ++r) {
    const int d = lane + 32 * r;
    if (d < hd) out[d] = __float2bfloat16(l > 0.f ? acc[r] / l : 0.f);
  }
}

// One block per output row, copied in units of T (uint4 when everything is 16-byte aligned).
template <typename T>
__global__ void GatherRowsKernel(const T* src, int64_t num_src_rows, size_t row_units, const int32_t* indices, T* out) {
  detail::WaitForPreviousKernel();
  detail::AllowNextKernel();
  const int i = blockIdx.x;
  const int32_t r = indices[i];
  T* dst = out + static_cast<size_t>(i) * row_units;
  const bool ok = r >= 0 && r < num_src_rows;
  const T* from = src + (ok ? static_cast<size_t>(r) : 0) * row_units;
  for (size_t b = threadIdx.x; b < row_units; b += blockDim.x) dst[b] = ok ? from[b] : T{};
}

template <typename T>
__global__ void AddBiasKernel(T* y, const __nv_bfloat16* bias, int64_t rows, int64_t cols) {
  detail::WaitForPreviousKernel();
  detail::AllowNextKernel();
  const int64_t total = rows * cols;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float b = __bfloat162float(bias[e % cols]);
    if constexpr (sizeof(T) == 4) {
      y[e] += b;
    } else {
      y[e] = __float2bfloat16(__bfloat162float(y[e]) + b);
    }
  }
}

}  // namespace

Status LaunchGenericAttention(const GenericAttentionParams& p, cudaStream_t stream) {
  if (p.q == nullptr || p.kv_cache == nullptr || p.block_tables == nullptr || p.query_start == nullptr ||
      p.context_lens == nullptr || p.out == nullptr)
    return InvalidArgumentError("GenericAttention: null pointer");
  if (p.num_seqs < 0 || p.num_q_heads <= 0 || p.num_kv_heads <= 0 || p.num_q_heads % p.num_kv_heads != 0 ||
      p.max_q_len < 0 || p.max_blocks_per_seq <= 0 || p.block_size <= 0)
    return InvalidArgumentError("GenericAttention: bad head counts or sizes");
  if (p.head_dim <= 0 || p.head_dim > 32 * kMaxPerLane)
    return InvalidArgumentError("GenericAttention: head_dim must be in [1, 256]");
  if (p.num_seqs == 0 || p.max_q_len == 0) return Status::Ok();
  if (p.num_seqs > 65535 || p.max_q_len > 65535) return InvalidArgumentError("GenericAttention: grid too large");
  dim3 grid(p.num_q_heads, p.max_q_len, p.num_seqs);
  GenericAttentionKernel<<<grid, 32, 0, stream>>>(p);
  return cuda::LastLaunchStatus("GenericAttentionKernel");
}

Status LaunchGatherRows(const void* src, int64_t num_src_rows, size_t row_bytes, const int32_t* indices,
                        int num_indices, void* out, cudaStream_t stream) {
  if (src == nullptr || indices == nullptr || out == nullptr || num_indices < 0 || row_bytes == 0)
    return InvalidArgumentError("GatherRows: null pointer or bad sizes");
  if (num_indices == 0) return Status::Ok();
  if (row_bytes % 16 == 0 && reinterpret_cast<uintptr_t>(src) % 16 == 0 && reinterpret_cast<uintptr_t>(out) % 16 == 0) {
    return detail::LaunchPdl("GatherRowsKernel", GatherRowsKernel<uint4>, num_indices, 256, 0, stream,
                             static_cast<const uint4*>(src), num_src_rows, row_bytes / 16, indices,
                             static_cast<uint4*>(out));
  }
  return detail::LaunchPdl("GatherRowsKernel", GatherRowsKernel<unsigned char>, num_indices, 256, 0, stream,
                           static_cast<const unsigned char*>(src), num_src_rows, row_bytes, indices,
                           static_cast<unsigned char*>(out));
}

Status LaunchAddBias(void* y, bool y_is_f32, const __nv_bfloat16* bias, int64_t rows, int64_t cols,
                     cudaStream_t stream) {
  if (y == nullptr || bias == nullptr || rows < 0 || cols <= 0)
    return InvalidArgumentError("AddBias: null pointer or bad sizes");
  if (rows == 0) return Status::Ok();
  const int64_t blocks = std::min<int64_t>((rows * cols + 255) / 256, 4096);
  if (y_is_f32) {
    return detail::LaunchPdl("AddBiasKernel", AddBiasKernel<float>, static_cast<int>(blocks), 256, 0, stream,
                             static_cast<float*>(y), bias, rows, cols);
  }
  return detail::LaunchPdl("AddBiasKernel", AddBiasKernel<__nv_bfloat16>, static_cast<int>(blocks), 256, 0, stream,
                           static_cast<__nv_bfloat16*>(y), bias, rows, cols);
}

}  // namespace tandem::kernels
