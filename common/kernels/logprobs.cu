#include "common/kernels/logprobs.h"

#include <cmath>
#include <cstdint>

#include "common/cuda/cuda_status.h"
#include "common/kernels/kernel_util.cuh"

namespace tandem::kernels {
namespace {

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
constexpr int kMaxCandidates = 2048;  // shared memory: 16 KiB

// (logit, id) ordered as the top list is: larger logit first, lower id on ties.
__device__ __forceinline__ bool Ahead(float v, int i, float w, int j) { return v > w || (v == w && i < j); }

struct Scan {
  float m = -INFINITY, s = 0.f;  // online max and Σ exp(y - m) of y = x / temperature
  float best_v = -INFINITY;      // this thread's best (x, id)
  int best_i = 0x7fffffff;
};

__device__ __forceinline__ float Clean(float x) { return isnan(x) ? -INFINITY : x; }

// Calls f(x, id) for this thread's elements of the row (NaN as -inf), float4 loads
// where the row is aligned (detail::ForEachInRow).
template <typename F>
__device__ __forceinline__ void ForEach(const float* row, int vocab, F&& f) {
  detail::ForEachInRow<kThreads>(row, vocab, [&](float x, int id) { f(Clean(x), id); });
}

// One block per row.
//  1. One pass: log Σ exp(x / t) (online max and sum) and each thread's best element.
//  2. The k-th best of the threads' bests is a lower bound of the row's k-th best (k
//     distinct elements reach it): a second pass (the row is in L2 now) collects the
//     elements at or ahead of it, usually a few dozen, and ranks them by counting.
//  3. More candidates than fit (a row of ties): k exact rounds over the whole row, each
//     taking the best element behind the previous pick.
__global__ void __launch_bounds__(kThreads) LogprobsKernel(LogprobsParams p) {
  const int row = blockIdx.x;
  const int k = p.num_top[row];
  if (k < 0) return;
  const float* logits = p.logits + static_cast<int64_t>(row) * p.logits_stride;
  const float t = p.temperature != nullptr ? p.temperature[row] : 1.f;
  const float inv_t = t > 0.f ? 1.f / t : 1.f;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;

  Scan sc;
  ForEach(logits, p.vocab, [&](float x, int id) {
    if (x != -INFINITY) {
      const float y = x * inv_t;
      if (y > sc.m) {
        sc.s = sc.s * __expf(sc.m - y) + 1.f;
        sc.m = y;
      } else {
        sc.s += __expf(y - sc.m);
      }
    }
    if (Ahead(x, id, sc.best_v, sc.best_i)) {
      sc.best_v = x;
      sc.best_i = id;
    }
  });

  __shared__ float sm[kWarps], ss[kWarps];
  __shared__ float log_z_shared;
  __shared__ float cand_v[kMaxCandidates];
  __shared__ int cand_i[kMaxCandidates];
  __shared__ int num_cand;
  __shared__ float th_v;
  __shared__ int th_i;
  float m = sc.m, s = sc.s;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
    const float mm = fmaxf(m, m2);
    s = (mm == -INFINITY) ? 0.f : s * __expf(m - mm) + s2 * __expf(m2 - mm);
    m = mm;
  }
  if (lane == 0) {
    sm[warp] = m;
    ss[warp] = s;
  }
  // The threads' bests, for the threshold (kThreads <= kMaxCandidates).
  cand_v[threadIdx.x] = sc.best_v;
  cand_i[threadIdx.x] = sc.best_i;
  if (threadIdx.x == 0) {
    num_cand = 0;
    th_v = -INFINITY;  // fewer than k threads hold elements (a tiny vocabulary): every element qualifies
    th_i = 0x7fffffff;
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
  // The k-th best of the threads' bests: the one with exactly k - 1 ahead of it
  // (ids are distinct; threads without elements all hold (-inf, max), behind every element).
  if (k > 0) {
    int ahead = 0;
    for (int j = 0; j < kThreads; ++j) ahead += Ahead(cand_v[j], cand_i[j], sc.best_v, sc.best_i);
    if (ahead == k - 1 && sc.best_i != 0x7fffffff) {
      th_v = sc.best_v;
      th_i = sc.best_i;
    }
  }
  __syncthreads();
  const float log_z = log_z_shared;
  LogprobEntry* out = p.out + static_cast<int64_t>(row) * (1 + p.max_top);
  auto logprob = [&](float x) { return x == -INFINITY ? -INFINITY : x * inv_t - log_z; };
  if (threadIdx.x == 0) {
    const int token = p.tokens[row];
    out[0] = token >= 0 && token < p.vocab ? LogprobEntry{token, logprob(Clean(logits[token]))}
                                           : LogprobEntry{-1, -INFINITY};
  }
  if (k == 0) return;

  const float tv = th_v;
  const int ti = th_i;
  ForEach(logits, p.vocab, [&](float x, int id) {
    if (Ahead(tv, ti, x, id)) return;  // behind the threshold
    const int slot = atomicAdd(&num_cand, 1);
    if (slot < kMaxCandidates) {
      cand_v[slot] = x;
      cand_i[slot] = id;
    }
  });
  __syncthreads();
  const int n = num_cand;
  if (n <= kMaxCandidates) {
    // Rank by counting: candidate c goes to place `ahead` when that is < k.
    for (int c = threadIdx.x; c < n; c += kThreads) {
      const float v = cand_v[c];
      const int id = cand_i[c];
      int ahead = 0;
      for (int j = 0; j < n; ++j) ahead += Ahead(cand_v[j], cand_i[j], v, id);
      if (ahead < k) out[1 + ahead] = LogprobEntry{id, logprob(v)};
    }
    return;
  }
  // Degenerate rows: k exact passes, each the best element behind the previous pick.
  float prev_v = INFINITY;
  int prev_i = -1;
  for (int r = 0; r < k; ++r) {
    float bv = -INFINITY;
    int bi = 0x7fffffff;
    bool found = false;
    ForEach(logits, p.vocab, [&](float x, int id) {
      if (!Ahead(prev_v, prev_i, x, id)) return;  // at or ahead of the previous pick
      if (!found || Ahead(x, id, bv, bi)) {
        bv = x;
        bi = id;
        found = true;
      }
    });
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float v2 = __shfl_xor_sync(0xffffffffu, bv, o);
      const int i2 = __shfl_xor_sync(0xffffffffu, bi, o);
      if (Ahead(v2, i2, bv, bi)) {
        bv = v2;
        bi = i2;
      }
    }
    __syncthreads();  // the previous round's readers are done with cand_*
    if (lane == 0) {
      cand_v[warp] = bv;
      cand_i[warp] = bi;
    }
    __syncthreads();
    bv = cand_v[0];
    bi = cand_i[0];
    for (int w = 1; w < kWarps; ++w) {
      if (Ahead(cand_v[w], cand_i[w], bv, bi)) {
        bv = cand_v[w];
        bi = cand_i[w];
      }
    }
    if (threadIdx.x == 0) out[1 + r] = LogprobEntry{bi, logprob(bv)};
    prev_v = bv;
    prev_i = bi;
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
