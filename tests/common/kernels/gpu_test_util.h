// Helpers for the GPU kernel tests: skipping without a GPU, random bf16 data, device
// round trips, poisoning, and tolerance checks against CPU references.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/base/dtype.h"
#include "common/cuda/cuda_status.h"
#include "common/cuda/device_buffer.h"

namespace tandem::testing {

#define TANDEM_SKIP_WITHOUT_GPU()                                                 \
  do {                                                                            \
    if (::tandem::cuda::DeviceCount() == 0)                                       \
      GTEST_SKIP() << "SKIPPED: no CUDA GPU on this machine (gpu-labelled test)"; \
  } while (0)

#define TANDEM_ASSERT_OK(expr)               \
  do {                                       \
    const auto& _st = (expr);                \
    ASSERT_TRUE(_st.ok()) << _st.ToString(); \
  } while (0)

// bf16 bit patterns of N(mean, stddev) draws, and their exact fp32 values.
inline std::vector<uint16_t> RandomBf16(size_t n, std::mt19937& rng, float stddev = 1.f, float mean = 0.f) {
  std::normal_distribution<float> dist(mean, stddev);
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = F32ToBF16(dist(rng));
  return v;
}

inline std::vector<float> ToFloat(const std::vector<uint16_t>& v) {
  std::vector<float> f(v.size());
  for (size_t i = 0; i < v.size(); ++i) f[i] = BF16ToF32(v[i]);
  return f;
}

inline float RoundBf16(float x) { return BF16ToF32(F32ToBF16(x)); }

// Device buffer holding a copy of `host`.
template <typename T>
cuda::DeviceBuffer Upload(const std::vector<T>& host) {
  auto buf = cuda::DeviceBuffer::Allocate(host.size() * sizeof(T));
  TANDEM_CHECK(buf.ok()) << buf.status().ToString();
  if (!host.empty())
    TANDEM_CHECK_OK(cuda::CudaStatus(
        cudaMemcpy(buf->data(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), "upload"));
  return std::move(buf).value();
}

// Device buffer of `count` elements filled with 0xFF bytes (NaN for bf16/fp32, -1 for ints).
template <typename T>
cuda::DeviceBuffer Poisoned(size_t count) {
  auto buf = cuda::DeviceBuffer::Allocate(count * sizeof(T));
  TANDEM_CHECK(buf.ok()) << buf.status().ToString();
  TANDEM_CHECK_OK(cuda::CudaStatus(cudaMemset(buf->data(), 0xff, count * sizeof(T)), "poison"));
  return std::move(buf).value();
}

template <typename T>
std::vector<T> Download(const cuda::DeviceBuffer& buf, size_t count) {
  TANDEM_CHECK_OK(cuda::CudaStatus(cudaDeviceSynchronize(), "sync before download"));
  std::vector<T> host(count);
  if (count)
    TANDEM_CHECK_OK(
        cuda::CudaStatus(cudaMemcpy(host.data(), buf.data(), count * sizeof(T), cudaMemcpyDeviceToHost), "download"));
  return host;
}

inline std::vector<float> DownloadBf16(const cuda::DeviceBuffer& buf, size_t count) {
  return ToFloat(Download<uint16_t>(buf, count));
}

// Every element satisfies |got - ref| <= atol + rtol * |ref| (NaN never passes), and the
// relative L2 error is <= max_rel_l2. Reports the first few mismatches.
inline ::testing::AssertionResult AllClose(const std::vector<float>& got, const std::vector<float>& ref, float atol,
                                           float rtol, double max_rel_l2 = 1e-2) {
  if (got.size() != ref.size()) return ::testing::AssertionFailure() << "size mismatch";
  size_t bad = 0;
  std::string first;
  double err2 = 0, ref2 = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const float d = std::fabs(got[i] - ref[i]);
    err2 += static_cast<double>(got[i] - ref[i]) * (got[i] - ref[i]);
    ref2 += static_cast<double>(ref[i]) * ref[i];
    if (!(d <= atol + rtol * std::fabs(ref[i]))) {
      if (bad++ < 5)
        first += " [" + std::to_string(i) + "] got " + std::to_string(got[i]) + " ref " + std::to_string(ref[i]) + ";";
    }
  }
  const double rel = ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
  if (bad > 0 || !(rel <= max_rel_l2))
    return ::testing::AssertionFailure() << bad << " of " << got.size() << " elements out of tolerance, rel L2 " << rel
                                         << ":" << first;
  return ::testing::AssertionSuccess() << "rel L2 " << rel;
}

}  // namespace tandem::testing
