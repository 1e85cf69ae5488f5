// The server-side part of the serving benchmark's report: for each /metrics
// page, what its histograms and counters changed by over the run, as a table
// and as JSON. Plain functions; thread-safe.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "tools/bench_serving/metrics_delta.h"

namespace tandem::bench {

// What one page changed by over the run.
struct SourceDelta {
  std::string name;   // "router", "decode", ...
  std::string error;  // non-empty when a scrape failed; `delta` is then empty
  MetricsSnapshot delta;
};

// The KV handoff one page saw: the summed transfer time of tandem_kv_transfer_seconds
// and the bytes of tandem_kv_transfer_bytes_total (any direction).
struct KvTransferTotals {
  double transfers = 0;
  double seconds = 0;
  double bytes = 0;
  // bytes / seconds / 1e9; 0 when either is 0.
  double GigabytesPerSecond() const;
};

KvTransferTotals KvTransfer(const MetricsSnapshot& delta);

// A Markdown table: per page, every histogram that observed something during the
// run (count, exact mean, approximate p50/p90/p99; *_seconds in ms), every
// counter that grew, and the KV transfer rate where the page has both.
std::string FormatServerReport(const std::vector<SourceDelta>& sources);

// {name: {"histograms": {series: {count, sum, mean, p50, p90, p99}}, "counters":
// {series: delta}, "kv_transfer": {transfers, seconds, bytes, gb_per_s}} or {"error": text}};
// values in the metric's own unit (seconds, bytes).
nlohmann::json ServerReportJson(const std::vector<SourceDelta>& sources);

}  // namespace tandem::bench
