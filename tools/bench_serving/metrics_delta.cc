#include "tools/bench_serving/metrics_delta.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "common/metrics/exposition.h"

namespace tandem::bench {
namespace {

bool IsNameChar(char c, bool first) {
  const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
  return alpha || (!first && c >= '0' && c <= '9');
}

void SkipSpaces(std::string_view line, size_t& i) {
  while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
}

bool ParseDouble(std::string_view text, double* out) {
  std::string s(text);
  char* end = nullptr;
  *out = std::strtod(s.c_str(), &end);
  return !s.empty() && end == s.c_str() + s.size();
}

// `{a="x",b="y"}` starting at line[i] == '{'; leaves i after the '}'.
Status ParseLabels(std::string_view line, size_t& i, PromSample& sample) {
  ++i;
  while (true) {
    SkipSpaces(line, i);
    if (i < line.size() && line[i] == '}') {
      ++i;
      return Status::Ok();
    }
    size_t start = i;
    while (i < line.size() && IsNameChar(line[i], i == start)) ++i;
    std::string name(line.substr(start, i - start));
    SkipSpaces(line, i);
    if (name.empty() || i + 1 >= line.size() || line[i] != '=' || line[i + 1] != '"') {
      return InvalidArgumentError("malformed label in: " + std::string(line));
    }
    i += 2;
    std::string value;
    while (i < line.size() && line[i] != '"') {
      if (line[i] == '\\' && i + 1 < line.size()) {
        ++i;
        value += line[i] == 'n' ? '\n' : line[i];
      } else {
        value += line[i];
      }
      ++i;
    }
    if (i >= line.size()) return InvalidArgumentError("unterminated label value in: " + std::string(line));
    ++i;
    sample.labels.emplace_back(std::move(name), std::move(value));
    SkipSpaces(line, i);
    if (i < line.size() && line[i] == ',') ++i;
  }
}

StatusOr<PromSample> ParseSample(std::string_view line) {
  PromSample sample;
  size_t i = 0;
  while (i < line.size() && IsNameChar(line[i], i == 0)) ++i;
  if (i == 0) return InvalidArgumentError("sample line without a metric name: " + std::string(line));
  sample.name = std::string(line.substr(0, i));
  if (i < line.size() && line[i] == '{') TANDEM_RETURN_IF_ERROR(ParseLabels(line, i, sample));
  SkipSpaces(line, i);
  size_t end = line.find_first_of(" \t", i);
  std::string_view value = line.substr(i, end == std::string_view::npos ? std::string_view::npos : end - i);
  if (!ParseDouble(value, &sample.value)) return InvalidArgumentError("bad sample value in: " + std::string(line));
  return sample;
}

// The series key: family plus labels other than `le`.
std::string SeriesKey(const std::string& family, const PromSample& sample) {
  std::string labels;
  for (const auto& [name, value] : sample.labels) {
    if (name == "le") continue;
    labels += (labels.empty() ? "" : ",") + name + "=\"" + metrics::EscapeLabelValue(value) + "\"";
  }
  return labels.empty() ? family : family + "{" + labels + "}";
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

StatusOr<PromPage> ParsePrometheusText(std::string_view text) {
  PromPage page;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    std::string_view line = text.substr(pos, eol == std::string_view::npos ? std::string_view::npos : eol - pos);
    pos = eol == std::string_view::npos ? text.size() : eol + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    size_t i = 0;
    SkipSpaces(line, i);
    line.remove_prefix(i);
    if (line.empty()) continue;
    if (line[0] == '#') {
      constexpr std::string_view kType = "# TYPE ";
      if (line.rfind(kType, 0) == 0) {
        std::string_view rest = line.substr(kType.size());
        size_t space = rest.find(' ');
        if (space != std::string_view::npos) page.types[std::string(rest.substr(0, space))] = rest.substr(space + 1);
      }
      continue;
    }
    TANDEM_ASSIGN_OR_RETURN(PromSample sample, ParseSample(line));
    page.samples.push_back(std::move(sample));
  }
  return page;
}

MetricsSnapshot Collect(const PromPage& page, std::string_view family_prefix) {
  MetricsSnapshot snap;
  for (const PromSample& s : page.samples) {
    if (s.name.rfind(family_prefix, 0) != 0) continue;
    auto type = [&](std::string_view family) {
      auto it = page.types.find(std::string(family));
      return it == page.types.end() ? std::string() : it->second;
    };
    if (type(s.name) == "counter") {
      snap.counters[SeriesKey(s.name, s)] = s.value;
      continue;
    }
    for (std::string_view suffix : {"_bucket", "_sum", "_count"}) {
      if (!EndsWith(s.name, suffix)) continue;
      const std::string family = s.name.substr(0, s.name.size() - suffix.size());
      if (type(family) != "histogram") continue;
      HistogramData& h = snap.histograms[SeriesKey(family, s)];
      if (suffix == "_sum") {
        h.sum = s.value;
      } else if (suffix == "_count") {
        h.count = s.value;
      } else {
        double le = std::numeric_limits<double>::quiet_NaN();
        for (const auto& [name, value] : s.labels) {
          if (name == "le") ParseDouble(value, &le);
        }
        if (std::isnan(le)) continue;
        auto at = std::lower_bound(h.upper_bounds.begin(), h.upper_bounds.end(), le);
        h.cumulative.insert(h.cumulative.begin() + (at - h.upper_bounds.begin()), s.value);
        h.upper_bounds.insert(at, le);
      }
    }
  }
  return snap;
}

MetricsSnapshot Delta(const MetricsSnapshot& before, const MetricsSnapshot& after) {
  MetricsSnapshot delta = after;
  for (auto& [key, value] : delta.counters) {
    auto it = before.counters.find(key);
    if (it != before.counters.end() && value >= it->second) value -= it->second;
  }
  for (auto& [key, h] : delta.histograms) {
    auto it = before.histograms.find(key);
    if (it == before.histograms.end()) continue;
    const HistogramData& b = it->second;
    if (h.count < b.count || b.upper_bounds != h.upper_bounds) continue;
    for (size_t i = 0; i < h.cumulative.size(); ++i) h.cumulative[i] -= b.cumulative[i];
    h.sum -= b.sum;
    h.count -= b.count;
  }
  return delta;
}

double HistogramQuantile(const HistogramData& h, double q) {
  if (h.cumulative.empty() || h.cumulative.back() <= 0) return std::numeric_limits<double>::quiet_NaN();
  const double rank = std::clamp(q, 0.0, 1.0) * h.cumulative.back();
  size_t b = 0;
  while (b + 1 < h.cumulative.size() && h.cumulative[b] < rank) ++b;
  const double upper = h.upper_bounds[b];
  if (std::isinf(upper)) return b == 0 ? std::numeric_limits<double>::quiet_NaN() : h.upper_bounds[b - 1];
  const double lower = b == 0 ? std::min(0.0, upper) : h.upper_bounds[b - 1];
  const double below = b == 0 ? 0 : h.cumulative[b - 1];
  const double in_bucket = h.cumulative[b] - below;
  if (in_bucket <= 0) return upper;
  return lower + (upper - lower) * (rank - below) / in_bucket;
}

bool InFirstBucket(const HistogramData& h, double q) {
  if (h.cumulative.empty() || h.cumulative.back() <= 0) return false;
  return std::clamp(q, 0.0, 1.0) * h.cumulative.back() <= h.cumulative[0];
}

HistogramStats Stats(const HistogramData& h) {
  HistogramStats s;
  s.count = h.count;
  if (h.count <= 0) return s;
  s.mean = h.sum / h.count;
  s.p50 = HistogramQuantile(h, 0.50);
  s.p90 = HistogramQuantile(h, 0.90);
  s.p99 = HistogramQuantile(h, 0.99);
  return s;
}

}  // namespace tandem::bench
