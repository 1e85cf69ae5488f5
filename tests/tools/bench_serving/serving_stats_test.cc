#include "tools/bench_serving/serving_stats.h"

#include <gtest/gtest.h>

namespace tandem::bench {
namespace {

TEST(ServingStatsTest, NearestRankPercentile) {
  std::vector<double> v = {5, 1, 4, 2, 3, 6, 7, 8, 9, 10};
  EXPECT_DOUBLE_EQ(Percentile(v, 50), 5);
  EXPECT_DOUBLE_EQ(Percentile(v, 90), 9);
  EXPECT_DOUBLE_EQ(Percentile(v, 99), 10);
  EXPECT_DOUBLE_EQ(Percentile(v, 0), 1);
  EXPECT_DOUBLE_EQ(Percentile({}, 50), 0);
}

TEST(ServingStatsTest, TpotThroughputAndGoodput) {
  RequestRecord fast;
  fast.ok = true;
  fast.prompt_tokens = 10;
  fast.completion_tokens = 11;
  fast.ttft_s = 0.1;
  fast.e2e_s = 0.6;  // 10 gaps of 50 ms
  fast.itl_s = std::vector<double>(10, 0.05);
  RequestRecord slow = fast;
  slow.ttft_s = 0.5;
  slow.e2e_s = 2.5;  // 200 ms per token
  RequestRecord failed;
  failed.error = "HTTP 500";
  EXPECT_DOUBLE_EQ(fast.TpotSeconds(), 0.05);

  Summary s = Summarize({fast, slow, failed}, 2.0, GoodputLimits{300, 100});
  EXPECT_EQ(s.completed, 2);
  EXPECT_EQ(s.failed, 1);
  EXPECT_EQ(s.total_completion_tokens, 22);
  EXPECT_DOUBLE_EQ(s.output_throughput, 11);
  EXPECT_DOUBLE_EQ(s.request_throughput, 1);
  EXPECT_DOUBLE_EQ(s.goodput, 0.5);  // only `fast` meets both limits
  EXPECT_EQ(s.within_slo, 1);
  EXPECT_NEAR(s.tpot_ms.p50, 50, 1e-9);
  EXPECT_NEAR(s.tpot_ms.p99, 200, 1e-9);
  EXPECT_NEAR(s.tpot_ms.mean, 125, 1e-9);
  EXPECT_NEAR(s.ttft_ms.mean, 300, 1e-9);
  EXPECT_NE(FormatSummary(s).find("| goodput (req/s) | 0.50 (1 of 2 within the SLO) |"), std::string::npos);
  EXPECT_NE(FormatSummary(s).find("| TTFT mean; p50 / p90 / p99 (ms) | 300.00; 100.00 / 500.00 / 500.00 |"),
            std::string::npos)
      << FormatSummary(s);
}

TEST(ServingStatsTest, RecordJsonLineHasTheTraceFields) {
  RequestRecord r;
  r.ok = true;
  r.send_s = 1.25;
  r.requested_tokens = 32;
  r.completion_tokens = 32;
  r.ttft_s = 0.0125;
  r.e2e_s = 0.5;
  EXPECT_EQ(RecordJsonLine(r, 300),
            "{\"send_s\": 1.250000, \"prompt_tokens\": 300, \"output_tokens\": 32, \"ok\": true, "
            "\"ttft_s\": 0.012500, \"e2e_s\": 0.500000, \"completion_tokens\": 32}\n");
  r.ok = false;
  EXPECT_NE(RecordJsonLine(r, 300).find("\"ok\": false"), std::string::npos);
}

}  // namespace
}  // namespace tandem::bench
