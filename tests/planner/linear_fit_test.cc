#include "planner/linear_fit.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace tandem::planner {
namespace {

// Points of y = 0.002 + 0.0005·batch + 2e-8·kv_tokens over a decode-shaped grid.
void DecodeGrid(std::vector<std::vector<double>>* rows, std::vector<double>* y, double noise = 0, int seed = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> jitter(-noise, noise);
  for (int batch = 1; batch <= 256; batch *= 2) {
    for (int context = 128; context <= 8192; context *= 4) {
      const double kv = static_cast<double>(batch) * context;
      rows->push_back({1, static_cast<double>(batch), kv});
      y->push_back((0.002 + 0.0005 * batch + 2e-8 * kv) * (1 + jitter(rng)));
    }
  }
}

TEST(LinearFitTest, RecoversExactCoefficients) {
  std::vector<std::vector<double>> rows;
  std::vector<double> y;
  DecodeGrid(&rows, &y);
  for (FitWeighting weighting : {FitWeighting::kRelative, FitWeighting::kAbsolute}) {
    StatusOr<LinearFit> fit = FitLeastSquares(rows, y, {.weighting = weighting});
    ASSERT_TRUE(fit.ok()) << fit.status().ToString();
    ASSERT_EQ(fit->coefficients.size(), 3u);
    EXPECT_NEAR(fit->coefficients[0], 0.002, 1e-12);
    EXPECT_NEAR(fit->coefficients[1], 0.0005, 1e-13);
    EXPECT_NEAR(fit->coefficients[2], 2e-8, 1e-17);
    EXPECT_NEAR(fit->r2, 1, 1e-12);
    EXPECT_LT(fit->max_relative_error, 1e-9);
    EXPECT_EQ(fit->num_points, static_cast<int>(y.size()));
  }
}

TEST(LinearFitTest, NoisyPointsGiveCloseCoefficientsAndReportTheirError) {
  std::vector<std::vector<double>> rows;
  std::vector<double> y;
  DecodeGrid(&rows, &y, /*noise=*/0.05);
  StatusOr<LinearFit> fit = FitLeastSquares(rows, y);
  ASSERT_TRUE(fit.ok()) << fit.status().ToString();
  EXPECT_NEAR(fit->coefficients[0], 0.002, 0.0003);
  EXPECT_NEAR(fit->coefficients[1], 0.0005, 0.00005);
  EXPECT_NEAR(fit->coefficients[2], 2e-8, 0.3e-8);
  EXPECT_GT(fit->max_relative_error, 0.005);  // the noise shows
  EXPECT_LT(fit->max_relative_error, 0.12);
  EXPECT_LE(fit->mean_relative_error, fit->max_relative_error);
  EXPECT_GT(fit->r2, 0.98);
  EXPECT_LT(fit->r2, 1);
}

TEST(LinearFitTest, ErrorFiguresMatchAHandComputedCase) {
  // y = x fitted by a constant alone: the mean 2 of {1, 2, 3} (absolute weighting).
  StatusOr<LinearFit> fit = FitLeastSquares({{1}, {1}, {1}}, {1, 2, 3}, {.weighting = FitWeighting::kAbsolute});
  ASSERT_TRUE(fit.ok());
  EXPECT_NEAR(fit->coefficients[0], 2, 1e-12);
  EXPECT_NEAR(fit->max_relative_error, 1.0, 1e-12);  // |2 - 1| / 1
  EXPECT_NEAR(fit->mean_relative_error, (1 + 0 + 1.0 / 3) / 3, 1e-12);
  EXPECT_NEAR(fit->r2, 0, 1e-12);  // no better than the mean
  // Relative weighting minimises Σ((c - y) / y)²: c = Σ(1/y) / Σ(1/y²).
  fit = FitLeastSquares({{1}, {1}, {1}}, {1, 2, 3});
  ASSERT_TRUE(fit.ok());
  EXPECT_NEAR(fit->coefficients[0], (1 + 0.5 + 1.0 / 3) / (1 + 0.25 + 1.0 / 9), 1e-12);
}

TEST(LinearFitTest, NonNegativePinsANegativeTermToZero) {
  // y = 1 + 2x exactly, plus a useless third term that noise drives negative.
  std::vector<std::vector<double>> rows;
  std::vector<double> y;
  for (int x = 1; x <= 6; ++x) {
    rows.push_back({1, static_cast<double>(x), static_cast<double>(x % 3)});
    y.push_back(1 + 2 * x - 0.01 * (x % 3));
  }
  StatusOr<LinearFit> free_fit = FitLeastSquares(rows, y);
  ASSERT_TRUE(free_fit.ok());
  EXPECT_LT(free_fit->coefficients[2], 0);
  StatusOr<LinearFit> fit = FitLeastSquares(rows, y, {.non_negative = true});
  ASSERT_TRUE(fit.ok());
  EXPECT_EQ(fit->coefficients[2], 0);
  EXPECT_GT(fit->coefficients[0], 0);
  EXPECT_NEAR(fit->coefficients[1], 2, 0.02);
}

TEST(LinearFitTest, RefusesPointsThatCannotDetermineTheTerms) {
  // Every point has the same batch: the batch term is the intercept again.
  StatusOr<LinearFit> fit = FitLeastSquares({{1, 4, 100}, {1, 4, 200}, {1, 4, 300}}, {1, 2, 3});
  ASSERT_FALSE(fit.ok());
  EXPECT_EQ(fit.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(fit.status().message().find("term 1 is not determined"), std::string::npos) << fit.status().ToString();

  fit = FitLeastSquares({{1, 1, 1}, {1, 2, 3}}, {1, 2});
  ASSERT_FALSE(fit.ok());
  EXPECT_NE(fit.status().message().find("2 points cannot determine 3"), std::string::npos);

  fit = FitLeastSquares({{1, 0}, {1, 0}, {1, 0}}, {1, 2, 3});
  ASSERT_FALSE(fit.ok());
  EXPECT_NE(fit.status().message().find("zero at every point"), std::string::npos);
}

TEST(LinearFitTest, RefusesMalformedInput) {
  EXPECT_FALSE(FitLeastSquares({}, {}).ok());
  EXPECT_FALSE(FitLeastSquares({{1}, {1}}, {1}).ok());
  EXPECT_FALSE(FitLeastSquares({{1, 2}, {1}}, {1, 2}).ok());
  EXPECT_FALSE(FitLeastSquares({{1}, {1}}, {1, 0}).ok());  // relative errors need y > 0
  EXPECT_FALSE(FitLeastSquares({{1}, {1}}, {1, NAN}).ok());
  EXPECT_FALSE(FitLeastSquares({{1}, {INFINITY}}, {1, 2}).ok());
}

}  // namespace
}  // namespace tandem::planner
