// The bucket bounds of metric_names.h: exact lists, and every vLLM bound kept.
#include "common/metrics/metric_names.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace tandem::metrics {
namespace {

bool Contains(const std::vector<double>& bounds, double bound) {
  return std::find(bounds.begin(), bounds.end(), bound) != bounds.end();
}

TEST(MetricNamesTest, TokenBucketsFollowTheirSeries) {
  EXPECT_EQ(TokenCountBuckets(64), (std::vector<double>{1, 2, 5, 10, 20, 50}));
  EXPECT_EQ(TokenCountBuckets(100), (std::vector<double>{1, 2, 5, 10, 20, 50, 100}));
  EXPECT_EQ(TokenCountBuckets(1), (std::vector<double>{1}));
  EXPECT_EQ(IterationTokenBuckets(100), (std::vector<double>{1, 8, 16, 32, 64, 100}));
  EXPECT_EQ(IterationTokenBuckets(64), (std::vector<double>{1, 8, 16, 32, 64}));
  EXPECT_EQ(IterationTokenBuckets(1), (std::vector<double>{1}));
}

TEST(MetricNamesTest, LatencyBucketsKeepVllmBoundsAndResolveMilliseconds) {
  // vLLM's inter-token latency bounds start at 10 ms; an H200 decodes a small model faster.
  const std::vector<double> itl = InterTokenLatencyBuckets();
  for (double vllm :
       {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0}) {
    EXPECT_TRUE(Contains(itl, vllm)) << vllm;
  }
  const std::vector<double> latency = RequestLatencyBuckets();
  for (double vllm : {0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
                      30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}) {
    EXPECT_TRUE(Contains(latency, vllm)) << vllm;
  }
  for (const std::vector<double>& bounds : {itl, latency, TimeToFirstTokenBuckets(), TransferSecondsBuckets()}) {
    EXPECT_LE(bounds.front(), 0.001);
    EXPECT_TRUE(std::is_sorted(bounds.begin(), bounds.end()));
    EXPECT_EQ(std::adjacent_find(bounds.begin(), bounds.end()), bounds.end());
  }
}

}  // namespace
}  // namespace tandem::metrics
