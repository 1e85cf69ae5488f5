// Server-side numbers for the serving benchmark: a Prometheus text page
// (/metrics) read before and after a run, the histograms and counters of the
// difference, and approximate quantiles from the bucket counts (linear within
// a bucket, as PromQL's histogram_quantile does). Plain values; not thread-safe.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/base/status.h"

namespace tandem::bench {

// One sample line: name{labels} value.
struct PromSample {
  std::string name;
  std::vector<std::pair<std::string, std::string>> labels;  // in page order, values unescaped
  double value = 0;
};

// A parsed page: the samples and each family's `# TYPE`.
struct PromPage {
  std::map<std::string, std::string> types;  // family -> counter | gauge | histogram | ...
  std::vector<PromSample> samples;
};

// Parses the text exposition format (version 0.0.4). Blank lines and comments
// other than `# TYPE` are skipped; a malformed sample line is InvalidArgument.
StatusOr<PromPage> ParsePrometheusText(std::string_view text);

// One histogram series: cumulative counts per ascending upper bound (+Inf last).
struct HistogramData {
  std::vector<double> upper_bounds;
  std::vector<double> cumulative;
  double sum = 0;
  double count = 0;
};

// The histograms and counters of a page whose family starts with a prefix.
// Keys are the family name plus its labels other than `le`, in page order:
// `tandem_request_queue_time_seconds{model_name="m",stage="router"}`; no labels, no braces.
struct MetricsSnapshot {
  std::map<std::string, HistogramData> histograms;
  std::map<std::string, double> counters;
};

MetricsSnapshot Collect(const PromPage& page, std::string_view family_prefix);

// after - before for every series of `after` (a series new in `after` counts
// from zero). A series whose count or value went down (the process restarted)
// keeps `after` as it is.
MetricsSnapshot Delta(const MetricsSnapshot& before, const MetricsSnapshot& after);

// Approximate q-quantile (q in [0, 1]): the bucket holding rank q * count, and a
// linear position inside it (its lower edge 0 for the first bucket). When the
// rank falls in the +Inf bucket, the highest finite bound. NaN when empty.
double HistogramQuantile(const HistogramData& histogram, double q);

// True when rank q * count falls in the first bucket: the quantile is then only
// known to be at most that bucket's bound (the interpolation from 0 is a guess).
bool InFirstBucket(const HistogramData& histogram, double q);

struct HistogramStats {
  double count = 0;
  double mean = 0;                   // sum / count (exact, not from buckets)
  double p50 = 0, p90 = 0, p99 = 0;  // approximate (HistogramQuantile)
};

HistogramStats Stats(const HistogramData& histogram);

}  // namespace tandem::bench
