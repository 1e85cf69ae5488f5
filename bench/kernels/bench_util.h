// Helpers shared by the kernel benchmarks: exit with a message on any error
// (a benchmark has no caller to hand a Status to), and device allocation.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "common/base/status.h"
#include "common/cuda/device_buffer.h"

#define BENCH_OK(expr)                                                                                      \
  do {                                                                                                      \
    const auto& _s = (expr);                                                                                \
    if (!::tandem::internal::GetStatus(_s).ok()) {                                                          \
      std::fprintf(stderr, "%s failed: %s\n", #expr, ::tandem::internal::GetStatus(_s).ToString().c_str()); \
      std::exit(1);                                                                                         \
    }                                                                                                       \
  } while (0)

namespace tandem::bench {

// `bytes` of device memory, or exit.
inline cuda::DeviceBuffer Alloc(size_t bytes) {
  auto b = cuda::DeviceBuffer::Allocate(bytes);
  BENCH_OK(b.status());
  return std::move(b).value();
}

}  // namespace tandem::bench
