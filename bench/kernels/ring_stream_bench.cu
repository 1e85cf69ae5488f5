// How fast one thread block per SM can stream HBM into a ring of shared-memory stages,
// by the kind of copy that fills the stages: the question behind the fused decode step's
// producer (common/kernels/decode_step.cu). Every block streams its own contiguous share
// of a 4 GiB buffer through a ring of 11 stages of 16 KB (the fused step's ring); 8
// consumer warps wait for each stage, touch it and release it. Fillers:
//   bulk N KB  one producer lane issues cp.async.bulk (1D) copies of N KB each
//   tensor     cp.async.bulk.tensor.2d boxes of 8 rows x 256 bf16 (4 per stage), over the
//              share viewed as a row-major matrix of 4096 columns, stages of 16 rows x 512
//              columns in the order the fused step's GEMV takes them
//   tensor 16  the same with boxes of 16 rows x 256 (2 per stage)
//   cp.async W W producer warps issue 16-byte cp.async copies, arriving on the stage's
//              barrier with cp.async.mbarrier.arrive.noinc; "+hints": with an L2
//              evict_first policy and the L2::256B prefetch hint
// against the streaming-read kernel (plain loads into registers) in the same run.
// Usage: ring_stream_bench
#include <cuda.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <utility>
#include <vector>

#include "common/kernels/streaming_read.h"

namespace {

#define CUDA_OK(expr)                                                                  \
  do {                                                                                 \
    cudaError_t e_ = (expr);                                                           \
    if (e_ != cudaSuccess) {                                                           \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(e_)); \
      std::exit(1);                                                                    \
    }                                                                                  \
  } while (0)

constexpr int kStages = 11;
constexpr int kStageBytes = 16384;
constexpr int kConsumerWarps = 8;
constexpr int kCols = 4096;  // tensor filler: columns of the matrix view

enum Filler : int { kBulk = 0, kTensor = 1, kCpAsync = 2, kCpAsyncHint = 3, kTensor16 = 4 };

struct Args {
  const char* src;
  size_t bytes_per_block;
  int copy_bytes;      // bulk
  int producer_warps;  // cp.async
  unsigned* sink;
};

__device__ __forceinline__ uint32_t Smem(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

__device__ __forceinline__ void Wait(uint64_t* bar, uint32_t parity) {
  for (;;) {
    uint32_t done;
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(Smem(bar)), "r"(parity)
        : "memory");
    if (done) return;
  }
}

template <int kFiller>
__global__ void RingStream(const __grid_constant__ CUtensorMap map, Args a) {
  extern __shared__ __align__(128) unsigned char smem[];
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + kStages * kStageBytes);
  uint64_t* empty = full + kStages;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  constexpr bool kCp = kFiller == kCpAsync || kFiller == kCpAsyncHint;
  const int producers = kCp ? a.producer_warps : 1;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(Smem(&full[s])),
                   "r"(kCp ? 32 * producers : 1));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(Smem(&empty[s])), "r"(kConsumerWarps));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  const int num_stages = static_cast<int>(a.bytes_per_block / kStageBytes);
  const char* src = a.src + blockIdx.x * a.bytes_per_block;
  if (warp >= kConsumerWarps) {  // producers
    const int pw = warp - kConsumerWarps;
    uint32_t phase = 0;
    int slot = 0;
    const int rows_per_block = static_cast<int>(a.bytes_per_block / (kCols * 2));
    for (int n = 0; n < num_stages; ++n) {
      if (lane == 0) Wait(&empty[slot], phase ^ 1);
      __syncwarp();
      unsigned char* dst = smem + slot * kStageBytes;
      if (kFiller == kBulk) {
        if (lane == 0) {
          asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(Smem(&full[slot])),
                       "r"(kStageBytes)
                       : "memory");
        }
        __syncwarp();
        for (int c = lane; c < kStageBytes / a.copy_bytes; c += 32) {
          asm volatile(
              "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                  Smem(dst + c * a.copy_bytes)),
              "l"(src + static_cast<size_t>(n) * kStageBytes + c * a.copy_bytes), "r"(a.copy_bytes),
              "r"(Smem(&full[slot]))
              : "memory");
        }
      } else if (kFiller == kTensor16) {
        if (lane == 0) {
          asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(Smem(&full[slot])),
                       "r"(kStageBytes)
                       : "memory");
          const int row0 = blockIdx.x * rows_per_block + (n / 8) * 16, col0 = (n % 8) * 512;
          for (int b = 0; b < 2; ++b) {
            asm volatile(
                "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], "
                "[%4];" ::"r"(Smem(dst + b * 8192)),
                "l"(&map), "r"(col0 + b * 256), "r"(row0), "r"(Smem(&full[slot]))
                : "memory");
          }
        }
      } else if (kFiller == kTensor) {
        if (lane == 0) {
          asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(Smem(&full[slot])),
                       "r"(kStageBytes)
                       : "memory");
          // Stage n: tile t = n / 8 (16 rows), column chunk n % 8 (512 columns).
          const int row0 = blockIdx.x * rows_per_block + (n / 8) * 16, col0 = (n % 8) * 512;
          for (int b = 0; b < 4; ++b) {
            const int col = col0 + (b & 1) * 256, row = row0 + (b >> 1) * 8;
            asm volatile(
                "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], "
                "[%4];" ::"r"(Smem(dst + b * 4096)),
                "l"(&map), "r"(col), "r"(row), "r"(Smem(&full[slot]))
                : "memory");
          }
        }
      } else {
        const char* s = src + static_cast<size_t>(n) * kStageBytes;
        uint64_t policy = 0;
        if (kFiller == kCpAsyncHint) {
          asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
        }
        for (int v = pw * 32 + lane; v < kStageBytes / 16; v += 32 * producers) {
          if (kFiller == kCpAsyncHint) {
            asm volatile("cp.async.cg.shared.global.L2::cache_hint.L2::256B [%0], [%1], 16, %2;" ::"r"(
                             Smem(dst + v * 16)),
                         "l"(s + v * 16), "l"(policy)
                         : "memory");
          } else {
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(Smem(dst + v * 16)), "l"(s + v * 16)
                         : "memory");
          }
        }
        asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(Smem(&full[slot])) : "memory");
      }
      if (++slot == kStages) {
        slot = 0;
        phase ^= 1;
      }
    }
    return;
  }
  uint32_t phase = 0, acc = 0;
  int slot = 0;
  for (int n = 0; n < num_stages; ++n) {
    Wait(&full[slot], phase);
    acc += reinterpret_cast<const uint32_t*>(smem + slot * kStageBytes)[warp * 32 + lane];
    __syncwarp();
    if (lane == 0) asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(Smem(&empty[slot])) : "memory");
    if (++slot == kStages) {
      slot = 0;
      phase ^= 1;
    }
  }
  if (acc == 0x12345678u) a.sink[blockIdx.x] = acc;  // keeps the reads
}

float MedianMs(cudaStream_t s, const std::function<void()>& fn) {
  cudaEvent_t a, b;
  CUDA_OK(cudaEventCreate(&a));
  CUDA_OK(cudaEventCreate(&b));
  fn();
  fn();
  std::vector<float> ms;
  for (int i = 0; i < 9; ++i) {
    CUDA_OK(cudaEventRecord(a, s));
    fn();
    CUDA_OK(cudaEventRecord(b, s));
    CUDA_OK(cudaEventSynchronize(b));
    float x = 0;
    CUDA_OK(cudaEventElapsedTime(&x, a, b));
    ms.push_back(x);
  }
  CUDA_OK(cudaGetLastError());
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int main() {
  int sms = 0;
  CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const size_t total = size_t{4} << 30;
  // Whole stages and whole 16-row x 4096-column tiles per block.
  const size_t unit = size_t{16} * kCols * 2;
  const size_t per_block = total / sms / unit * unit;
  char* buf = nullptr;
  unsigned* sink = nullptr;
  CUDA_OK(cudaMalloc(&buf, total));
  CUDA_OK(cudaMalloc(&sink, 4096 * 4));
  CUDA_OK(cudaMemset(buf, 1, total));
  cudaStream_t s;
  CUDA_OK(cudaStreamCreate(&s));
  const double bytes = static_cast<double>(per_block) * sms;

  PFN_cuTensorMapEncodeTiled_v12000 encode = nullptr;
  cudaDriverEntryPointQueryResult q;
  CUDA_OK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", reinterpret_cast<void**>(&encode), 12000,
                                           cudaEnableDefault, &q));
  CUtensorMap map{}, map16{};
  const cuuint64_t dims[2] = {kCols, per_block * sms / (kCols * 2)};
  const cuuint64_t strides[1] = {kCols * 2};
  const cuuint32_t box[2] = {256, 8}, box16[2] = {256, 16}, elem_strides[2] = {1, 1};
  for (auto [m, b] : {std::pair{&map, box}, std::pair{&map16, box16}}) {
    if (encode(m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, buf, dims, strides, b, elem_strides,
               CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS) {
      std::fprintf(stderr, "cuTensorMapEncodeTiled failed\n");
      return 1;
    }
  }

  const double read_ms = MedianMs(s, [&] {
    if (!tandem::kernels::LaunchStreamingRead(buf, total, sink, s).ok()) std::exit(1);
  });
  const double read_gbs = total / (read_ms * 1e-3) / 1e9;
  std::printf("streaming read (plain loads): %.0f GB/s\n", read_gbs);
  const int smem = kStages * kStageBytes + 2 * kStages * 8;
  auto run = [&](auto kernel, int warps, Args a, const char* name, const CUtensorMap& m = {}) {
    CUDA_OK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    const double ms = MedianMs(s, [&] { kernel<<<sms, 32 * warps, smem, s>>>(m, a); });
    const double gbs = bytes / (ms * 1e-3) / 1e9;
    std::printf("%-24s %8.0f GB/s  %6.3f of the streaming read\n", name, gbs, gbs / read_gbs);
  };
  Args a{buf, per_block, 1024, 1, sink};
  char name[64];
  for (int kb : {1, 2, 4, 8, 16}) {
    a.copy_bytes = kb * 1024;
    std::snprintf(name, sizeof(name), "bulk %d KB", kb);
    run(RingStream<kBulk>, kConsumerWarps + 1, a, name);
  }
  run(RingStream<kTensor>, kConsumerWarps + 1, a, "tensor 8x256 boxes", map);
  run(RingStream<kTensor16>, kConsumerWarps + 1, a, "tensor 16x256 boxes", map16);
  for (int w : {1, 2, 4}) {
    a.producer_warps = w;
    std::snprintf(name, sizeof(name), "cp.async %d warps", w);
    run(RingStream<kCpAsync>, kConsumerWarps + w, a, name);
    std::snprintf(name, sizeof(name), "cp.async+hints %d warps", w);
    run(RingStream<kCpAsyncHint>, kConsumerWarps + w, a, name);
  }
  return 0;
}
