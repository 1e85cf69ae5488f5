#include "common/kernels/sampling.h"

#include <atomic>
#include <cmath>
#include <cstdint>
#include <string>

#include "common/cuda/cuda_status.h"
#include "common/kernels/kernel_util.cuh"

namespace tandem::kernels {
namespace {

constexpr int kThreads = 1024;

struct ValIdx {
  float v;
  int i;
};

__device__ __forceinline__ ValIdx Better(ValIdx a, ValIdx b) {
  if (b.v > a.v || (b.v == a.v && b.i < a.i)) return b;
  return a;
}

// Block-wide argmax (lowest index among equal maxima). `sv`/`si` hold 32 entries.
__device__ ValIdx BlockArgmax(ValIdx x, float* sv, int* si) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    ValIdx y{__shfl_xor_sync(0xffffffffu, x.v, o), __shfl_xor_sync(0xffffffffu, x.i, o)};
    x = Better(x, y);
  }
  __syncthreads();
  if ((threadIdx.x & 31) == 0) {
    sv[threadIdx.x >> 5] = x.v;
    si[threadIdx.x >> 5] = x.i;
  }
  __syncthreads();
  const int lane = threadIdx.x & 31;
  x = lane < (blockDim.x >> 5) ? ValIdx{sv[lane], si[lane]} : ValIdx{-INFINITY, 0x7fffffff};
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    ValIdx y{__shfl_xor_sync(0xffffffffu, x.v, o), __shfl_xor_sync(0xffffffffu, x.i, o)};
    x = Better(x, y);
  }
  return x;
}

// Exact, order-independent block sum of 64-bit integers. `scratch` holds 32 entries.
__device__ uint64_t BlockSumU64(uint64_t v, unsigned long long* scratch) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, (unsigned long long)v, o);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = v;
  __syncthreads();
  const int lane = threadIdx.x & 31;
  uint64_t t = lane < (blockDim.x >> 5) ? scratch[lane] : 0;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffffu, (unsigned long long)t, o);
  return t;
}

// Order-preserving map of a float to uint32 (larger float -> larger key).
__device__ __forceinline__ uint32_t Key(float f) {
  const uint32_t b = __float_as_uint(f);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

__device__ __forceinline__ uint64_t Mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Fixed-point weight of a logit: exp((l - mx) / T) in units of 2^-32 (exact sums).
__device__ __forceinline__ uint64_t Weight(float l, float mx, float inv_t) {
  return static_cast<uint64_t>(__expf((l - mx) * inv_t) * 4294967296.0f);
}

// Per-warp histograms of the radix select: 256 bins of 64-bit sums per warp, in
// dynamic shared memory (warps keep their own so that a narrow key range, where most
// keys share a digit, contends within a warp only).
constexpr int kRadixBins = 256;
constexpr size_t kHistogramBytes = (kThreads / 32) * kRadixBins * sizeof(unsigned long long);

// Largest key threshold tau with sum_{i: key_i >= tau, key_i >= lo} w_i >= target, where
// w_i = 1 (kMass false) or Weight(); lo when even all keys >= lo fall short. A radix
// select, most significant 8 bits first: each of 4 passes histograms the digit of the
// keys that share the digits chosen so far and picks, from the top, the bin where the
// running sum reaches what is still needed. Integer sums: deterministic, and the same
// threshold as a bisection on the key bits (32 passes) would find.
template <bool kMass>
__device__ uint32_t SelectThreshold(const float* vals, int n, float mx, float inv_t, uint32_t lo, uint64_t target,
                                    unsigned long long* hist) {
  __shared__ unsigned long long s_need;
  __shared__ uint32_t s_digit;
  __shared__ int s_found;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, num_warps = blockDim.x >> 5;
  uint32_t prefix = 0, mask = 0;
  uint64_t need = target;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int i = threadIdx.x; i < num_warps * kRadixBins; i += blockDim.x) hist[i] = 0;
    __syncthreads();
    unsigned long long* mine = hist + warp * kRadixBins;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
      const float l = vals[i];
      const uint32_t k = Key(l);
      if (k >= lo && (k & mask) == prefix) {
        atomicAdd(&mine[(k >> shift) & (kRadixBins - 1)], kMass ? static_cast<unsigned long long>(Weight(l, mx, inv_t))
                                                                 : 1ull);
      }
    }
    __syncthreads();
    if (threadIdx.x < kRadixBins) {  // bin b summed over the warps into row 0 (only this thread touches column b)
      unsigned long long sum = 0;
      for (int w = 0; w < num_warps; ++w) sum += hist[w * kRadixBins + threadIdx.x];
      hist[threadIdx.x] = sum;
    }
    __syncthreads();
    if (warp == 0) {
      // Lane j holds bins 255 - 8j ... 248 - 8j (the top first); an inclusive scan over the lanes.
      unsigned long long chunk = 0;
#pragma unroll
      for (int t = 0; t < 8; ++t) chunk += hist[kRadixBins - 1 - 8 * lane - t];
      unsigned long long inclusive = chunk;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const unsigned long long up = __shfl_up_sync(0xffffffffu, inclusive, o);
        if (lane >= o) inclusive += up;
      }
      const unsigned ballot = __ballot_sync(0xffffffffu, inclusive >= need);
      if (lane == 0) s_found = ballot != 0;
      if (ballot != 0 && lane == __ffs(ballot) - 1) {
        unsigned long long below = inclusive - chunk;  // the sum of the bins above this lane's
        for (int t = 0; t < 8; ++t) {
          const int b = kRadixBins - 1 - 8 * lane - t;
          if (below + hist[b] >= need) {
            s_digit = static_cast<uint32_t>(b);
            s_need = need - below;
            break;
          }
          below += hist[b];
        }
      }
    }
    __syncthreads();
    if (!s_found) return lo;  // fewer than `target` (or less mass) at or above lo: the first pass only
    prefix |= s_digit << shift;
    mask |= static_cast<uint32_t>(kRadixBins - 1) << shift;
    need = s_need;
    __syncthreads();  // s_* are rewritten by the next pass
  }
  return prefix > lo ? prefix : lo;
}

// A row's logits, four in flight per thread (detail::ForEachInRow). Every pass below is
// order-independent (argmax with the lowest index on ties, integer sums, atomics).
template <typename F>
__device__ __forceinline__ void ForEachLogit(const float* row, int vocab, F&& f) {
  detail::ForEachInRow<kThreads>(row, vocab, std::forward<F>(f));
}

__device__ __forceinline__ ValIdx RowArgmax(const float* row, int vocab, float* sv, int* si) {
  ValIdx best{-INFINITY, 0x7fffffff};
  ForEachLogit(row, vocab, [&](float l, int i) { best = Better(best, ValIdx{l, i}); });
  return BlockArgmax(best, sv, si);
}

__global__ void __launch_bounds__(kThreads) ArgmaxKernel(ArgmaxParams p) {
  __shared__ float sv[32];
  __shared__ int si[32];
  const float* row = p.logits + blockIdx.x * p.logits_stride;
  const ValIdx best = RowArgmax(row, p.vocab, sv, si);
  if (threadIdx.x == 0) p.out_tokens[blockIdx.x] = best.i < p.vocab ? best.i : 0;
}

// Candidate set: when top-k or top-p is on, the tokens within a few temperature units of
// the max usually hold the whole kept set; they are compacted into shared memory so the
// threshold searches run there instead of over the vocabulary in global memory.
constexpr int kCandidateCap = 4096;
constexpr int kNumCuts = 6;
__device__ __constant__ float kCutDeltas[kNumCuts] = {2.f, 4.f, 8.f, 12.f, 16.f, 24.f};

__global__ void __launch_bounds__(kThreads) SamplingKernel(SamplingParams p) {
  __shared__ float sv[32];
  __shared__ int si[32];
  __shared__ unsigned long long scratch[32];
  __shared__ float cand_logit[kCandidateCap];
  __shared__ int cand_index[kCandidateCap];
  __shared__ int cand_count;
  extern __shared__ unsigned long long histograms[];  // kHistogramBytes
  const int r = blockIdx.x;
  const float* row = p.logits + r * p.logits_stride;
  const ValIdx best = RowArgmax(row, p.vocab, sv, si);
  const float temperature = p.temperature[r];
  const int top_k = p.top_k[r];
  if (!(temperature > 0.f) || top_k == 1) {
    if (threadIdx.x == 0) p.out_tokens[r] = best.i < p.vocab ? best.i : 0;
    return;
  }
  const float mx = best.v, inv_t = 1.f / temperature;
  const float top_p = p.top_p[r];
  const bool use_top_k = top_k > 0 && top_k < p.vocab;
  const bool use_top_p = top_p < 1.f;

  // Source of the searches below: the whole row, or the compacted candidates.
  const float* vals = row;
  const int* index = nullptr;
  int n = p.vocab;
  uint64_t total = 0;  // mass of the whole row, when the stats pass ran
  if (use_top_k || use_top_p) {
    uint64_t cnt[kNumCuts], mass[kNumCuts];
#pragma unroll
    for (int j = 0; j < kNumCuts; ++j) cnt[j] = mass[j] = 0;
    ForEachLogit(row, p.vocab, [&](float l, int) {
      const uint64_t w = Weight(l, mx, inv_t);
      total += w;
#pragma unroll
      for (int j = 0; j < kNumCuts; ++j)
        if (l >= mx - temperature * kCutDeltas[j]) {
          ++cnt[j];
          mass[j] += w;
        }
    });
    total = BlockSumU64(total, scratch);
    const double target_all = ceil(static_cast<double>(top_p > 0.f ? top_p : 0.f) * static_cast<double>(total));
    int cut = -1;
#pragma unroll
    for (int j = 0; j < kNumCuts; ++j) {
      const uint64_t c = BlockSumU64(cnt[j], scratch);
      const uint64_t m = BlockSumU64(mass[j], scratch);
      // Kept set inside {l >= cut}: top-k needs k of them; top-p alone needs its mass.
      const bool covers = use_top_k ? c >= static_cast<uint64_t>(top_k) : static_cast<double>(m) >= target_all;
      if (cut < 0 && c <= kCandidateCap && covers) cut = j;
    }
    if (cut >= 0) {
      if (threadIdx.x == 0) cand_count = 0;
      __syncthreads();
      const float bound = mx - temperature * kCutDeltas[cut];
      ForEachLogit(row, p.vocab, [&](float l, int i) {
        if (l >= bound) {
          const int pos = atomicAdd(&cand_count, 1);  // order does not matter below
          cand_logit[pos] = l;
          cand_index[pos] = i;
        }
      });
      __syncthreads();
      vals = cand_logit;
      index = cand_index;
      n = cand_count;
    }
  }

  uint32_t lo = 0;
  if (use_top_k) lo = SelectThreshold<false>(vals, n, mx, inv_t, 0, static_cast<uint64_t>(top_k), histograms);
  if (use_top_p) {
    // Mass that top-p is relative to: after top-k, or the whole row. Candidates hold all of
    // the top-k set, but not all of the row's mass.
    uint64_t mass = 0;
    if (use_top_k || index == nullptr) {
      for (int i = threadIdx.x; i < n; i += blockDim.x)
        if (Key(vals[i]) >= lo) mass += Weight(vals[i], mx, inv_t);
      mass = BlockSumU64(mass, scratch);
    } else {
      mass = total;
    }
    const double t = static_cast<double>(top_p > 0.f ? top_p : 0.f) * static_cast<double>(mass);
    uint64_t target = static_cast<uint64_t>(ceil(t));
    if (target < 1) target = 1;
    lo = SelectThreshold<true>(vals, n, mx, inv_t, lo, target, histograms);
  }
  const float min_p = p.min_p[r];
  // p_i >= min_p * p_max  <=>  logit_i >= mx + T * ln(min_p)
  const float min_logit = min_p > 0.f ? mx + temperature * logf(min_p) : -INFINITY;
  const uint64_t stream_key = Mix(Mix(p.seeds[r]) ^ p.offsets[r]);
  ValIdx pick{-INFINITY, 0x7fffffff};
  for (int k = threadIdx.x; k < n; k += blockDim.x) {
    const float l = vals[k];
    if (Key(l) < lo || l < min_logit) continue;
    const int i = index != nullptr ? index[k] : k;
    const uint64_t h = Mix(stream_key ^ static_cast<uint64_t>(i));
    const float u = (static_cast<float>(h >> 40) + 0.5f) * (1.f / 16777216.f);  // (0, 1)
    pick = Better(pick, ValIdx{(l - mx) * inv_t - logf(-logf(u)), i});
  }
  pick = BlockArgmax(pick, sv, si);
  if (threadIdx.x == 0) p.out_tokens[r] = pick.i < p.vocab ? pick.i : best.i;
}

Status ValidateRows(const float* logits, int64_t stride, const int32_t* out, int rows, int vocab) {
  if (logits == nullptr || out == nullptr) return InvalidArgumentError("sampling: null pointer");
  if (rows < 0 || vocab <= 0 || stride < vocab)
    return InvalidArgumentError("sampling: need num_rows >= 0, vocab > 0, stride >= vocab");
  return Status::Ok();
}

}  // namespace

Status LaunchArgmax(const ArgmaxParams& p, cudaStream_t stream) {
  TANDEM_RETURN_IF_ERROR(ValidateRows(p.logits, p.logits_stride, p.out_tokens, p.num_rows, p.vocab));
  if (p.num_rows == 0) return Status::Ok();
  ArgmaxKernel<<<p.num_rows, kThreads, 0, stream>>>(p);
  return cuda::LastLaunchStatus("ArgmaxKernel");
}

Status LaunchSampling(const SamplingParams& p, cudaStream_t stream) {
  TANDEM_RETURN_IF_ERROR(ValidateRows(p.logits, p.logits_stride, p.out_tokens, p.num_rows, p.vocab));
  if (p.temperature == nullptr || p.top_k == nullptr || p.top_p == nullptr || p.min_p == nullptr ||
      p.seeds == nullptr || p.offsets == nullptr)
    return InvalidArgumentError("sampling: null per-row parameter array");
  if (p.num_rows == 0) return Status::Ok();
  // The histograms put the kernel over the default 48 KB of shared memory: allowed once
  // per device (an attribute of the kernel in each device's context).
  static std::atomic<uint64_t> opted_in{0};
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return InternalError("SamplingKernel: cudaGetDevice failed");
  const uint64_t bit = uint64_t{1} << (device & 63);
  if ((opted_in.load(std::memory_order_acquire) & bit) == 0) {
    const cudaError_t err = cudaFuncSetAttribute(SamplingKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                 static_cast<int>(kHistogramBytes));
    if (err != cudaSuccess) {
      return InternalError(std::string("SamplingKernel shared memory: ") + cudaGetErrorString(err));
    }
    opted_in.fetch_or(bit, std::memory_order_release);
  }
  SamplingKernel<<<p.num_rows, kThreads, kHistogramBytes, stream>>>(p);
  return cuda::LastLaunchStatus("SamplingKernel");
}

}  // namespace tandem::kernels
