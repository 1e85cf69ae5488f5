#include "planner/workload.h"

#include <gtest/gtest.h>

#include <cmath>

namespace tandem::planner {
namespace {

TEST(WorkloadTest, SimRandomIsSeededAndUniform) {
  SimRandom a(7), b(7), c(8);
  double sum = 0;
  for (int i = 0; i < 10000; ++i) {
    const double u = a.Uniform();
    EXPECT_EQ(u, b.Uniform());
    ASSERT_GT(u, 0);
    ASSERT_LT(u, 1);
    sum += u;
  }
  EXPECT_NEAR(sum / 10000, 0.5, 0.01);
  EXPECT_NE(SimRandom(7).Next(), c.Next());
}

TEST(WorkloadTest, DistributionsHaveTheirMeansAndClamps) {
  auto mean_of = [](const LengthDistribution& d) {
    double sum = 0;
    const std::vector<int> grid = d.Grid(2000);
    for (int v : grid) sum += v;
    return sum / static_cast<double>(grid.size());
  };
  EXPECT_EQ(mean_of({.kind = LengthKind::kFixed, .mean = 300}), 300);
  EXPECT_NEAR(mean_of({.kind = LengthKind::kUniform, .min = 100, .max = 200}), 150, 0.6);
  EXPECT_NEAR(mean_of({.kind = LengthKind::kNormal, .mean = 1000, .stddev = 100, .min = 1, .max = 100000}), 1000, 1);
  EXPECT_NEAR(mean_of({.kind = LengthKind::kLognormal, .mean = 1000, .stddev = 500, .min = 1, .max = 1000000}), 1000,
              10);
  const LengthDistribution clamped{.kind = LengthKind::kNormal, .mean = 1000, .stddev = 1000, .min = 500, .max = 1200};
  for (int v : clamped.Grid(500)) {
    EXPECT_GE(v, 500);
    EXPECT_LE(v, 1200);
  }
  const LengthDistribution empirical{.kind = LengthKind::kEmpirical, .values = {30, 10, 20}};
  EXPECT_EQ(empirical.Quantile(0.1), 10);
  EXPECT_EQ(empirical.Quantile(0.5), 20);
  EXPECT_EQ(empirical.Quantile(0.9), 30);
  EXPECT_EQ(empirical.Grid(100), (std::vector<int>{10, 20, 30}));
}

TEST(WorkloadTest, BadDistributionsAreNamed) {
  EXPECT_FALSE(ParseLengthKind("zipf").ok());
  EXPECT_EQ(ParseLengthKind("lognormal").value(), LengthKind::kLognormal);
  Status s = LengthDistribution{.kind = LengthKind::kFixed, .mean = 0}.Validate("prompt");
  EXPECT_NE(s.message().find("prompt"), std::string::npos) << s.ToString();
  EXPECT_FALSE((LengthDistribution{.kind = LengthKind::kEmpirical}.Validate("output").ok()));
  EXPECT_FALSE((LengthDistribution{.kind = LengthKind::kUniform, .min = 10, .max = 5}.Validate("output").ok()));
  EXPECT_FALSE((LengthDistribution{.kind = LengthKind::kNormal, .mean = 100, .stddev = -1}.Validate("p").ok()));
}

TEST(WorkloadTest, ParsesATrace) {
  StatusOr<std::vector<TraceRequest>> trace = ParseTrace(
      "{\"timestamp\": 0.0, \"prompt_tokens\": 100, \"output_tokens\": 10}\n\n"
      "{\"arrival_time\": 0.5, \"prompt_tokens\": 200, \"output_tokens\": 20}\n"
      "{\"timestamp\": 2.0, \"prompt_tokens\": 300, \"output_tokens\": 30, \"extra\": 1}\n");
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  ASSERT_EQ(trace->size(), 3u);
  EXPECT_EQ((*trace)[1].prompt_tokens, 200);
  EXPECT_EQ((*trace)[1].arrival_seconds, 0.5);
  Workload w;
  w.trace = *trace;
  w.rate = 1;
  EXPECT_DOUBLE_EQ(w.TraceRate(), 1.0);
  EXPECT_EQ(w.PromptLengths().Grid(10), (std::vector<int>{100, 200, 300}));
}

TEST(WorkloadTest, RefusesBadTracesWithTheLine) {
  const char* bad[] = {
      "",                                                                            // empty
      "{\"timestamp\": 0, \"prompt_tokens\": 1, \"output_tokens\": 1}\n",            // one request
      "{\"timestamp\": 0, \"prompt_tokens\": 1, \"output_tokens\": 1}\nnot json\n",  // malformed
      "{\"timestamp\": 1, \"prompt_tokens\": 1, \"output_tokens\": 1}\n{\"timestamp\": 0, \"prompt_tokens\": 1, "
      "\"output_tokens\": 1}\n",                                                     // decreasing
      "{\"timestamp\": 0, \"prompt_tokens\": 0, \"output_tokens\": 1}\n{\"timestamp\": 1, \"prompt_tokens\": 1, "
      "\"output_tokens\": 1}\n",                                                     // zero tokens
      "{\"timestamp\": 0, \"output_tokens\": 1}\n{\"timestamp\": 1, \"prompt_tokens\": 1, \"output_tokens\": 1}\n",
      "[1, 2]\n[3, 4]\n",
      "{\"timestamp\": 0, \"prompt_tokens\": 1, \"output_tokens\": 1}\n{\"timestamp\": 0, \"prompt_tokens\": 1, "
      "\"output_tokens\": 1}\n",                                                     // no span
  };
  for (const char* text : bad) {
    StatusOr<std::vector<TraceRequest>> trace = ParseTrace(text, "t.jsonl");
    EXPECT_FALSE(trace.ok()) << text;
    if (!trace.ok()) {
      EXPECT_NE(trace.status().message().find("t.jsonl"), std::string::npos);
    }
  }
  StatusOr<std::vector<TraceRequest>> malformed =
      ParseTrace("{\"timestamp\": 0, \"prompt_tokens\": 1, \"output_tokens\": 1}\nnot json\n", "t.jsonl");
  EXPECT_NE(malformed.status().message().find("line 2"), std::string::npos) << malformed.status().ToString();
  EXPECT_EQ(LoadTrace("/nonexistent/trace.jsonl").status().code(), StatusCode::kNotFound);
}

TEST(WorkloadTest, ValidatesRatesAndSlos) {
  Workload w{.rate = 1, .prompt = {.mean = 100}, .output = {.mean = 10}};
  EXPECT_TRUE(w.Validate().ok());
  w.rate = 0;
  EXPECT_FALSE(w.Validate().ok());
  w.rate = 1;
  w.prefix_hit_rate = 1;
  EXPECT_FALSE(w.Validate().ok());
  EXPECT_TRUE(Slo{}.Validate().ok());
  EXPECT_FALSE((Slo{.ttft_seconds = 0}.Validate().ok()));
  EXPECT_FALSE((Slo{.attainment = 1.0}.Validate().ok()));
}

TEST(WorkloadTest, UncachedTokensAreWholeBlocksAndNeverZero) {
  EXPECT_EQ(UncachedPromptTokens(1000, 0, 16), 1000);
  EXPECT_EQ(UncachedPromptTokens(1000, 0.5, 16), 1000 - 31 * 16);  // 500 tokens = 31.25 blocks
  EXPECT_EQ(UncachedPromptTokens(32, 0.99, 16), 16);                // the last block is left to compute
  EXPECT_EQ(UncachedPromptTokens(33, 0.99, 16), 1);
}

}  // namespace
}  // namespace tandem::planner
