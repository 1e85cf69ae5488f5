#include "tools/bench_serving/serving_stats.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace tandem::bench {

double RequestRecord::TpotSeconds() const {
  if (completion_tokens <= 1) return 0;
  return (e2e_s - ttft_s) / (completion_tokens - 1);
}

std::string RecordJsonLine(const RequestRecord& r, int prompt_tokens) {
  char line[256];
  std::snprintf(line, sizeof(line),
                "{\"send_s\": %.6f, \"prompt_tokens\": %d, \"output_tokens\": %d, \"ok\": %s, \"ttft_s\": %.6f, "
                "\"e2e_s\": %.6f, \"completion_tokens\": %d}\n",
                r.send_s, prompt_tokens, r.requested_tokens, r.ok ? "true" : "false", r.ttft_s, r.e2e_s,
                r.completion_tokens);
  return line;
}

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  double rank = std::ceil(p / 100.0 * values.size());
  size_t index = rank < 1 ? 0 : static_cast<size_t>(rank) - 1;
  return values[std::min(index, values.size() - 1)];
}

namespace {

LatencyMs Milliseconds(const std::vector<double>& seconds) {
  LatencyMs ms;
  if (seconds.empty()) return ms;
  double sum = 0;
  for (double s : seconds) sum += s;
  ms.mean = sum / static_cast<double>(seconds.size()) * 1e3;
  ms.p50 = Percentile(seconds, 50) * 1e3;
  ms.p90 = Percentile(seconds, 90) * 1e3;
  ms.p99 = Percentile(seconds, 99) * 1e3;
  return ms;
}

}  // namespace

Summary Summarize(const std::vector<RequestRecord>& records, double duration_s, const GoodputLimits& limits) {
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
  s.within_slo = good;
  if (duration_s > 0) {
    s.request_throughput = s.completed / duration_s;
    s.output_throughput = s.total_completion_tokens / duration_s;
    s.goodput = good / duration_s;
  }
  s.ttft_ms = Milliseconds(ttft);
  s.tpot_ms = Milliseconds(tpot);
  s.itl_ms = Milliseconds(itl);
  s.e2e_ms = Milliseconds(e2e);
  return s;
}

std::string FormatSummary(const Summary& s) {
  char buf[2048];
  int n = std::snprintf(buf, sizeof(buf),
                        "| client-side metric | value |\n|---|---|\n"
                        "| completed / failed | %d / %d |\n| duration (s) | %.2f |\n"
                        "| prompt tokens / completion tokens | %ld / %ld |\n"
                        "| request throughput (req/s) | %.2f |\n| output throughput (tok/s) | %.1f |\n"
                        "| goodput (req/s) | %.2f (%d of %d within the SLO) |\n",
                        s.completed, s.failed, s.duration_s, s.total_prompt_tokens, s.total_completion_tokens,
                        s.request_throughput, s.output_throughput, s.goodput, s.within_slo, s.completed);
  std::string out(buf, n);
  auto row = [&](const char* name, const LatencyMs& v) {
    int m = std::snprintf(buf, sizeof(buf), "| %s mean; p50 / p90 / p99 (ms) | %.2f; %.2f / %.2f / %.2f |\n", name,
                          v.mean, v.p50, v.p90, v.p99);
    out.append(buf, m);
  };
  row("TTFT", s.ttft_ms);
  row("TPOT", s.tpot_ms);
  row("ITL", s.itl_ms);
  row("E2E", s.e2e_ms);
  return out;
}

}  // namespace tandem::bench
