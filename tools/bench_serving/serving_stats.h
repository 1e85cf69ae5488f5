// Latency statistics for the serving benchmark: per-request records in,
// percentiles, throughput and goodput out. Plain values; not thread-safe.
#pragma once

#include <string>
#include <vector>

namespace tandem::bench {

// What one request measured (seconds, wall clock from its send).
struct RequestRecord {
  bool ok = false;
  std::string error;          // why it failed, when !ok
  int prompt_tokens = 0;      // from usage
  int completion_tokens = 0;  // from usage
  double send_s = 0;          // when it was sent, from the run's start
  int requested_tokens = 0;   // max_tokens asked for (ignore_eos: the completion's length)
  double ttft_s = 0;          // send -> first content chunk
  double e2e_s = 0;           // send -> [DONE]
  std::vector<double> itl_s;  // gaps between content chunks
  // Time per output token after the first: (e2e - ttft) / (completion_tokens - 1).
  double TpotSeconds() const;
};

struct GoodputLimits {
  double ttft_ms = 0;  // 0 = no limit
  double tpot_ms = 0;  // 0 = no limit
};

// Mean and nearest-rank percentiles of one latency, milliseconds.
struct LatencyMs {
  double mean = 0;
  double p50 = 0, p90 = 0, p99 = 0;
};

struct Summary {
  int completed = 0, failed = 0;
  int within_slo = 0;  // completed requests meeting the goodput limits
  double duration_s = 0;
  long total_prompt_tokens = 0, total_completion_tokens = 0;
  double request_throughput = 0;  // completed requests / s
  double output_throughput = 0;   // completion tokens / s
  double goodput = 0;             // requests meeting the limits / s
  LatencyMs ttft_ms, tpot_ms, itl_ms, e2e_ms;
};

// One record as a JSON line: {"send_s", "prompt_tokens", "output_tokens" (asked),
// "ok", "ttft_s", "e2e_s", "completion_tokens"} — what a replay or a model of the
// run needs (tools/validate feeds it to the planner's simulator as a trace).
std::string RecordJsonLine(const RequestRecord& record, int prompt_tokens);

// Nearest-rank percentile (p in [0, 100]) of values; 0 for an empty list.
double Percentile(std::vector<double> values, double p);

Summary Summarize(const std::vector<RequestRecord>& records, double duration_s, const GoodputLimits& limits);

// A Markdown table, one metric per line.
std::string FormatSummary(const Summary& summary);

}  // namespace tandem::bench
