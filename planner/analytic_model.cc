#include "planner/analytic_model.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

namespace tandem::planner {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int kGridPoints = 128;

double Mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

double MeanSquare(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x * x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

// One layout's pools at one rate.
struct PoolState {
  bool prefill_stable = true;
  bool transfer_stable = true;
  bool decode_stable = true;
  double rho_prefill = 0;
  double rho_transfer = 0;
  double mean_wait = 0;              // prefill queue
  std::vector<double> ttft_samples;  // TTFT less the prefill wait, per prompt grid point
  double prefill_part = 0;           // mean wait + prefill
  double transfer_part = 0;          // mean transfer wait + transfer
  double ttft_mean = 0;
  double tpot = 0;
  double batch = 0;                  // running decode sequences per node
  double slots = 0;                  // running + reserved (+ prefilling, colocated)
  double kv_tokens = 0;              // held per decode node
};

// The decode batch of Little's law B = λ·m·τ(B)/(1 − f), τ(B) = a + (b + c·k̄)·B; false when
// the batch cannot keep up (no finite solution).
bool SolveDecode(const CostModel& cost, const WorkloadStats& stats, double node_rate, double prefill_share,
                 double* batch, double* step) {
  const DecodeFit& d = cost.decode_fit();
  const double m = stats.mean_decode_steps;
  const double slope = d.per_sequence_seconds + d.per_kv_token_seconds * stats.mean_decode_context;
  const double denominator = (1 - prefill_share) - node_rate * m * slope;
  if (denominator <= 0) return false;
  *batch = node_rate * m * d.intercept_seconds / denominator;
  *step = d.intercept_seconds + slope * *batch;
  return true;
}

PoolState EvaluateDisaggregated(const Layout& layout, const CostModel& cost, const WorkloadStats& stats, double rate) {
  PoolState s;
  const double prefill_rate = rate / layout.prefill_nodes;
  std::vector<double> service, transfer;
  for (int u : stats.uncached_grid) {
    service.push_back(cost.PrefillSeconds(u));
    transfer.push_back(cost.TransferSeconds(u));
  }
  s.rho_prefill = prefill_rate * Mean(service);
  s.rho_transfer = prefill_rate * Mean(transfer);
  s.prefill_stable = s.rho_prefill < 1;
  s.transfer_stable = s.rho_transfer < 1;
  s.mean_wait = MG1WaitSeconds(prefill_rate, Mean(service), MeanSquare(service));
  const double transfer_wait = MG1WaitSeconds(prefill_rate, Mean(transfer), MeanSquare(transfer));
  for (size_t i = 0; i < service.size(); ++i) s.ttft_samples.push_back(service[i] + transfer_wait + transfer[i]);
  s.prefill_part = s.mean_wait + Mean(service);
  s.transfer_part = transfer_wait + Mean(transfer);
  s.ttft_mean = s.prefill_part + s.transfer_part;
  const double decode_rate = rate / layout.decode_nodes;
  s.decode_stable = SolveDecode(cost, stats, decode_rate, 0, &s.batch, &s.tpot);
  // Reserved at arrival (Reserve precedes Prefill): a slot and the prompt's blocks until the KV lands.
  const double reserved = decode_rate * s.ttft_mean;
  s.slots = s.batch + reserved;
  s.kv_tokens = s.batch * stats.mean_decode_context + reserved * stats.mean_prompt;
  return s;
}

PoolState EvaluateColocated(const Layout& layout, const CostModel& cost, const WorkloadStats& stats, double rate) {
  PoolState s;
  const double node_rate = rate / layout.colocated_nodes;
  const PrefillFit& p = cost.prefill_fit();
  std::vector<double> work;
  for (int u : stats.uncached_grid) work.push_back(p.Seconds(0, u, AttentionPairs(0, u)));
  const double share = node_rate * Mean(work);
  s.decode_stable = SolveDecode(cost, stats, node_rate, share, &s.batch, &s.tpot);
  if (!s.decode_stable) {
    s.prefill_stable = false;
    return s;
  }
  s.tpot /= (1 - share);
  const NodeLimits& limits = cost.decode_limits();
  const double chunk = std::max(1.0, std::min<double>(limits.max_prefill_chunk_tokens,
                                                      limits.max_num_batched_tokens - s.batch));
  // A chunk's step carries the decode batch when there is one (a decode step's cost), else it
  // is a prefill-only step (the prefill's per-step cost); below one sequence, a mix of both.
  const double with_batch = std::min(s.batch, 1.0);
  const double step = with_batch * cost.DecodeStepSeconds(std::max(s.batch, 1.0),
                                                          std::max(s.batch, 1.0) * stats.mean_decode_context) +
                      (1 - with_batch) * p.per_step_seconds;
  std::vector<double> service;
  for (size_t i = 0; i < work.size(); ++i) {
    service.push_back(work[i] + std::ceil(stats.uncached_grid[i] / chunk) * step);
  }
  s.rho_prefill = node_rate * Mean(service);
  s.prefill_stable = s.rho_prefill < 1;
  s.mean_wait = MG1WaitSeconds(node_rate, Mean(service), MeanSquare(service));
  s.ttft_samples = service;
  s.prefill_part = s.mean_wait + Mean(service);
  s.ttft_mean = s.prefill_part;
  const double prefilling = node_rate * Mean(service);
  s.slots = s.batch + prefilling;
  s.kv_tokens = s.batch * stats.mean_decode_context + prefilling * stats.mean_prompt;
  return s;
}

PoolState Evaluate(const Layout& layout, const CostModel& cost, const WorkloadStats& stats, double rate) {
  return layout.colocated() ? EvaluateColocated(layout, cost, stats, rate)
                            : EvaluateDisaggregated(layout, cost, stats, rate);
}

double TtftQuantile(const PoolState& s, double p) {
  if (!s.prefill_stable || !s.transfer_stable) return kInf;
  return WaitPlusServiceQuantile(p, s.rho_prefill, s.mean_wait, s.ttft_samples);
}

// The largest rate for which `ok` holds (ok is monotone: true below, false above); 0 when
// it fails at any rate.
double MaxRate(const std::function<bool(double)>& ok) {
  double lo = 1e-6;
  if (!ok(lo)) return 0;
  double hi = lo * 2;
  while (ok(hi)) {
    lo = hi;
    hi *= 2;
    if (hi > 1e9) return lo;
  }
  for (int i = 0; i < 40 && hi - lo > 1e-6 * lo; ++i) {
    const double mid = (lo + hi) / 2;
    (ok(mid) ? lo : hi) = mid;
  }
  return lo;
}

}  // namespace

double MG1WaitSeconds(double arrival_rate, double mean_service, double second_moment_service) {
  const double rho = arrival_rate * mean_service;
  if (rho >= 1) return kInf;
  return arrival_rate * second_moment_service / (2 * (1 - rho));
}

double WaitPlusServiceQuantile(double p, double rho, double mean_wait, const std::vector<double>& samples) {
  if (samples.empty()) return 0;
  if (!std::isfinite(mean_wait) || rho >= 1) return kInf;
  std::vector<double> x = samples;
  std::sort(x.begin(), x.end());
  if (rho <= 0 || mean_wait <= 0) {
    return x[std::min(x.size() - 1, static_cast<size_t>(p * static_cast<double>(x.size())))];
  }
  const double tail_rate = rho / mean_wait;  // of the exponential wait of those who wait
  auto cdf = [&](double t) {
    double sum = 0;
    for (double v : x) {
      if (t >= v) sum += 1 - rho * std::exp(-(t - v) * tail_rate);
    }
    return sum / static_cast<double>(x.size());
  };
  double lo = x.front();
  double hi = x.back() + 50 / tail_rate;
  for (int i = 0; i < 60; ++i) {
    const double mid = (lo + hi) / 2;
    (cdf(mid) < p ? lo : hi) = mid;
  }
  return hi;
}

WorkloadStats ComputeWorkloadStats(const Workload& workload, int block_size) {
  WorkloadStats s;
  const LengthDistribution prompt = workload.PromptLengths();
  const LengthDistribution output = workload.OutputLengths();
  s.prompt_grid = prompt.Grid(kGridPoints);
  const std::vector<int> output_grid = output.Grid(kGridPoints);
  double prompt_sum = 0;
  for (int p : s.prompt_grid) {
    s.uncached_grid.push_back(UncachedPromptTokens(p, workload.prefix_hit_rate, block_size));
    prompt_sum += p;
  }
  s.mean_prompt = prompt_sum / static_cast<double>(s.prompt_grid.size());
  double steps = 0, context_weight = 0;
  for (int o : output_grid) {
    steps += o - 1;
    // A request decoding o − 1 steps attends to prompt + 1 ... prompt + o − 1 tokens.
    context_weight += (o - 1) * (s.mean_prompt + o / 2.0);
  }
  s.mean_decode_steps = steps / static_cast<double>(output_grid.size());
  s.mean_decode_context = steps > 0 ? context_weight / steps : s.mean_prompt;
  s.max_sequence_tokens = *std::max_element(s.prompt_grid.begin(), s.prompt_grid.end()) +
                          *std::max_element(output_grid.begin(), output_grid.end());
  return s;
}

ScreenResult ScreenLayout(const Layout& layout, const CostModel& cost, const WorkloadStats& stats, const Slo& slo,
                          double rate) {
  const NodeLimits& limits = cost.decode_limits();
  const double device_tokens = double{1} * limits.num_device_blocks * limits.block_size;
  auto eval = [&](double r) { return Evaluate(layout, cost, stats, r); };
  struct Bound {
    Constraint constraint;
    std::function<bool(double)> ok;
  };
  const std::vector<Bound> bounds = {
      {Constraint::kPrefillCompute, [&](double r) { return TtftQuantile(eval(r), slo.attainment) <= slo.ttft_seconds; }},
      {Constraint::kTransfer, [&](double r) { return eval(r).transfer_stable; }},
      {Constraint::kDecodeStepTime,
       [&](double r) {
         const PoolState s = eval(r);
         return s.decode_stable && s.tpot <= slo.tpot_seconds;
       }},
      {Constraint::kDecodeBatchSlots,
       [&](double r) {
         const PoolState s = eval(r);
         return s.decode_stable && s.slots <= limits.max_num_seqs;
       }},
      {Constraint::kDecodeKvCapacity,
       [&](double r) {
         const PoolState s = eval(r);
         return s.decode_stable && s.kv_tokens <= device_tokens;
       }},
  };
  ScreenResult out;
  out.layout = layout;
  out.max_rate = kInf;
  for (const Bound& b : bounds) {
    const double max_rate = MaxRate(b.ok);
    if (max_rate < out.max_rate) {
      out.max_rate = max_rate;
      out.binding = b.constraint;
    }
  }
  if (out.binding == Constraint::kPrefillCompute && out.max_rate > 0) {
    // A TTFT bound that the handoff takes most of is the transfer's.
    const PoolState s = eval(out.max_rate);
    if (s.transfer_part > s.prefill_part) out.binding = Constraint::kTransfer;
  }
  const PoolState s = eval(rate);
  const bool stable = s.prefill_stable && s.transfer_stable && s.decode_stable;
  out.at_rate = {.ttft_p50 = TtftQuantile(s, 0.5),
                 .ttft_p90 = TtftQuantile(s, 0.9),
                 .tpot_p50 = s.decode_stable ? s.tpot : kInf,
                 .tpot_p90 = s.decode_stable ? s.tpot : kInf};
  out.meets_slo_at_rate = stable && rate <= out.max_rate;
  out.prefill_utilization = s.rho_prefill;
  out.transfer_utilization = s.rho_transfer;
  out.decode_batch = s.decode_stable ? s.batch : kInf;
  out.decode_kv_fraction = s.decode_stable ? s.kv_tokens / device_tokens : kInf;
  return out;
}

}  // namespace tandem::planner
