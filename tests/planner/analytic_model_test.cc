#include "planner/analytic_model.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tests/planner/sample_profile.h"

namespace tandem::planner {
namespace {

using testing::SampleProfile;

CostModel SampleCost(const Profile& p = SampleProfile()) {
  StatusOr<CostModel> cost = CostModel::Build(p, p, "");
  EXPECT_TRUE(cost.ok()) << cost.status().ToString();
  return *cost;
}

Workload Fixed(double rate, int prompt, int output) {
  return {.rate = rate,
          .prompt = {.kind = LengthKind::kFixed, .mean = static_cast<double>(prompt)},
          .output = {.kind = LengthKind::kFixed, .mean = static_cast<double>(output)}};
}

TEST(AnalyticModelTest, PollaczekKhinchineMatchesMD1AndMM1) {
  // M/D/1, λ = 0.5, S = 1: W = ρ·S / (2(1 − ρ)) = 0.5.
  EXPECT_DOUBLE_EQ(MG1WaitSeconds(0.5, 1.0, 1.0), 0.5);
  // M/D/1, λ = 8, S = 0.1: ρ = 0.8, W = 0.8·0.1 / 0.4 = 0.2.
  EXPECT_NEAR(MG1WaitSeconds(8, 0.1, 0.01), 0.2, 1e-12);
  // M/M/1, λ = 0.5, mean 1 (E[S²] = 2): W = ρ / (μ − λ) = 1.
  EXPECT_DOUBLE_EQ(MG1WaitSeconds(0.5, 1.0, 2.0), 1.0);
  EXPECT_TRUE(std::isinf(MG1WaitSeconds(1.0, 1.0, 1.0)));
}

TEST(AnalyticModelTest, WaitQuantilesOfTheExponentialTail) {
  // W = 0 w.p. 0.5, else exponential of mean 2: P(W ≤ t) = 1 − 0.5·e^(−t/2).
  EXPECT_NEAR(WaitPlusServiceQuantile(0.9, 0.5, 1.0, {0.0}), 2 * std::log(5.0), 1e-6);
  EXPECT_NEAR(WaitPlusServiceQuantile(0.5, 0.5, 1.0, {0.0}), 0, 1e-6);
  // A service time shifts it; no wait leaves the service quantile.
  EXPECT_NEAR(WaitPlusServiceQuantile(0.9, 0.5, 1.0, {0.25}), 0.25 + 2 * std::log(5.0), 1e-6);
  EXPECT_DOUBLE_EQ(WaitPlusServiceQuantile(0.9, 0, 0, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}), 10);
}

TEST(AnalyticModelTest, LightLoadTtftIsPrefillPlusTransfer) {
  const CostModel cost = SampleCost();
  const WorkloadStats stats = ComputeWorkloadStats(Fixed(1e-4, 512, 65), 16);
  const ScreenResult s = ScreenLayout({.prefill_nodes = 1, .decode_nodes = 1}, cost, stats, Slo{}, 1e-4);
  const double expected = cost.PrefillSeconds(512) + cost.TransferSeconds(512);
  EXPECT_NEAR(s.at_rate.ttft_p50, expected, 1e-3 * expected);
  EXPECT_NEAR(s.at_rate.ttft_p90, expected, 1e-3 * expected);
  EXPECT_TRUE(s.meets_slo_at_rate);
}

TEST(AnalyticModelTest, DecodeBatchByLittlesLaw) {
  // Sample decode fit: a = 4 ms, b = 0.05 ms, c = 1.5e-5 ms. Prompt 512, output 65:
  // m = 64 decode steps, k̄ = 512 + 65/2 = 544.5. At 10 req/s on one decode node:
  // B = λ·m·a / (1 − λ·m·(b + c·k̄)) = 640·0.004 / (1 − 640·5.816675e-5) = 2.658994,
  // TPOT = a + (b + c·k̄)·B = 4.154666 ms.
  const CostModel cost = SampleCost();
  const WorkloadStats stats = ComputeWorkloadStats(Fixed(10, 512, 65), 16);
  EXPECT_DOUBLE_EQ(stats.mean_decode_steps, 64);
  EXPECT_DOUBLE_EQ(stats.mean_decode_context, 544.5);
  const ScreenResult s = ScreenLayout({.prefill_nodes = 1, .decode_nodes = 1}, cost, stats, Slo{}, 10);
  EXPECT_NEAR(s.decode_batch, 2.658994, 1e-5);
  EXPECT_NEAR(s.at_rate.tpot_p50, 0.004154666, 1e-8);
  // Two decode nodes take half each.
  const ScreenResult two = ScreenLayout({.prefill_nodes = 1, .decode_nodes = 2}, cost, stats, Slo{}, 10);
  EXPECT_NEAR(two.decode_batch, 320 * 0.004 / (1 - 320 * 5.816675e-5), 1e-5);
}

TEST(AnalyticModelTest, NamesTheBindingConstraint) {
  const CostModel cost = SampleCost();
  // A TPOT bound under the decode step's intercept: nothing serves it.
  const WorkloadStats stats = ComputeWorkloadStats(Fixed(1, 512, 65), 16);
  ScreenResult s = ScreenLayout({.prefill_nodes = 1, .decode_nodes = 1}, cost, stats,
                                {.ttft_seconds = 1, .tpot_seconds = 0.003, .attainment = 0.9}, 1);
  EXPECT_EQ(s.max_rate, 0);
  EXPECT_EQ(s.binding, Constraint::kDecodeStepTime);
  // Contexts of ~2,500 tokens fill the sample's 16,000-token pool at a few sequences.
  const WorkloadStats long_context = ComputeWorkloadStats(Fixed(1, 2000, 1000), 16);
  s = ScreenLayout({.prefill_nodes = 1, .decode_nodes = 1}, cost, long_context,
                   {.ttft_seconds = 10, .tpot_seconds = 1, .attainment = 0.9}, 1);
  EXPECT_EQ(s.binding, Constraint::kDecodeKvCapacity) << ConstraintName(s.binding);
  // A slow transfer path.
  Profile slow = SampleProfile();
  slow.transfer.paths[0].fit.bytes_per_second = 1e8;  // 512 tokens × 128 KiB = 67 MB: 0.67 s each
  s = ScreenLayout({.prefill_nodes = 1, .decode_nodes = 4}, SampleCost(slow), stats,
                   {.ttft_seconds = 10, .tpot_seconds = 1, .attainment = 0.9}, 1);
  EXPECT_EQ(s.binding, Constraint::kTransfer) << ConstraintName(s.binding);
  // Under the sender's capacity, where the transfer queue's wait takes the TTFT bound.
  EXPECT_LE(s.max_rate, 1 / SampleCost(slow).TransferSeconds(512));
  EXPECT_GT(s.max_rate, 0.9 / SampleCost(slow).TransferSeconds(512));
  // Long prompts on one prefill node under a tight TTFT bound.
  const WorkloadStats long_prompts = ComputeWorkloadStats(Fixed(1, 4000, 10), 16);
  s = ScreenLayout({.prefill_nodes = 1, .decode_nodes = 4}, cost, long_prompts,
                   {.ttft_seconds = 0.5, .tpot_seconds = 1, .attainment = 0.9}, 1);
  EXPECT_EQ(s.binding, Constraint::kPrefillCompute) << ConstraintName(s.binding);
}

TEST(AnalyticModelTest, MoreNodesNeverServeLess) {
  const CostModel cost = SampleCost();
  const WorkloadStats stats = ComputeWorkloadStats(Fixed(1, 1024, 128), 16);
  const Slo slo{.ttft_seconds = 0.5, .tpot_seconds = 0.02, .attainment = 0.9};
  for (int x = 1; x <= 3; ++x) {
    for (int y = 1; y <= 3; ++y) {
      const double base = ScreenLayout({.prefill_nodes = x, .decode_nodes = y}, cost, stats, slo, 1).max_rate;
      EXPECT_GE(ScreenLayout({.prefill_nodes = x + 1, .decode_nodes = y}, cost, stats, slo, 1).max_rate, base * 0.999);
      EXPECT_GE(ScreenLayout({.prefill_nodes = x, .decode_nodes = y + 1}, cost, stats, slo, 1).max_rate, base * 0.999);
    }
    EXPECT_GT(ScreenLayout({.colocated_nodes = x + 1}, cost, stats, slo, 1).max_rate,
              ScreenLayout({.colocated_nodes = x}, cost, stats, slo, 1).max_rate);
  }
}

}  // namespace
}  // namespace tandem::planner
