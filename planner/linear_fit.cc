#include "planner/linear_fit.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace tandem::planner {
namespace {

// A column whose Householder pivot falls below this share of its own length is a
// combination of the columns before it (the points cannot tell them apart).
constexpr double kRankTolerance = 1e-9;

Status CheckInput(const std::vector<std::vector<double>>& rows, const std::vector<double>& y) {
  if (rows.size() != y.size()) {
    return InvalidArgumentError("fit: " + std::to_string(rows.size()) + " rows of terms but " +
                                std::to_string(y.size()) + " measured values");
  }
  if (rows.empty() || rows[0].empty()) return InvalidArgumentError("fit: no points or no terms");
  const size_t k = rows[0].size();
  if (rows.size() < k) {
    return InvalidArgumentError("fit: " + std::to_string(rows.size()) + " points cannot determine " +
                                std::to_string(k) + " coefficients");
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].size() != k) return InvalidArgumentError("fit: point " + std::to_string(i) + " has another term count");
    for (double x : rows[i]) {
      if (!std::isfinite(x)) return InvalidArgumentError("fit: point " + std::to_string(i) + " has a non-finite term");
    }
    if (!std::isfinite(y[i]) || y[i] <= 0) {
      return InvalidArgumentError("fit: point " + std::to_string(i) + " has a measured value that is not positive");
    }
  }
  return Status::Ok();
}

// Solves min ‖A·x − b‖ by Householder QR. A is n×k, column-major in `a`, n ≥ k.
StatusOr<std::vector<double>> SolveQr(std::vector<std::vector<double>> a, std::vector<double> b) {
  const size_t k = a.size(), n = b.size();
  std::vector<double> diag(k);
  for (size_t j = 0; j < k; ++j) {
    double column = 0, norm = 0;
    for (size_t i = 0; i < n; ++i) column += a[j][i] * a[j][i];
    for (size_t i = j; i < n; ++i) norm += a[j][i] * a[j][i];
    norm = std::sqrt(norm);
    if (norm <= kRankTolerance * std::sqrt(column)) {
      return InvalidArgumentError("fit: term " + std::to_string(j) +
                                  " is not determined by the points (a combination of the terms before it)");
    }
    const double alpha = a[j][j] > 0 ? -norm : norm;
    std::vector<double> v(a[j].begin() + j, a[j].end());
    v[0] -= alpha;
    double vv = 0;
    for (double x : v) vv += x * x;
    auto reflect = [&](std::vector<double>& col) {
      double dot = 0;
      for (size_t i = j; i < n; ++i) dot += v[i - j] * col[i];
      const double f = 2 * dot / vv;
      for (size_t i = j; i < n; ++i) col[i] -= f * v[i - j];
    };
    for (size_t c = j + 1; c < k; ++c) reflect(a[c]);
    reflect(b);
    diag[j] = alpha;
  }
  std::vector<double> x(k);
  for (size_t j = k; j-- > 0;) {
    double s = b[j];
    for (size_t c = j + 1; c < k; ++c) s -= a[c][j] * x[c];
    x[j] = s / diag[j];
  }
  return x;
}

// The coefficients of the columns marked in `active` (the others stay 0).
StatusOr<std::vector<double>> Solve(const std::vector<std::vector<double>>& rows, const std::vector<double>& y,
                                    FitWeighting weighting, const std::vector<bool>& active) {
  const size_t n = rows.size(), k = rows[0].size();
  // Columns scaled to at most 1 in magnitude: batch sizes and byte counts differ by
  // orders of magnitude, and the pivots must be comparable.
  std::vector<double> scale(k, 0);
  for (const auto& row : rows) {
    for (size_t j = 0; j < k; ++j) scale[j] = std::max(scale[j], std::abs(row[j]));
  }
  std::vector<size_t> columns;
  for (size_t j = 0; j < k; ++j) {
    if (!active[j]) continue;
    if (scale[j] == 0) return InvalidArgumentError("fit: term " + std::to_string(j) + " is zero at every point");
    columns.push_back(j);
  }
  std::vector<std::vector<double>> a(columns.size(), std::vector<double>(n));
  std::vector<double> b(n);
  for (size_t i = 0; i < n; ++i) {
    const double w = weighting == FitWeighting::kRelative ? 1 / y[i] : 1;
    for (size_t c = 0; c < columns.size(); ++c) a[c][i] = w * rows[i][columns[c]] / scale[columns[c]];
    b[i] = w * y[i];
  }
  std::vector<double> coefficients(k, 0);
  if (columns.empty()) return coefficients;
  TANDEM_ASSIGN_OR_RETURN(std::vector<double> scaled, SolveQr(std::move(a), std::move(b)));
  for (size_t c = 0; c < columns.size(); ++c) coefficients[columns[c]] = scaled[c] / scale[columns[c]];
  return coefficients;
}

}  // namespace

double LinearFit::Predict(const std::vector<double>& x) const {
  double s = 0;
  for (size_t i = 0; i < x.size() && i < coefficients.size(); ++i) s += coefficients[i] * x[i];
  return s;
}

StatusOr<LinearFit> FitLeastSquares(const std::vector<std::vector<double>>& rows, const std::vector<double>& y,
                                    const FitOptions& options) {
  TANDEM_RETURN_IF_ERROR(CheckInput(rows, y));
  const size_t n = rows.size(), k = rows[0].size();
  std::vector<bool> active(k, true);
  LinearFit fit;
  fit.num_points = static_cast<int>(n);
  while (true) {
    TANDEM_ASSIGN_OR_RETURN(fit.coefficients, Solve(rows, y, options.weighting, active));
    if (!options.non_negative) break;
    const auto most_negative = std::min_element(fit.coefficients.begin(), fit.coefficients.end());
    if (*most_negative >= 0) break;
    active[most_negative - fit.coefficients.begin()] = false;
  }
  double mean = 0;
  for (double v : y) mean += v / n;
  double residual = 0, total = 0;
  for (size_t i = 0; i < n; ++i) {
    const double predicted = fit.Predict(rows[i]);
    const double relative = std::abs(predicted - y[i]) / y[i];
    residual += (predicted - y[i]) * (predicted - y[i]);
    total += (y[i] - mean) * (y[i] - mean);
    fit.max_relative_error = std::max(fit.max_relative_error, relative);
    fit.mean_relative_error += relative / n;
  }
  fit.r2 = total > 0 ? 1 - residual / total : (residual <= 1e-24 * mean * mean ? 1 : 0);
  return fit;
}

}  // namespace tandem::planner
