#include "planner/workload.h"

#include <algorithm>
#include <cmath>

#include "common/model/json_limits.h"

namespace tandem::planner {
namespace {

constexpr size_t kMaxTraceBytes = 256 << 20;

// Acklam's inverse of the standard normal CDF (relative error < 1.2e-9).
double NormalQuantile(double p) {
  static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
                             1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
  static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                             6.680131188771972e+01,  -1.328068155288572e+01};
  static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                             -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
  static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                             3.754408661907416e+00};
  const double low = 0.02425;
  if (p < low) {
    const double q = std::sqrt(-2 * std::log(p));
    return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
           ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  }
  if (p > 1 - low) return -NormalQuantile(1 - p);
  const double q = p - 0.5;
  const double r = q * q;
  return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
         (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
}

int ClampRound(double x, int lo, int hi) {
  if (!(x >= lo)) return lo;  // NaN too
  if (x >= hi) return hi;
  return std::clamp(static_cast<int>(std::lround(x)), lo, hi);
}

Status LengthError(std::string_view what, const std::string& message) {
  return InvalidArgumentError(std::string(what) + " lengths: " + message);
}

}  // namespace

uint64_t SimRandom::Next() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

double SimRandom::Uniform() { return (static_cast<double>(Next() >> 11) + 0.5) * (1.0 / 9007199254740992.0); }

double SimRandom::Exponential() { return -std::log(Uniform()); }

StatusOr<LengthKind> ParseLengthKind(std::string_view name) {
  for (LengthKind k : {LengthKind::kFixed, LengthKind::kUniform, LengthKind::kNormal, LengthKind::kLognormal,
                       LengthKind::kEmpirical}) {
    if (name == LengthKindName(k)) return k;
  }
  return InvalidArgumentError("unknown length distribution '" + std::string(name) +
                              "' (fixed, uniform, normal, lognormal, empirical)");
}

const char* LengthKindName(LengthKind kind) {
  switch (kind) {
    case LengthKind::kFixed: return "fixed";
    case LengthKind::kUniform: return "uniform";
    case LengthKind::kNormal: return "normal";
    case LengthKind::kLognormal: return "lognormal";
    case LengthKind::kEmpirical: return "empirical";
  }
  return "?";
}

Status LengthDistribution::Validate(std::string_view what) const {
  if (min < 1 || max < min) return LengthError(what, "need 1 <= min <= max");
  switch (kind) {
    case LengthKind::kFixed:
      if (!(mean >= 1) || mean > max) return LengthError(what, "fixed needs mean in [1, max]");
      return Status::Ok();
    case LengthKind::kUniform: return Status::Ok();
    case LengthKind::kNormal:
    case LengthKind::kLognormal:
      if (!(mean >= 1) || !std::isfinite(mean)) return LengthError(what, "mean must be >= 1");
      if (!(stddev >= 0) || !std::isfinite(stddev)) return LengthError(what, "stddev must be >= 0");
      return Status::Ok();
    case LengthKind::kEmpirical:
      if (values.empty()) return LengthError(what, "empirical needs at least one value");
      for (int v : values) {
        if (v < 1) return LengthError(what, "empirical values must be >= 1");
      }
      return Status::Ok();
  }
  return LengthError(what, "unknown kind");
}

int LengthDistribution::Quantile(double u) const {
  u = std::clamp(u, 1e-12, 1 - 1e-12);
  switch (kind) {
    case LengthKind::kFixed: return ClampRound(mean, 1, max);
    case LengthKind::kUniform: return std::min(max, min + static_cast<int>(u * (max - min + 1)));
    case LengthKind::kNormal: return ClampRound(mean + stddev * NormalQuantile(u), min, max);
    case LengthKind::kLognormal: {
      const double sigma2 = std::log1p(stddev * stddev / (mean * mean));
      const double mu = std::log(mean) - sigma2 / 2;
      return ClampRound(std::exp(mu + std::sqrt(sigma2) * NormalQuantile(u)), min, max);
    }
    case LengthKind::kEmpirical: {
      // The quantile is over the sorted list (the planner sorts it once; a copy otherwise).
      std::vector<int> copy;
      const std::vector<int>* sorted = &values;
      if (!std::is_sorted(values.begin(), values.end())) {
        copy = values;
        std::sort(copy.begin(), copy.end());
        sorted = &copy;
      }
      const size_t i = std::min(sorted->size() - 1, static_cast<size_t>(u * static_cast<double>(sorted->size())));
      return (*sorted)[i];
    }
  }
  return 1;
}

std::vector<int> LengthDistribution::Grid(int n) const {
  std::vector<int> grid;
  if (kind == LengthKind::kEmpirical && values.size() <= static_cast<size_t>(n)) {
    grid = values;
    std::sort(grid.begin(), grid.end());
    return grid;
  }
  if (kind == LengthKind::kEmpirical) {
    std::vector<int> sorted = values;
    std::sort(sorted.begin(), sorted.end());
    for (int k = 0; k < n; ++k) {
      const double u = (k + 0.5) / n;
      grid.push_back(sorted[std::min(sorted.size() - 1, static_cast<size_t>(u * static_cast<double>(sorted.size())))]);
    }
    return grid;
  }
  grid.reserve(static_cast<size_t>(n));
  for (int k = 0; k < n; ++k) grid.push_back(Quantile((k + 0.5) / n));
  return grid;
}

StatusOr<std::vector<TraceRequest>> ParseTrace(std::string_view text, std::string_view what) {
  if (text.size() > kMaxTraceBytes) return InvalidArgumentError(std::string(what) + ": larger than 256 MiB");
  std::vector<TraceRequest> trace;
  size_t line_no = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t end = std::min(text.find('\n', pos), text.size());
    const std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    const std::string where = std::string(what) + " line " + std::to_string(line_no);
    TANDEM_ASSIGN_OR_RETURN(nlohmann::json j, model::ParseJsonText(line, 1 << 20, 4, where));
    if (!j.is_object()) return InvalidArgumentError(where + ": not a JSON object");
    const char* time_key = j.contains("timestamp") ? "timestamp" : "arrival_time";
    for (const char* key : {time_key, "prompt_tokens", "output_tokens"}) {
      if (!j.contains(key) || !j[key].is_number()) {
        return InvalidArgumentError(where + ": needs a number '" + key + "'");
      }
    }
    TraceRequest r{.arrival_seconds = j[time_key].get<double>(),
                   .prompt_tokens = 0,
                   .output_tokens = 0};
    const double prompt = j["prompt_tokens"].get<double>();
    const double output = j["output_tokens"].get<double>();
    if (!std::isfinite(r.arrival_seconds) || r.arrival_seconds < 0) {
      return InvalidArgumentError(where + ": timestamp must be a finite number >= 0");
    }
    if (!trace.empty() && r.arrival_seconds < trace.back().arrival_seconds) {
      return InvalidArgumentError(where + ": timestamps must not decrease");
    }
    if (!(prompt >= 1 && prompt <= 1e7) || !(output >= 1 && output <= 1e7)) {
      return InvalidArgumentError(where + ": prompt_tokens and output_tokens must be in [1, 10^7]");
    }
    r.prompt_tokens = static_cast<int>(prompt);
    r.output_tokens = static_cast<int>(output);
    if (trace.size() >= kMaxTraceRequests) return InvalidArgumentError(std::string(what) + ": too many requests");
    trace.push_back(r);
  }
  if (trace.size() < 2) return InvalidArgumentError(std::string(what) + ": needs at least two requests");
  if (trace.back().arrival_seconds <= trace.front().arrival_seconds) {
    return InvalidArgumentError(std::string(what) + ": all requests arrive at once (no rate)");
  }
  return trace;
}

StatusOr<std::vector<TraceRequest>> LoadTrace(const std::string& path) {
  TANDEM_ASSIGN_OR_RETURN(std::string text, model::ReadFileToString(path, kMaxTraceBytes));
  return ParseTrace(text, path);
}

Status Workload::Validate() const {
  if (trace.empty()) {
    if (!(rate > 0) || !std::isfinite(rate)) return InvalidArgumentError("workload: rate must be > 0 (requests/s)");
    TANDEM_RETURN_IF_ERROR(prompt.Validate("prompt"));
    TANDEM_RETURN_IF_ERROR(output.Validate("output"));
  } else if (!(rate > 0) || !std::isfinite(rate)) {
    return InvalidArgumentError("workload: rate must be > 0 (the trace's own when not given)");
  }
  if (!(prefix_hit_rate >= 0 && prefix_hit_rate < 1)) {
    return InvalidArgumentError("workload: prefix_hit_rate must be in [0, 1)");
  }
  return Status::Ok();
}

double Workload::TraceRate() const {
  return static_cast<double>(trace.size() - 1) / (trace.back().arrival_seconds - trace.front().arrival_seconds);
}

LengthDistribution Workload::PromptLengths() const {
  if (trace.empty()) return prompt;
  LengthDistribution d;
  d.kind = LengthKind::kEmpirical;
  for (const TraceRequest& r : trace) d.values.push_back(r.prompt_tokens);
  std::sort(d.values.begin(), d.values.end());
  return d;
}

LengthDistribution Workload::OutputLengths() const {
  if (trace.empty()) return output;
  LengthDistribution d;
  d.kind = LengthKind::kEmpirical;
  for (const TraceRequest& r : trace) d.values.push_back(r.output_tokens);
  std::sort(d.values.begin(), d.values.end());
  return d;
}

Status Slo::Validate() const {
  if (!(ttft_seconds > 0) || !std::isfinite(ttft_seconds)) return InvalidArgumentError("slo: ttft must be > 0");
  if (!(tpot_seconds > 0) || !std::isfinite(tpot_seconds)) return InvalidArgumentError("slo: tpot must be > 0");
  if (!(attainment > 0 && attainment < 1)) {
    return InvalidArgumentError("slo: attainment must be in (0, 100) percent");
  }
  return Status::Ok();
}

int UncachedPromptTokens(int prompt_tokens, double hit_rate, int block_size) {
  const int max_blocks = (prompt_tokens - 1) / block_size;
  const int hit_blocks =
      std::min(max_blocks, static_cast<int>(std::floor(hit_rate * prompt_tokens / block_size)));
  return prompt_tokens - hit_blocks * block_size;
}

}  // namespace tandem::planner
