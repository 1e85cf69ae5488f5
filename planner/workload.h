// Workload and SLOs: what tandem-plan sizes the pools for. Request lengths come
// from a LengthDistribution (fixed, uniform, normal or lognormal clamped to a
// range, or an empirical list) or from an arrival trace (one JSON object per
// line: arrival time, prompt and output tokens). Every draw is by inversion of
// the distribution's quantile function with the simulator's own RNG
// (SplitMix64), so the same seed gives the same requests on every platform.
// Thread rule: plain value types and free functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/base/status.h"

namespace tandem::planner {

// Deterministic 64-bit generator (SplitMix64): a seed gives one stream, bit for bit.
class SimRandom {
 public:
  explicit SimRandom(uint64_t seed) : state_(seed) {}
  uint64_t Next();
  double Uniform();      // in (0, 1)
  double Exponential();  // mean 1

 private:
  uint64_t state_;
};

enum class LengthKind { kFixed, kUniform, kNormal, kLognormal, kEmpirical };

// Token lengths (≥ 1). kFixed: `mean`. kUniform: integers in [min, max].
// kNormal, kLognormal: of mean `mean` and standard deviation `stddev` (the
// lognormal's own, not its log's), rounded and clamped to [min, max].
// kEmpirical: each of `values` equally likely.
struct LengthDistribution {
  LengthKind kind = LengthKind::kFixed;
  double mean = 0;
  double stddev = 0;
  int min = 1;
  int max = 1 << 20;
  std::vector<int> values = {};

  // InvalidArgument naming `what` ("prompt") and the field.
  Status Validate(std::string_view what) const;
  // The length at quantile u in (0, 1). REQUIRES: Validate() ok.
  int Quantile(double u) const;
  int Sample(SimRandom& rng) const { return Quantile(rng.Uniform()); }
  // `n` lengths at the quantile midpoints (k + ½) / n (the empirical list itself
  // when it is no longer than n): the grid the analytic model takes moments over.
  std::vector<int> Grid(int n) const;
};

// "fixed", "uniform", ... → LengthKind; InvalidArgument naming the choices.
StatusOr<LengthKind> ParseLengthKind(std::string_view name);
const char* LengthKindName(LengthKind kind);

// One request of an arrival trace.
struct TraceRequest {
  double arrival_seconds = 0;  // from the trace's start, non-decreasing
  int prompt_tokens = 0;
  int output_tokens = 0;
};

// JSON lines: {"timestamp": s, "prompt_tokens": n, "output_tokens": n} per line
// (blank lines skipped; "arrival_time" is accepted for "timestamp"). Refused with
// the line number: a line that is not such an object, a negative or decreasing
// timestamp, a length < 1, fewer than two requests, over kMaxTraceRequests.
inline constexpr size_t kMaxTraceRequests = 1'000'000;
StatusOr<std::vector<TraceRequest>> ParseTrace(std::string_view text, std::string_view what = "trace");
StatusOr<std::vector<TraceRequest>> LoadTrace(const std::string& path);

struct Workload {
  double rate = 0;                    // requests per second (Poisson); a trace's own rate when it has one
  std::vector<TraceRequest> trace = {};  // non-empty: arrivals and lengths from it (scaled to a rate)
  LengthDistribution prompt;          // prompt tokens per request (unused with a trace)
  LengthDistribution output;          // output tokens per request, the first included (unused with a trace)
  double prefix_hit_rate = 0;         // fraction of each prompt found in the prefix cache, [0, 1)

  Status Validate() const;
  // The trace's mean arrival rate (requests − 1) / span. REQUIRES: a trace.
  double TraceRate() const;
  // Length distributions of the trace's prompts and outputs (empirical), or the given ones.
  LengthDistribution PromptLengths() const;
  LengthDistribution OutputLengths() const;
};

// A request meets the SLO when its TTFT ≤ ttft_seconds and its TPOT (mean time
// between its output tokens) ≤ tpot_seconds; a layout meets it at a rate when at
// least `attainment` of the requests do (p90 TTFT and p90 TPOT within bounds is
// attainment 0.9 of each).
struct Slo {
  double ttft_seconds = 2.0;
  double tpot_seconds = 0.1;
  double attainment = 0.9;  // (0, 1)

  Status Validate() const;
};

// Prompt tokens a node computes for a prompt of `prompt_tokens` when the first
// `hit_rate` of it is cached, in whole blocks of `block_size`, and at least one
// token is left to compute (as the scheduler does).
int UncachedPromptTokens(int prompt_tokens, double hit_rate, int block_size);

}  // namespace tandem::planner
