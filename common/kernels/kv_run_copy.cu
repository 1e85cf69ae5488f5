#include "common/kernels/kv_run_copy.h"

#include "common/cuda/cuda_status.h"

namespace tandem::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kInFlight = 4;              // 16-byte loads per thread before its stores
constexpr int64_t kTileBytes = 32 << 10;  // bytes per thread block

// The launch's argument: the caller's runs plus where each run's tiles end.
// Instantiated for a few capacities so a short list does not ship 28 KB of
// parameters with every launch.
template <int kCapacity>
struct RunCopyArgs {
  int count;
  const std::byte* src[kCapacity];
  std::byte* dst[kCapacity];
  int64_t bytes[kCapacity];
  uint32_t tile_end[kCapacity];  // exclusive prefix end of each run's tiles
};
static_assert(sizeof(RunCopyArgs<kRunCopyMaxRuns>) <= 32764, "kernel parameters are limited to 32764 bytes");

__device__ int64_t Min64(int64_t a, int64_t b) { return a < b ? a : b; }

__device__ void CopyBytes(const std::byte* s, std::byte* d, int64_t n) {
  for (int64_t i = threadIdx.x; i < n; i += kThreads) d[i] = s[i];
}

__device__ void CopyVectors(const uint4* s, uint4* d, int64_t n) {
  for (int64_t base = threadIdx.x; base < n; base += kThreads * kInFlight) {
    uint4 v[kInFlight];
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      const int64_t j = base + u * kThreads;
      if (j < n) v[u] = s[j];
    }
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      const int64_t j = base + u * kThreads;
      if (j < n) d[j] = v[u];
    }
  }
}

// Grid: one thread block per 32 KiB tile of the concatenated runs.
template <int kCapacity>
__global__ void __launch_bounds__(kThreads) RunCopyKernel(const __grid_constant__ RunCopyArgs<kCapacity> a) {
  const uint32_t tile = blockIdx.x;
  int lo = 0, hi = a.count - 1;  // first run whose tile_end > tile (uniform across the block)
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (a.tile_end[mid] > tile) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  const int r = lo;
  const uint32_t first = r == 0 ? 0 : a.tile_end[r - 1];
  const int64_t offset = static_cast<int64_t>(tile - first) * kTileBytes;
  const int64_t n = Min64(kTileBytes, a.bytes[r] - offset);
  const std::byte* s = a.src[r] + offset;
  std::byte* d = a.dst[r] + offset;
  const uintptr_t sa = reinterpret_cast<uintptr_t>(s), da = reinterpret_cast<uintptr_t>(d);
  if (((sa ^ da) & 15) != 0) {  // never co-aligned: bytes
    CopyBytes(s, d, n);
    return;
  }
  const int64_t head = Min64(n, static_cast<int64_t>((16 - (sa & 15)) & 15));
  CopyBytes(s, d, head);
  const int64_t vectors = (n - head) / 16;
  CopyVectors(reinterpret_cast<const uint4*>(s + head), reinterpret_cast<uint4*>(d + head), vectors);
  const int64_t done = head + vectors * 16;
  CopyBytes(s + done, d + done, n - done);
}

template <int kCapacity>
Status Launch(const RunCopyParams& p, cudaStream_t stream) {
  RunCopyArgs<kCapacity> args;
  args.count = 0;
  uint64_t tiles = 0;
  for (int i = 0; i < p.count; ++i) {
    if (p.bytes[i] == 0) continue;
    tiles += (static_cast<uint64_t>(p.bytes[i]) + kTileBytes - 1) / kTileBytes;
    if (tiles > 0x7fffffffu) return InvalidArgumentError("RunCopy: more than 2^31 tiles in one launch");
    const int j = args.count++;
    args.src[j] = p.src[i];
    args.dst[j] = p.dst[i];
    args.bytes[j] = p.bytes[i];
    args.tile_end[j] = static_cast<uint32_t>(tiles);
  }
  if (tiles == 0) return Status::Ok();
  RunCopyKernel<kCapacity><<<static_cast<unsigned>(tiles), kThreads, 0, stream>>>(args);
  return cuda::LastLaunchStatus("RunCopyKernel");
}

}  // namespace

Status LaunchRunCopy(const RunCopyParams& p, cudaStream_t stream) {
  if (p.count < 0 || p.count > kRunCopyMaxRuns) return InvalidArgumentError("RunCopy: run count out of range");
  for (int i = 0; i < p.count; ++i) {
    if (p.bytes[i] < 0) return InvalidArgumentError("RunCopy: negative run length");
    if (p.bytes[i] > 0 && (p.src[i] == nullptr || p.dst[i] == nullptr)) {
      return InvalidArgumentError("RunCopy: null run pointer");
    }
  }
  if (p.count <= 32) return Launch<32>(p, stream);
  if (p.count <= 256) return Launch<256>(p, stream);
  return Launch<kRunCopyMaxRuns>(p, stream);
}

}  // namespace tandem::kernels
