// FitLeastSquares: linear least squares y ≈ X·β over a few named terms (a
// column of ones for an intercept), with the fit's error over the same points.
// The planner's cost models are of this form: a decode step's seconds as
// a + b·batch + c·kv_tokens, a KV transfer's as fixed + per_run·runs + bytes/bandwidth.
// Thread rule: free functions, no state.
#pragma once

#include <vector>

#include "common/base/status.h"

namespace tandem::planner {

enum class FitWeighting {
  kAbsolute,  // minimise Σ (ŷ − y)²: large values dominate
  kRelative,  // minimise Σ ((ŷ − y) / y)²: every point's relative error counts alike (y > 0)
};

struct FitOptions {
  FitWeighting weighting = FitWeighting::kRelative;
  // Costs are never negative: a term whose coefficient comes out below zero (noise
  // where the term barely matters) is pinned to zero and the rest refitted, the
  // most negative first (an active-set pass; exact for the cost models here).
  bool non_negative = false;
};

struct LinearFit {
  std::vector<double> coefficients;  // one per column of X, in column order
  // 1 − Σ(ŷ − y)² / Σ(y − ȳ)² over the points (1: exact; ≤ 0: no better than the mean).
  // 1 when every y is equal and the fit is exact.
  double r2 = 0;
  double max_relative_error = 0;   // max |ŷ − y| / y over the points
  double mean_relative_error = 0;  // mean |ŷ − y| / y over the points
  int num_points = 0;

  // Σ coefficients[i] · x[i]. REQUIRES: x.size() == coefficients.size().
  double Predict(const std::vector<double>& x) const;
};

// Fits y ≈ X·β. `rows[i]` is point i's terms (the same count in every row, at
// least one), `y[i]` its measured value (> 0, finite: errors are relative).
// InvalidArgument for mismatched sizes, fewer points than terms, a non-finite
// or non-positive value, or terms the points cannot tell apart (a column that is
// zero, or a combination of the others, e.g. every point with the same batch
// next to an intercept), naming the column.
StatusOr<LinearFit> FitLeastSquares(const std::vector<std::vector<double>>& rows, const std::vector<double>& y,
                                    const FitOptions& options = {});

}  // namespace tandem::planner
