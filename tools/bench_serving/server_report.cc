#include "tools/bench_serving/server_report.h"

#include <cmath>
#include <cstdio>
#include <string_view>

#include "common/metrics/metric_names.h"

namespace tandem::bench {
namespace {

bool IsFamily(const std::string& series, std::string_view family) {
  return series.rfind(family, 0) == 0 && (series.size() == family.size() || series[family.size()] == '{');
}

bool IsSeconds(const std::string& series) {
  std::string_view family(series.data(), series.find('{') == std::string::npos ? series.size() : series.find('{'));
  return family.size() >= 8 && family.substr(family.size() - 8) == "_seconds";
}

}  // namespace

double KvTransferTotals::GigabytesPerSecond() const { return seconds > 0 && bytes > 0 ? bytes / seconds / 1e9 : 0; }

KvTransferTotals KvTransfer(const MetricsSnapshot& delta) {
  KvTransferTotals t;
  for (const auto& [series, h] : delta.histograms) {
    if (!IsFamily(series, metrics::kKvTransferSeconds)) continue;
    t.transfers += h.count;
    t.seconds += h.sum;
  }
  for (const auto& [series, value] : delta.counters) {
    if (IsFamily(series, metrics::kKvTransferBytesTotal)) t.bytes += value;
  }
  return t;
}

std::string FormatServerReport(const std::vector<SourceDelta>& sources) {
  std::string out =
      "server-side, from /metrics before and after the run (mean exact; percentiles approximate: linear "
      "within Prometheus buckets, \"<=B\" inside the first bucket)\n"
      "| page | series | count | mean | p50 / p90 / p99 |\n|---|---|---|---|---|\n";
  char buf[1024];
  for (const SourceDelta& s : sources) {
    if (!s.error.empty()) {
      out += "| " + s.name + " | n/a: " + s.error + " | | | |\n";
      continue;
    }
    for (const auto& [series, h] : s.delta.histograms) {
      if (h.count <= 0) continue;
      const HistogramStats st = Stats(h);
      const double k = IsSeconds(series) ? 1e3 : 1;
      const char* unit = IsSeconds(series) ? " ms" : "";
      // A quantile inside the first bucket is known only as "at most its bound".
      auto quantile = [&](double q, double value) {
        char v[64];
        if (InFirstBucket(h, q)) {
          std::snprintf(v, sizeof(v), "<=%.2f", h.upper_bounds[0] * k);
        } else {
          std::snprintf(v, sizeof(v), "%.2f", value * k);
        }
        return std::string(v);
      };
      std::snprintf(buf, sizeof(buf), "| %s | %s | %.0f | %.2f%s | %s / %s / %s%s |\n", s.name.c_str(), series.c_str(),
                    st.count, st.mean * k, unit, quantile(0.5, st.p50).c_str(), quantile(0.9, st.p90).c_str(),
                    quantile(0.99, st.p99).c_str(), unit);
      out += buf;
    }
    for (const auto& [series, value] : s.delta.counters) {
      if (value <= 0) continue;
      // Counts are whole; CPU seconds are not.
      std::snprintf(buf, sizeof(buf), value == std::floor(value) ? "| %s | %s | +%.0f | | |\n" : "| %s | %s | +%.3f | | |\n",
                    s.name.c_str(), series.c_str(), value);
      out += buf;
    }
    const KvTransferTotals kv = KvTransfer(s.delta);
    if (kv.transfers > 0 && kv.bytes > 0) {
      std::snprintf(buf, sizeof(buf),
                    "| %s | KV transfer: MB per transfer, GB/s (bytes / summed time) | %.0f | "
                    "%.2f MB | %.3f GB/s |\n",
                    s.name.c_str(), kv.transfers, kv.bytes / kv.transfers / 1e6, kv.GigabytesPerSecond());
      out += buf;
    }
  }
  return out;
}

nlohmann::json ServerReportJson(const std::vector<SourceDelta>& sources) {
  nlohmann::json all = nlohmann::json::object();
  for (const SourceDelta& s : sources) {
    if (!s.error.empty()) {
      all[s.name] = {{"error", s.error}};
      continue;
    }
    nlohmann::json histograms = nlohmann::json::object(), counters = nlohmann::json::object();
    for (const auto& [series, h] : s.delta.histograms) {
      if (h.count <= 0) continue;
      const HistogramStats st = Stats(h);
      histograms[series] = {{"count", st.count}, {"sum", h.sum},  {"mean", st.mean},
                            {"p50", st.p50},     {"p90", st.p90}, {"p99", st.p99}};
    }
    for (const auto& [series, value] : s.delta.counters) {
      if (value > 0) counters[series] = value;
    }
    const KvTransferTotals kv = KvTransfer(s.delta);
    all[s.name] = {{"histograms", histograms},
                   {"counters", counters},
                   {"kv_transfer",
                    {{"transfers", kv.transfers},
                     {"seconds", kv.seconds},
                     {"bytes", kv.bytes},
                     {"gb_per_s", kv.GigabytesPerSecond()}}}};
  }
  return all;
}

}  // namespace tandem::bench
