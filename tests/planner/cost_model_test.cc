#include "planner/cost_model.h"

#include <gtest/gtest.h>

#include "tests/planner/sample_profile.h"

namespace tandem::planner {
namespace {

using testing::SampleProfile;

// A prefill grid timed by seconds = 1 ms·steps + 20 µs·tokens + 2 ns·pairs.
std::vector<PrefillPoint> SyntheticGrid(int chunk) {
  std::vector<PrefillPoint> points;
  for (int requests : {1, 2, 4}) {
    for (int tokens = 64; tokens <= 8192; tokens *= 2) {
      const int steps = (tokens * requests + chunk - 1) / chunk;
      const double seconds = 1e-3 * steps + 20e-6 * tokens * requests + 2e-9 * requests * AttentionPairs(0, tokens);
      points.push_back({.prompt_tokens = tokens, .requests = requests, .steps = steps, .seconds = seconds});
    }
  }
  return points;
}

TEST(CostModelTest, PrefillFitRecoversItsTerms) {
  StatusOr<PrefillFit> fit = FitPrefill(SyntheticGrid(2048));
  ASSERT_TRUE(fit.ok()) << fit.status().ToString();
  EXPECT_EQ(fit->terms, "steps, tokens, attention");
  EXPECT_NEAR(fit->per_step_seconds, 1e-3, 1e-9);
  EXPECT_NEAR(fit->per_token_seconds, 20e-6, 1e-11);
  EXPECT_NEAR(fit->per_attention_seconds, 2e-9, 1e-14);
  EXPECT_LT(fit->max_relative_error, 1e-9);
  EXPECT_EQ(fit->num_points, 24);
}

TEST(CostModelTest, PrefillFitFallsBackAndPrintsItsError) {
  // Two points cannot carry three terms: the attention term goes.
  StatusOr<PrefillFit> fit = FitPrefill({{.prompt_tokens = 100, .requests = 1, .steps = 1, .seconds = 0.003},
                                         {.prompt_tokens = 1000, .requests = 1, .steps = 1, .seconds = 0.021}});
  ASSERT_TRUE(fit.ok()) << fit.status().ToString();
  EXPECT_EQ(fit->terms, "steps, tokens");
  EXPECT_NEAR(fit->per_step_seconds, 0.001, 1e-12);
  EXPECT_NEAR(fit->per_token_seconds, 2e-5, 1e-12);
  EXPECT_EQ(fit->per_attention_seconds, 0);
  EXPECT_FALSE(FitPrefill({}).ok());
}

TEST(CostModelTest, BuildsFromTheSampleProfile) {
  StatusOr<CostModel> cost = CostModel::Build(SampleProfile(), SampleProfile(), "local");
  ASSERT_TRUE(cost.ok()) << cost.status().ToString();
  // Every measured prefill point within the fit's stated max error.
  for (const PrefillPoint& p : SampleProfile().prefill.points) {
    const double predicted =
        cost->prefill_fit().Seconds(p.steps, p.prompt_tokens * p.requests, p.requests * AttentionPairs(0, p.prompt_tokens));
    EXPECT_NEAR(predicted, p.seconds, p.seconds * (cost->prefill_fit().max_relative_error + 1e-9));
  }
  // 512 tokens = 32 blocks × 16 × 131072 bytes over 1e10 B/s, plus 2e-5 s + 32 layers × 2e-6 s.
  EXPECT_NEAR(cost->TransferSeconds(512), 2e-5 + 32 * 2e-6 + 512 * 131072 / 1e10, 1e-12);
  EXPECT_NEAR(cost->TransferSeconds(500), cost->TransferSeconds(512), 1e-12);  // whole blocks
  EXPECT_DOUBLE_EQ(cost->DecodeStepSeconds(8, 1000), 0.004 + 8 * 5e-5 + 1000 * 1.5e-8);
  // A colocated step: the decode step plus the chunk's token and attention cost.
  EXPECT_NEAR(cost->MixedStepSeconds(8, 1000, 256, AttentionPairs(0, 256)) - cost->DecodeStepSeconds(8, 1000),
              cost->prefill_fit().Seconds(0, 256, AttentionPairs(0, 256)), 1e-15);
  EXPECT_GT(cost->PrefillSeconds(4096), cost->PrefillSeconds(2048) * 2);  // two chunks and the quadratic term
}

TEST(CostModelTest, RefusesMissingPathsAndMismatchedProfiles) {
  StatusOr<CostModel> cost = CostModel::Build(SampleProfile(), SampleProfile(), "ucx");
  ASSERT_FALSE(cost.ok());
  EXPECT_NE(cost.status().message().find("'ucx' is not in the prefill profile (it has: local)"), std::string::npos)
      << cost.status().ToString();
  Profile other = SampleProfile();
  other.model.num_layers = 16;
  EXPECT_FALSE(CostModel::Build(SampleProfile(), other, "").ok());
  Profile no_points = SampleProfile();
  no_points.prefill.points.clear();
  EXPECT_FALSE(CostModel::Build(no_points, no_points, "").ok());
  Profile no_paths = SampleProfile();
  no_paths.transfer.paths.clear();
  EXPECT_FALSE(CostModel::Build(no_paths, no_paths, "").ok());
}

}  // namespace
}  // namespace tandem::planner
