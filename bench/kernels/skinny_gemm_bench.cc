// Skinny bf16 GEMM (LaunchSkinnyGemm) against cuBLAS (cuda::GemmBf16, the call the CUDA
// backend makes) on the Llama-3-8B decode shapes at m = 1, 2, 4, 8, 16 rows, as a ratio
// to a streaming-read kernel measured in the same run.
//
// Each timed batch cycles through several copies of the weight (>= 256 MB in all, so
// the 50-60 MB L2 cannot hold them): µs per call = batch time / calls, median of 7
// batches. GB/s counts the weight bytes only (x and y are < 0.5 MB). "diff" is
// max |ours - cuBLAS| / max |cuBLAS| on the last call (a sanity check; the test
// compares against an fp64 reference). A tiling sweep comes first, the main table last.
//
//   skinny_gemm_bench [--quick] [--no-sweep] [--shape qkv|o_proj|gate_up|down|lm_head] [--m M]
// (--shape and --m pick one shape / one row count, e.g. to profile one kernel with ncu)
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include "bench/gpu/fill_random.h"
#include "bench/gpu/streaming_read.h"
#include "bench/kernels/bench_util.h"
#include "common/base/dtype.h"
#include "common/cuda/cuda_status.h"
#include "common/cuda/device_buffer.h"
#include "common/cuda/gemm.h"
#include "common/cuda/stream.h"
#include "common/kernels/skinny_gemm.h"

namespace tandem {
namespace {

using bench::Alloc;
using cuda::DeviceBuffer;

// Median over `batches` of (batch milliseconds / calls), after one untimed batch.
// `fn(i)` queues call i of a batch.
double MedianUsPerCall(const std::function<void(int)>& fn, int calls, cudaStream_t stream, int batches = 7) {
  auto start = cuda::CudaEvent::Create(), stop = cuda::CudaEvent::Create();
  BENCH_OK(start.status());
  BENCH_OK(stop.status());
  std::vector<double> us;
  for (int b = -1; b < batches; ++b) {
    BENCH_OK(start->Record(stream));
    for (int i = 0; i < calls; ++i) fn(i);
    BENCH_OK(stop->Record(stream));
    BENCH_OK(stop->Synchronize());
    auto ms = cuda::CudaEvent::ElapsedMs(*start, *stop);
    BENCH_OK(ms.status());
    if (b >= 0) us.push_back(*ms * 1e3 / calls);
  }
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

struct Shape {
  const char* name;
  int n, k;
  DType y_dtype;  // the LM head writes fp32 logits, as the backend does
};

// The weight copies of one shape and the buffers every call of it uses.
struct Operands {
  std::vector<DeviceBuffer> w;
  DeviceBuffer x, y_ours, y_cublas, sink;
  size_t w_bytes = 0;
  int calls = 0;  // calls per timed batch
};

Operands MakeOperands(const Shape& s, cudaStream_t stream) {
  Operands o;
  o.w_bytes = static_cast<size_t>(s.n) * s.k * 2;
  const size_t min_total = size_t{256} << 20;
  const size_t copies = std::max<size_t>(2, (min_total + o.w_bytes - 1) / o.w_bytes);
  for (size_t c = 0; c < copies; ++c) {
    o.w.push_back(Alloc(o.w_bytes));
    // nn.Linear-like scale; the values do not change the speed, only the check.
    BENCH_OK(bench::LaunchFillRandomBf16(o.w.back().as<__nv_bfloat16>(), o.w_bytes / 2, 11 + c, 0.f, 0.05f, stream));
  }
  const size_t y_bytes = static_cast<size_t>(kernels::kSkinnyGemmMaxM) * s.n * 4;
  o.x = Alloc(static_cast<size_t>(kernels::kSkinnyGemmMaxM) * s.k * 2);
  BENCH_OK(bench::LaunchFillRandomBf16(o.x.as<__nv_bfloat16>(), o.x.size_bytes() / 2, 7, 0.f, 1.f, stream));
  o.y_ours = Alloc(y_bytes);
  o.y_cublas = Alloc(y_bytes);
  o.sink = Alloc(4096 * 16);
  // ~4 GB of weights per batch, between 10 and 200 calls.
  o.calls = static_cast<int>(std::clamp<size_t>((size_t{4} << 30) / o.w_bytes, 10, 200));
  BENCH_OK(cuda::CudaStatus(cudaStreamSynchronize(stream), "fill"));
  return o;
}

kernels::SkinnyGemmParams OursParams(const Shape& s, const Operands& o, int m, int copy) {
  kernels::SkinnyGemmParams p;
  p.x = o.x.as<__nv_bfloat16>();
  p.w = o.w[copy].as<__nv_bfloat16>();
  p.y = o.y_ours.data();
  p.y_dtype = s.y_dtype;
  p.m = m;
  p.n = s.n;
  p.k = s.k;
  return p;
}

double TimeOurs(const Shape& s, const Operands& o, int m, kernels::SkinnyGemmTiling tiling, cudaStream_t stream) {
  return MedianUsPerCall(
      [&](int i) {
        auto p = OursParams(s, o, m, i % static_cast<int>(o.w.size()));
        p.tiling = tiling;
        BENCH_OK(kernels::LaunchSkinnyGemm(p, stream));
      },
      o.calls, stream);
}

double TimeCublas(const Shape& s, const Operands& o, int m, const cuda::CublasHandle& handle, cudaStream_t stream) {
  return MedianUsPerCall(
      [&](int i) {
        cuda::GemmParams g;
        g.x = o.x.data();
        g.w = o.w[i % o.w.size()].data();
        g.y = o.y_cublas.data();
        g.m = m;
        g.n = s.n;
        g.k = s.k;
        g.y_dtype = s.y_dtype;
        BENCH_OK(cuda::GemmBf16(handle, g, stream));
      },
      o.calls, stream);
}

// max |ours - cuBLAS| / max |cuBLAS| over the m x n outputs of the last calls.
double RelativeDiff(const Shape& s, const Operands& o, int m) {
  const size_t count = static_cast<size_t>(m) * s.n;
  const size_t elem = s.y_dtype == DType::kF32 ? 4 : 2;
  std::vector<uint8_t> a(count * elem), b(count * elem);
  BENCH_OK(cuda::CudaStatus(cudaDeviceSynchronize(), "sync"));
  BENCH_OK(cuda::CudaStatus(cudaMemcpy(a.data(), o.y_ours.data(), a.size(), cudaMemcpyDeviceToHost), "ours"));
  BENCH_OK(cuda::CudaStatus(cudaMemcpy(b.data(), o.y_cublas.data(), b.size(), cudaMemcpyDeviceToHost), "cub"));
  auto value = [&](const std::vector<uint8_t>& v, size_t i) {
    if (elem == 2) return BF16ToF32(static_cast<uint16_t>(v[2 * i] | (v[2 * i + 1] << 8)));
    float f;
    std::memcpy(&f, &v[4 * i], 4);
    return f;
  };
  double max_diff = 0, max_ref = 0;
  for (size_t i = 0; i < count; ++i) {
    const double x = value(a, i), y = value(b, i);
    max_diff = std::max(max_diff, std::isfinite(x) ? std::fabs(x - y) : INFINITY);
    max_ref = std::max(max_ref, std::fabs(y));
  }
  return max_ref > 0 ? max_diff / max_ref : max_diff;
}

int Main(int argc, char** argv) {
  bool quick = false, sweep = true;
  const char* only_shape = nullptr;
  int only_m = 0;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick")) quick = true;
    if (!std::strcmp(argv[i], "--no-sweep")) sweep = false;
    if (!std::strcmp(argv[i], "--shape") && i + 1 < argc) only_shape = argv[++i];
    if (!std::strcmp(argv[i], "--m") && i + 1 < argc) only_m = std::atoi(argv[++i]);
  }
  if (cuda::DeviceCount() == 0) {
    std::printf("skinny_gemm_bench: no CUDA GPU, nothing to measure\n");
    return 0;
  }
  cudaDeviceProp prop{};
  BENCH_OK(cuda::CudaStatus(cudaGetDeviceProperties(&prop, 0), "props"));
  auto stream = cuda::CudaStream::Create();
  BENCH_OK(stream.status());
  auto handle = cuda::CublasHandle::Create();
  BENCH_OK(handle.status());
  const cudaStream_t st = stream->get();

  double read_gbs = 0;
  {
    const size_t bytes = size_t{2} << 30;
    DeviceBuffer a = Alloc(bytes), sink = Alloc(4096 * 16);
    BENCH_OK(bench::LaunchFillRandomBf16(a.as<__nv_bfloat16>(), bytes / 2, 1, 0.f, 1.f, st));
    const double us =
        MedianUsPerCall([&](int) { BENCH_OK(bench::LaunchStreamingRead(a.data(), bytes, sink.data(), st)); }, 3, st);
    read_gbs = bytes / (us * 1e-6) / 1e9;
  }
  std::printf("device %s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);
  std::printf("ceiling: streaming read %.0f GB/s (2 GiB)\n", read_gbs);

  std::vector<Shape> shapes = {{"qkv", 6144, 4096, DType::kBF16},
                               {"o_proj", 4096, 4096, DType::kBF16},
                               {"gate_up", 28672, 4096, DType::kBF16},
                               {"down", 4096, 14336, DType::kBF16},
                               {"lm_head", 128256, 4096, DType::kF32}};
  std::vector<int> ms = {1, 2, 4, 8, 16};
  if (quick) ms = {1, 16};
  if (only_m > 0) ms = {only_m};
  if (only_shape != nullptr)
    shapes.erase(std::remove_if(shapes.begin(), shapes.end(),
                                [&](const Shape& s) { return std::strcmp(s.name, only_shape) != 0; }),
                 shapes.end());

  struct Row {
    const Shape* shape;
    int m;
    double ours_us, cublas_us, read_same_us, diff;
  };
  std::vector<Row> rows;
  if (sweep) {
    std::printf("\ntiling sweep, us per call (features per block x k-steps in flight; auto picks one)\n");
    std::printf("%-8s %-3s", "shape", "m");
    for (int t = 0; t < kernels::kNumSkinnyGemmTilings; ++t)
      std::printf(" %9s", kernels::SkinnyGemmTilingName(static_cast<kernels::SkinnyGemmTiling>(t)));
    std::printf("\n");
  }
  for (const Shape& s : shapes) {
    Operands o = MakeOperands(s, st);
    // The streaming-read kernel over the same bytes, same rotation: the ceiling at this size.
    const double read_same_us = MedianUsPerCall(
        [&](int i) { BENCH_OK(bench::LaunchStreamingRead(o.w[i % o.w.size()].data(), o.w_bytes, o.sink.data(), st)); },
        o.calls, st);
    for (int m : ms) {
      if (sweep) {
        std::printf("%-8s %-3d", s.name, m);
        for (int t = 0; t < kernels::kNumSkinnyGemmTilings; ++t)
          std::printf(" %9.2f", TimeOurs(s, o, m, static_cast<kernels::SkinnyGemmTiling>(t), st));
        std::printf("\n");
      }
      Row r{&s, m, 0, 0, read_same_us, 0};
      r.cublas_us = TimeCublas(s, o, m, *handle, st);
      r.ours_us = TimeOurs(s, o, m, kernels::SkinnyGemmTiling::kAuto, st);
      r.diff = RelativeDiff(s, o, m);
      rows.push_back(r);
    }
  }

  std::printf("\nskinny GEMM vs cuBLAS, weights rotated beyond L2; ratios to the %.0f GB/s streaming read\n", read_gbs);
  std::printf("%-8s %-6s %-6s %-3s %-8s %-9s %-6s %-6s %-9s %-6s %-7s %-7s %-8s\n", "shape", "n", "k", "m", "W_MB",
              "ours_us", "GB/s", "/read", "cublas_us", "/read", "speedup", "/rd_sz", "diff");
  for (const Row& r : rows) {
    const double bytes = static_cast<double>(r.shape->n) * r.shape->k * 2;
    const double ours = bytes / (r.ours_us * 1e-6) / 1e9, cublas = bytes / (r.cublas_us * 1e-6) / 1e9;
    const double same = bytes / (r.read_same_us * 1e-6) / 1e9;
    std::printf("%-8s %-6d %-6d %-3d %-8.1f %-9.2f %-6.0f %-6.3f %-9.2f %-6.3f %-7.2f %-7.3f %-8.1e\n", r.shape->name,
                r.shape->n, r.shape->k, r.m, bytes / 1e6, r.ours_us, ours, ours / read_gbs, r.cublas_us,
                cublas / read_gbs, r.cublas_us / r.ours_us, ours / same, r.diff);
  }
  std::printf(
      "speedup = cuBLAS time / ours; /rd_sz = ours over the streaming read of the same bytes "
      "(same rotation); lm_head writes fp32 logits\n");
  return 0;
}

}  // namespace
}  // namespace tandem

int main(int argc, char** argv) { return tandem::Main(argc, argv); }
