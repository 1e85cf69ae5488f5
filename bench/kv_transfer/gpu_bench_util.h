// What the GPU KV transfer benchmark's parts share: host-clock timing, device
// and pinned buffers, the helper process (this binary re-executed with
// --child), the Llama-3-8B KV shape, and the summary table.
#pragma once

#include <cuda_runtime_api.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "common/base/check.h"
#include "common/kv_cache/kv_layout.h"

namespace tandem::bench {

using SteadyClock = std::chrono::steady_clock;

inline double Seconds(SteadyClock::time_point a, SteadyClock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}
inline double Gbps(uint64_t bytes, double seconds) { return static_cast<double>(bytes) / seconds / 1e9; }

#define BENCH_CUDA(expr) TANDEM_CHECK((expr) == cudaSuccess) << #expr << ": " << cudaGetErrorString(cudaGetLastError())

// The KV of one prompt of the Llama-3-8B shape: 32 layers, 8 KV heads of 128,
// 16-token blocks, bf16: one (layer, block) is 64 KiB.
inline kv_cache::KvLayout Llama8BLayout(int num_blocks) {
  kv_cache::KvLayout l;
  l.num_layers = 32;
  l.num_kv_heads = 8;
  l.head_dim = 128;
  l.block_size = 16;
  l.num_blocks = num_blocks;
  return l;
}
inline constexpr int kPromptBlocks = 256;  // 4096 tokens
inline constexpr int kPoolBlocks = 512;    // each side's pool: a scattered prompt has room to scatter

// The first `n` of a permutation of 0..total-1 (seeded).
inline std::vector<int32_t> Scattered(int n, int total, uint32_t seed) {
  std::vector<int32_t> all(total);
  std::iota(all.begin(), all.end(), 0);
  std::mt19937 rng(seed);
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(n);
  return all;
}

inline std::string SelfPath() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  TANDEM_CHECK(n > 0);
  return std::string(buf, n);
}

// Device memory on `device`, filled with `fill`.
struct DeviceMemory {
  DeviceMemory(int device, size_t bytes, int fill = 0) : size(bytes) {
    BENCH_CUDA(cudaSetDevice(device));
    BENCH_CUDA(cudaMalloc(&ptr, bytes));
    BENCH_CUDA(cudaMemset(ptr, fill, bytes));
  }
  ~DeviceMemory() { cudaFree(ptr); }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  std::byte* bytes() const { return static_cast<std::byte*>(ptr); }
  void* ptr = nullptr;
  size_t size;
};

// One line of the final table.
struct Row {
  std::string path;
  uint64_t bytes = 0;
  double gbps = 0;
  std::string ceiling;  // what it is compared to
  double ceiling_gbps = 0;
  std::string target;  // e.g. ">= 0.80", or empty
};

inline void PrintTable(const std::vector<Row>& rows) {
  std::printf("\n== summary (GB/s = bytes moved once / host wall time; ratio = GB/s / ceiling) ==\n");
  std::printf("%-44s | %9s | %9s | %-28s | %6s | %s\n", "path", "bytes", "GB/s", "ceiling (GB/s)", "ratio", "target");
  for (const Row& r : rows) {
    char bytes[32], ceiling[64], ratio[16];
    std::snprintf(bytes, sizeof(bytes), "%.0f MiB", static_cast<double>(r.bytes) / (1 << 20));
    if (r.ceiling_gbps > 0) {
      std::snprintf(ceiling, sizeof(ceiling), "%s %.1f", r.ceiling.c_str(), r.ceiling_gbps);
      std::snprintf(ratio, sizeof(ratio), "%.2f", r.gbps / r.ceiling_gbps);
    } else {
      std::snprintf(ceiling, sizeof(ceiling), "-");
      std::snprintf(ratio, sizeof(ratio), "-");
    }
    std::printf("%-44s | %9s | %9.1f | %-28s | %6s | %s\n", r.path.c_str(), bytes, r.gbps, ceiling, ratio,
                r.target.c_str());
  }
}

}  // namespace tandem::bench
