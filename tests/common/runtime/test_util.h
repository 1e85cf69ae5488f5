// Helpers for runtime tests: random host data, host <-> CpuBackend copies,
// and the max relative error used everywhere (max|a - b| / max|b| over a row).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "common/runtime/cpu_backend.h"

namespace tandem::runtime::testing {

inline std::vector<float> RandomVector(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

// Allocates an F32/I32 buffer of `shape` on `backend` holding `values`.
template <typename T>
Buffer MakeBuffer(CpuBackend& backend, const std::vector<int64_t>& shape, const std::vector<T>& values) {
  DType dtype = std::is_same_v<T, float> ? DType::kF32 : DType::kI32;
  StatusOr<Buffer> b = backend.Allocate(dtype, shape);
  TANDEM_CHECK(b.ok()) << b.status().ToString();
  TANDEM_CHECK_OK(backend.CopyToDevice(values.data(), values.size() * sizeof(T), b->tensor()));
  return std::move(b).value();
}

inline std::vector<float> ToHost(CpuBackend& backend, const Tensor& t) {
  std::vector<float> v(t.NumElements());
  TANDEM_CHECK_OK(backend.CopyToHost(t, v.data(), v.size() * sizeof(float)));
  return v;
}

// max|ours - ref| / max|ref| (ref all zero: the absolute error).
inline double MaxRelError(std::span<const float> ours, std::span<const float> ref) {
  TANDEM_CHECK_EQ(ours.size(), ref.size());
  double max_diff = 0.0, max_ref = 0.0;
  for (size_t i = 0; i < ref.size(); ++i) {
    max_diff = std::max(max_diff, std::abs(static_cast<double>(ours[i]) - ref[i]));
    max_ref = std::max(max_ref, std::abs(static_cast<double>(ref[i])));
  }
  return max_ref > 0.0 ? max_diff / max_ref : max_diff;
}

}  // namespace tandem::runtime::testing
