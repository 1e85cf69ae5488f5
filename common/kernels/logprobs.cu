#include "common/kernels/logprobs.h"

#include <cmath>

#include "common/cuda/cuda_status.h"

namespace tandem::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

// (logit, id) ordered as the top list is: larger logit first, lower id on ties.
__device__ __forceinline__ bool Ahead(float v, int i, float w, int j) { return v > w || (v == w && i < j); }

// One block per row. Pass over the row: each thread keeps an online (max, Σ exp) of
// its strided elements and its own top list, sorted, in registers. Then the block
// reduces the sums, and the top lists merge by repeated block-wide picks of the best
// list head (the thread that owned it pops it).
__global__ void __launch_bounds__(kThreads) LogprobsKernel(LogprobsParams p) {
  const int row = blockIdx.x;
  const int k = p.num_top[row];
  if (k < 0) return;
  const float* logits = p.logits + static_cast<int64_t>(row) * p.logits_stride;
  const float t = p.temperature != nullptr ? p.temperature[row] : 1.f;
  const float inv_t = t > 0.f ? 1.f / t : 1.f;

  float top_v[kMaxLogprobsTop];
  int top_i[kMaxLogprobsTop];
#pragma unroll
  for (int j = 0; j < kMaxLogprobsTop; ++j) {
    top_v[j] = -INFINITY;
    top_i[j] = 0x7fffffff;
  }
  float worst_v = -INFINITY;  // the list's last wanted entry (top_v[k - 1], top_i[k - 1])
  int worst_i = 0x7fffffff;
  float m = -INFINITY, s = 0.f;
  for (int i = threadIdx.x; i < p.vocab; i += kThreads) {
    float x = logits[i];
    if (isnan(x)) x = -INFINITY;
    if (x != -INFINITY) {
      const float y = x * inv_t;
      if (y > m) {
        s = s * __expf(m - y) + 1.f;
        m = y;
      } else {
        s += __expf(y - m);
      }
    }
    if (k > 0 && Ahead(x, i, worst_v, worst_i)) {
      float v = x;
      int id = i;
#pragma unroll
      for (int j = 0; j < kMaxLogprobsTop; ++j) {
        if (j < k && Ahead(v, id, top_v[j], top_i[j])) {
          const float tv = top_v[j];
          const int ti = top_i[j];
          top_v[j] = v;
          top_i[j] = id;
          v = tv;
          id = ti;
        }
        if (j == k - 1) {  // constant indices keep the list in registers
          worst_v = top_v[j];
          worst_i = top_i[j];
        }
      }
    }
  }

  // log Σ exp over the block: combine (m, s) pairs.
  __shared__ float sm[kWarps], ss[kWarps];
  __shared__ float pick_v[kWarps];
  __shared__ int pick_i[kWarps];
  __shared__ float log_z_shared;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
    const float mm = fmaxf(m, m2);
    s = (mm == -INFINITY) ? 0.f : s * __expf(m - mm) + s2 * __expf(m2 - mm);
    m = mm;
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) {
    sm[warp] = m;
    ss[warp] = s;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float bm = -INFINITY, bs = 0.f;
    for (int w = 0; w < kWarps; ++w) {
      const float mm = fmaxf(bm, sm[w]);
      bs = (mm == -INFINITY) ? 0.f : bs * __expf(bm - mm) + ss[w] * __expf(sm[w] - mm);
      bm = mm;
    }
    log_z_shared = bm + logf(bs);
  }
  __syncthreads();
  const float log_z = log_z_shared;
  LogprobEntry* out = p.out + static_cast<int64_t>(row) * (1 + p.max_top);
  auto logprob = [&](float x) { return (isnan(x) || x == -INFINITY) ? -INFINITY : x * inv_t - log_z; };
  if (threadIdx.x == 0) {
    const int token = p.tokens[row];
    out[0] = token >= 0 && token < p.vocab ? LogprobEntry{token, logprob(logits[token])} : LogprobEntry{-1, -INFINITY};
  }

  // Merge: k rounds, each picks the best head among the threads' lists.
  for (int r = 0; r < k; ++r) {
    float v = top_v[0];
    int id = top_i[0];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float v2 = __shfl_xor_sync(0xffffffffu, v, o);
      const int i2 = __shfl_xor_sync(0xffffffffu, id, o);
      if (Ahead(v2, i2, v, id)) {
        v = v2;
        id = i2;
      }
    }
    if (lane == 0) {
      pick_v[warp] = v;
      pick_i[warp] = id;
    }
    __syncthreads();
    v = pick_v[0];
    id = pick_i[0];
    for (int w = 1; w < kWarps; ++w) {
      if (Ahead(pick_v[w], pick_i[w], v, id)) {
        v = pick_v[w];
        id = pick_i[w];
      }
    }
    __syncthreads();  // every thread has read the picks before the next round writes them
    if (top_i[0] == id) {  // ids are distinct: only the owner pops
#pragma unroll
      for (int j = 0; j + 1 < kMaxLogprobsTop; ++j) {
        top_v[j] = top_v[j + 1];
        top_i[j] = top_i[j + 1];
      }
      top_v[kMaxLogprobsTop - 1] = -INFINITY;
      top_i[kMaxLogprobsTop - 1] = 0x7fffffff;
    }
    if (threadIdx.x == 0) out[1 + r] = LogprobEntry{id, logprob(v)};
  }
}

}  // namespace

Status LaunchLogprobs(const LogprobsParams& p, cudaStream_t stream) {
  if (p.num_rows < 0 || p.vocab <= 0 || p.logits_stride < p.vocab) {
    return InvalidArgumentError("Logprobs: bad sizes");
  }
  if (p.max_top < 0 || p.max_top > kMaxLogprobsTop) return InvalidArgumentError("Logprobs: max_top out of range");
  if (p.num_rows == 0) return Status::Ok();
  if (p.logits == nullptr || p.tokens == nullptr || p.num_top == nullptr || p.out == nullptr) {
    return InvalidArgumentError("Logprobs: null pointer");
  }
  LogprobsKernel<<<p.num_rows, kThreads, 0, stream>>>(p);
  return cuda::LastLaunchStatus("LogprobsKernel");
}

}  // namespace tandem::kernels
