// Command line of tandem-bench-serving: what to send, where, and which /metrics
// pages to read. Options that contradict each other (or that the chosen mode
// ignores) are an error, never a silent change of the workload.
// Thread rule: plain values; parse once at startup.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/base/status.h"
#include "tools/bench_serving/serving_stats.h"
#include "tools/bench_serving/sse_client.h"

namespace tandem::bench {

// A Prometheus /metrics page read before and after the run.
struct MetricsSource {
  std::string name;  // label in the report ("router", "decode", ...)
  Endpoint page;     // host, port and path of the page
};

// Lengths of random prompts or completions: uniform in [lo, hi].
struct LengthRange {
  int lo = 1;
  int hi = 1;
};

// `len` +- `ratio` of it, at least 1 token.
LengthRange RandomLengthRange(int len, double ratio);

struct BenchOptions {
  // The server and the request path (set from `api`).
  Endpoint endpoint;
  // completions (token-id prompts) | chat (word prompts through the chat template).
  std::string api = "completions";
  // Model name sent in every request.
  std::string model = "tiny";
  // Requests to send.
  int num_prompts = 100;
  // Poisson arrival rate, requests/s; 0 = keep `concurrency` requests in flight.
  double request_rate = 0;
  // Requests in flight when request_rate is 0.
  int concurrency = 8;
  // random | sharegpt-shaped.
  std::string dataset = "random";
  // random: prompt and completion tokens, each +- range_ratio of itself.
  int input_len = 128;
  int output_len = 64;
  double range_ratio = 0;
  // Caps on the drawn lengths. sharegpt-shaped: 1024 / 512 unless given. random:
  // the upper end of the requested range (a smaller cap given is an error).
  int max_input_len = 0;
  int max_output_len = 0;
  // completions: prompt token ids are drawn from [3, vocab_size).
  int vocab_size = 256;
  // Seed of the lengths, the arrival gaps and the prompt contents.
  uint64_t seed = 0;
  // Goodput SLO: a request counts when TTFT and TPOT are both within these (0 = no limit).
  GoodputLimits limits{500, 50};
  // Also write the summary as (pretty) JSON to this file; empty = no file.
  std::string json_out;
  // Write one JSON line per request (RecordJsonLine: send time, lengths, TTFT, e2e) to
  // this file, in send order; empty = no file.
  std::string requests_out;
  // Print the summary as one JSON line (`summary_json={...}`) last on stdout.
  bool json_line = false;
  // /metrics pages to diff; the endpoint's own page ("router") comes first unless disabled.
  std::vector<MetricsSource> metrics_sources;
};

struct BenchCommandLine {
  BenchOptions options;
  bool help_requested = false;  // --help was given; the text is in `help`
  std::string help;
};

// Parses and validates the flags (argv[0] is the program name). InvalidArgument
// names the conflicting flags: --input-len above --max-input-len, length flags
// with --dataset sharegpt-shaped, --concurrency with --request-rate, ...
StatusOr<BenchCommandLine> ParseBenchFlags(int argc, const char* const* argv);

// The workload as it will run, a few lines for the report header.
std::string DescribeWorkload(const BenchOptions& options);

}  // namespace tandem::bench
