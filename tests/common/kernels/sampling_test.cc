// Argmax and the GPU sampler against CPU references: exact argmax, determinism per seed,
// filtered tokens never drawn, and empirical frequencies matching the filtered distribution.
#include "common/kernels/sampling.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "tests/common/kernels/gpu_test_util.h"

namespace tandem::kernels {
namespace {

TEST(ArgmaxTest, MatchesCpuIncludingTies) {
  TANDEM_SKIP_WITHOUT_GPU();
  const int rows = 5, vocab = 128256;
  const int64_t stride = vocab + 64;
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.f, 3.f);
  std::vector<float> logits(rows * stride);
  for (auto& x : logits) x = dist(rng);
  logits[1 * stride + 700] = 100.f;  // tie: the lower index wins
  logits[1 * stride + 90000] = 100.f;
  logits[2 * stride + vocab - 1] = 50.f;
  logits[3 * stride + vocab + 3] = 1000.f;  // beyond vocab: must be ignored
  auto d = testing::Upload(logits);
  auto out = testing::Poisoned<int32_t>(rows);
  TANDEM_ASSERT_OK(LaunchArgmax({d.as<float>(), stride, out.as<int32_t>(), rows, vocab}, nullptr));
  auto got = testing::Download<int32_t>(out, rows);
  for (int r = 0; r < rows; ++r) {
    const float* row = logits.data() + r * stride;
    const int want = static_cast<int>(std::max_element(row, row + vocab) - row);
    EXPECT_EQ(got[r], want) << "row " << r;
  }
  EXPECT_EQ(got[1], 700);
}

struct Filter {
  float temperature;
  int top_k;
  float top_p;
  float min_p;
};

// Filtered, renormalized distribution, straight from the documented semantics.
std::vector<double> RefDistribution(const std::vector<float>& logits, const Filter& f) {
  const int n = static_cast<int>(logits.size());
  const double mx = *std::max_element(logits.begin(), logits.end());
  std::vector<double> w(n);
  for (int i = 0; i < n; ++i) w[i] = std::exp((logits[i] - mx) / f.temperature);
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return logits[a] > logits[b]; });
  std::vector<bool> keep(n, true);
  int kept = n;
  if (f.top_k > 0 && f.top_k < n) {
    for (int r = f.top_k; r < n; ++r) keep[order[r]] = false;
    kept = f.top_k;
  }
  if (f.top_p < 1.f) {
    double mass = 0;
    for (int r = 0; r < kept; ++r) mass += w[order[r]];
    double cum = 0;
    for (int r = 0; r < kept; ++r) {
      if (cum >= f.top_p * mass) keep[order[r]] = false;
      cum += w[order[r]];
    }
  }
  for (int i = 0; i < n; ++i)
    if (f.min_p > 0.f && w[i] < f.min_p) keep[i] = false;  // w is p / p_max
  std::vector<double> p(n, 0.0);
  double z = 0;
  for (int i = 0; i < n; ++i)
    if (keep[i]) z += w[i];
  for (int i = 0; i < n; ++i)
    if (keep[i]) p[i] = w[i] / z;
  return p;
}

class SamplingTest : public ::testing::TestWithParam<Filter> {};

TEST_P(SamplingTest, MatchesFilteredDistribution) {
  TANDEM_SKIP_WITHOUT_GPU();
  const Filter f = GetParam();
  const int vocab = 40, rows = 40000;
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.f, 1.5f);
  std::vector<float> row(vocab);
  for (auto& x : row) x = dist(rng);
  std::vector<float> logits;
  logits.reserve(static_cast<size_t>(rows) * vocab);
  for (int r = 0; r < rows; ++r) logits.insert(logits.end(), row.begin(), row.end());
  std::vector<float> temp(rows, f.temperature), top_p(rows, f.top_p), min_p(rows, f.min_p);
  std::vector<int32_t> top_k(rows, f.top_k);
  std::vector<uint64_t> seeds(rows), offsets(rows, 3);
  for (int r = 0; r < rows; ++r) seeds[r] = 1000003ull * r + 17;
  auto dl = testing::Upload(logits), dt = testing::Upload(temp), dk = testing::Upload(top_k);
  auto dp = testing::Upload(top_p), dm = testing::Upload(min_p), ds = testing::Upload(seeds);
  auto doff = testing::Upload(offsets);
  auto out = testing::Poisoned<int32_t>(rows), out2 = testing::Poisoned<int32_t>(rows);
  SamplingParams p{dl.as<float>(), vocab,          out.as<int32_t>(), dt.as<float>(),      dk.as<int32_t>(),
                   dp.as<float>(), dm.as<float>(), ds.as<uint64_t>(), doff.as<uint64_t>(), rows,
                   vocab};
  TANDEM_ASSERT_OK(LaunchSampling(p, nullptr));
  p.out_tokens = out2.as<int32_t>();
  TANDEM_ASSERT_OK(LaunchSampling(p, nullptr));
  auto got = testing::Download<int32_t>(out, rows);
  auto again = testing::Download<int32_t>(out2, rows);
  EXPECT_EQ(got, again) << "same seeds and offsets must give the same tokens";
  const auto ref = RefDistribution(row, f);
  std::vector<int> counts(vocab, 0);
  for (int t : got) {
    ASSERT_GE(t, 0);
    ASSERT_LT(t, vocab);
    ASSERT_GT(ref[t], 0.0) << "token " << t << " was filtered out but drawn";
    ++counts[t];
  }
  double tv = 0;
  for (int i = 0; i < vocab; ++i) {
    const double freq = static_cast<double>(counts[i]) / rows;
    const double sigma = std::sqrt(ref[i] * (1 - ref[i]) / rows);
    EXPECT_LE(std::fabs(freq - ref[i]), 5 * sigma + 1e-3) << "token " << i;
    tv += std::fabs(freq - ref[i]) / 2;
  }
  EXPECT_LT(tv, 0.02);
}

INSTANTIATE_TEST_SUITE_P(Filters, SamplingTest,
                         ::testing::Values(Filter{0.7f, 0, 1.f, 0.f}, Filter{1.f, 5, 1.f, 0.f},
                                           Filter{1.f, 0, 0.8f, 0.f}, Filter{1.3f, 0, 1.f, 0.1f},
                                           Filter{1.f, 10, 0.9f, 0.05f}));

TEST(SamplingTest, GreedyRowsAndLargeVocab) {
  TANDEM_SKIP_WITHOUT_GPU();
  const int rows = 4, vocab = 128256;
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.f, 2.f);
  std::vector<float> logits(static_cast<size_t>(rows) * vocab);
  for (auto& x : logits) x = dist(rng);
  // rows 0,1: greedy (temperature 0, top_k 1); rows 2,3: top-k 20 / top-p 0.5 samples.
  std::vector<float> temp{0.f, 0.8f, 1.f, 1.f}, top_p{1.f, 1.f, 1.f, 0.5f}, min_p(rows, 0.f);
  std::vector<int32_t> top_k{0, 1, 20, 0};
  std::vector<uint64_t> seeds{1, 2, 3, 4}, offsets{0, 0, 0, 0};
  auto dl = testing::Upload(logits), dt = testing::Upload(temp), dk = testing::Upload(top_k);
  auto dp = testing::Upload(top_p), dm = testing::Upload(min_p), ds = testing::Upload(seeds);
  auto doff = testing::Upload(offsets);
  auto out = testing::Poisoned<int32_t>(rows);
  SamplingParams p{dl.as<float>(), vocab,          out.as<int32_t>(), dt.as<float>(),      dk.as<int32_t>(),
                   dp.as<float>(), dm.as<float>(), ds.as<uint64_t>(), doff.as<uint64_t>(), rows,
                   vocab};
  TANDEM_ASSERT_OK(LaunchSampling(p, nullptr));
  auto got = testing::Download<int32_t>(out, rows);
  for (int r = 0; r < 2; ++r) {
    const float* row = logits.data() + static_cast<size_t>(r) * vocab;
    EXPECT_EQ(got[r], std::max_element(row, row + vocab) - row);
  }
  {  // top-k 20: the token is among the 20 largest logits.
    const float* row = logits.data() + 2ull * vocab;
    std::vector<float> sorted(row, row + vocab);
    std::nth_element(sorted.begin(), sorted.begin() + 19, sorted.end(), std::greater<float>());
    EXPECT_GE(row[got[2]], sorted[19]);
  }
  {  // top-p 0.5: the drawn token's probability mass rank stays inside the nucleus.
    const float* row = logits.data() + 3ull * vocab;
    const float mx = *std::max_element(row, row + vocab);
    double z = 0, above = 0;
    for (int i = 0; i < vocab; ++i) {
      const double w = std::exp(row[i] - mx);
      z += w;
      if (row[i] > row[got[3]]) above += w;
    }
    EXPECT_LT(above / z, 0.5);
  }
}

}  // namespace
}  // namespace tandem::kernels
