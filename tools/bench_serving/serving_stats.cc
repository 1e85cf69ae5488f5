#include "tools/bench_serving/serving_stats.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace tandem::bench {

double RequestRecord::TpotSeconds() const {
  if (completion_tokens <= 1) return 0;
  return (e2e_s - ttft_s) / (completion_tokens - 1);
}

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  double rank = std::ceil(p / 100.0 * values.size());
  size_t index = rank < 1 ? 0 : static_cast<size_t>(rank) - 1;
  return values[std::min(index, values.size() - 1)];
}

namespace {

void FillPercentiles(const std::vector<double>& seconds, double out_ms[3]) {
  const double ps[3] = {50, 90, 99};
  for (int i = 0; i < 3; ++i) out_ms[i] = Percentile(seconds, ps[i]) * 1e3;
}

}  // namespace

Summary Summarize(const std::vector<RequestRecord>& records, double duration_s,
                  const GoodputLimits& limits) {
  Summary s;
  s.duration_s = duration_s;
  std::vector<double> ttft, tpot, itl, e2e;
  int good = 0;
  for (const RequestRecord& r : records) {
    if (!r.ok) {
      ++s.failed;
      continue;
    }
    ++s.completed;
    s.total_prompt_tokens += r.prompt_tokens;
    s.total_completion_tokens += r.completion_tokens;
    ttft.push_back(r.ttft_s);
    e2e.push_back(r.e2e_s);
    if (r.completion_tokens > 1) tpot.push_back(r.TpotSeconds());
    itl.insert(itl.end(), r.itl_s.begin(), r.itl_s.end());
    bool ttft_ok = limits.ttft_ms <= 0 || r.ttft_s * 1e3 <= limits.ttft_ms;
    bool tpot_ok = limits.tpot_ms <= 0 || r.TpotSeconds() * 1e3 <= limits.tpot_ms;
    if (ttft_ok && tpot_ok) ++good;
  }
  if (duration_s > 0) {
    s.request_throughput = s.completed / duration_s;
    s.output_throughput = s.total_completion_tokens / duration_s;
    s.goodput = good / duration_s;
  }
  FillPercentiles(ttft, s.ttft_ms);
  FillPercentiles(tpot, s.tpot_ms);
  FillPercentiles(itl, s.itl_ms);
  FillPercentiles(e2e, s.e2e_ms);
  return s;
}

std::string FormatSummary(const Summary& s) {
  char buf[2048];
  int n = std::snprintf(
      buf, sizeof(buf),
      "| metric | value |\n|---|---|\n"
      "| completed / failed | %d / %d |\n| duration (s) | %.2f |\n"
      "| prompt tokens / completion tokens | %ld / %ld |\n"
      "| request throughput (req/s) | %.2f |\n| output throughput (tok/s) | %.1f |\n"
      "| goodput (req/s) | %.2f |\n",
      s.completed, s.failed, s.duration_s, s.total_prompt_tokens, s.total_completion_tokens,
      s.request_throughput, s.output_throughput, s.goodput);
  std::string out(buf, n);
  auto row = [&](const char* name, const double v[3]) {
    int m = std::snprintf(buf, sizeof(buf), "| %s p50 / p90 / p99 (ms) | %.2f / %.2f / %.2f |\n", name,
                          v[0], v[1], v[2]);
    out.append(buf, m);
  };
  row("TTFT", s.ttft_ms);
  row("TPOT", s.tpot_ms);
  row("ITL", s.itl_ms);
  row("E2E", s.e2e_ms);
  return out;
}

}  // namespace tandem::bench
