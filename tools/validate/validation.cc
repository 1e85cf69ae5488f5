#include "tools/validate/validation.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <tuple>
#include <utility>

#include "planner/linear_fit.h"
#include "common/metrics/metric_names.h"
#include "planner/simulator.h"

namespace tandem::tools {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr size_t kMaxRecords = 1'000'000;

double Quantile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(std::ceil(p * static_cast<double>(v.size())));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

double OfferedRate(const std::vector<MeasuredRequest>& requests) {
  const double span = requests.back().send_s - requests.front().send_s;
  return span > 0 ? static_cast<double>(requests.size() - 1) / span : 0;
}

}  // namespace

StatusOr<std::vector<MeasuredRequest>> ParseRequestRecords(std::string_view text) {
  std::vector<MeasuredRequest> out;
  std::istringstream in{std::string(text)};
  int line_number = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = "request record line " + std::to_string(line_number);
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) return InvalidArgumentError(where + ": not a JSON object");
    MeasuredRequest r;
    try {
      r.send_s = j.at("send_s").get<double>();
      r.prompt_tokens = j.at("prompt_tokens").get<int>();
      r.output_tokens = j.at("output_tokens").get<int>();
      r.ok = j.at("ok").get<bool>();
      r.ttft_s = j.at("ttft_s").get<double>();
      r.e2e_s = j.at("e2e_s").get<double>();
      r.completion_tokens = j.at("completion_tokens").get<int>();
    } catch (const nlohmann::json::exception& e) {
      return InvalidArgumentError(where + ": " + e.what());
    }
    if (r.prompt_tokens < 1 || r.output_tokens < 1 || r.send_s < 0) {
      return InvalidArgumentError(where + ": lengths must be >= 1 and the send time >= 0");
    }
    out.push_back(r);
    if (out.size() > kMaxRecords) return InvalidArgumentError("more than 1,000,000 request records");
  }
  if (out.size() < 2) return InvalidArgumentError("fewer than two request records");
  // Each sender thread stamps its own send time: neighbours can swap by microseconds.
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.send_s < b.send_s; });
  return out;
}

PointStats MeasuredStats(const std::vector<MeasuredRequest>& requests, const planner::Slo& slo) {
  PointStats s;
  s.requests = static_cast<int>(requests.size());
  if (requests.empty()) return s;
  s.offered_rate = OfferedRate(requests);
  std::vector<double> ttft, tpot;
  double e2e_sum = 0;
  int met = 0;
  for (const MeasuredRequest& r : requests) {
    if (!r.ok) continue;
    ++s.completed;
    const double p = r.completion_tokens > 1 ? (r.e2e_s - r.ttft_s) / (r.completion_tokens - 1) : 0;
    ttft.push_back(r.ttft_s);
    tpot.push_back(p);
    e2e_sum += r.e2e_s;
    if (r.ttft_s <= slo.ttft_seconds && p <= slo.tpot_seconds) ++met;
  }
  s.e2e_mean = s.completed > 0 ? e2e_sum / s.completed : kInf;
  s.ttft_p50 = Quantile(ttft, 0.5);
  s.ttft_p90 = Quantile(ttft, 0.9);
  s.tpot_p50 = Quantile(tpot, 0.5);
  s.attainment = static_cast<double>(met) / s.requests;
  s.goodput = s.attainment * s.offered_rate;
  return s;
}

double IdleCoresPerNode(const ClusterCpu& idle, double idle_seconds, int nodes) {
  if (!(idle_seconds > 0) || nodes <= 0) return 0;
  return std::max(0.0, idle.process_seconds / idle_seconds / nodes);
}

void AddCpu(ClusterCpu* cpu, std::string_view process, std::string_view counter, double value) {
  const bool node = process != "router";
  const bool decodes = node && !process.starts_with("prefill");
  if (counter == metrics::kProcessCpuSeconds) {
    cpu->process_seconds += value;
    cpu->nodes += node ? 1 : 0;
    if (decodes) {
      cpu->decode_process_seconds += value;
      ++cpu->decode_nodes;
    }
  } else if (counter == metrics::kEngineCpuSeconds && node) {
    cpu->engine_seconds += value;
    (decodes ? cpu->decode_engine_seconds : cpu->prefill_engine_seconds) += value;
  } else if (counter == metrics::kEngineRunQueueWaitSeconds && node) {
    (decodes ? cpu->decode_engine_wait_seconds : cpu->prefill_engine_wait_seconds) += value;
  }
}

ClusterCpu CpuBetween(const ClusterCpu& from, const ClusterCpu& to) {
  return {.process_seconds = to.process_seconds - from.process_seconds,
          .engine_seconds = to.engine_seconds - from.engine_seconds,
          .prefill_engine_seconds = to.prefill_engine_seconds - from.prefill_engine_seconds,
          .decode_process_seconds = to.decode_process_seconds - from.decode_process_seconds,
          .decode_engine_seconds = to.decode_engine_seconds - from.decode_engine_seconds,
          .decode_nodes = to.decode_nodes,
          .nodes = to.nodes,
          .prefill_engine_wait_seconds = to.prefill_engine_wait_seconds - from.prefill_engine_wait_seconds,
          .decode_engine_wait_seconds = to.decode_engine_wait_seconds - from.decode_engine_wait_seconds};
}

double RanOfRunnable(double engine_cpu_seconds, double engine_wait_seconds) {
  const double runnable = engine_cpu_seconds + engine_wait_seconds;
  return runnable > 0 ? engine_cpu_seconds / runnable : 0;
}

ServingSample MeasureServingSample(const ClusterCpu& run, double idle_cores_per_node, double client_seconds,
                                   double run_seconds, int requests, int64_t output_tokens) {
  const double idle_seconds = idle_cores_per_node * run_seconds;
  return {.cpu_seconds = std::max(0.0, run.process_seconds - run.engine_seconds - idle_seconds * run.nodes +
                                           client_seconds),
          .decode_node_cpu_seconds = std::max(0.0, run.decode_process_seconds - run.decode_engine_seconds -
                                                       idle_seconds * run.decode_nodes),
          .requests = requests,
          .output_tokens = output_tokens};
}

namespace {

// cpu = requests · a + output_tokens · b, non-negative; {a, b}, or {a, 0} when the runs
// cannot tell the two apart; {0, 0} without runs.
std::pair<double, double> FitPerRequestAndToken(const std::vector<ServingSample>& samples,
                                                double ServingSample::*cpu_seconds) {
  std::vector<std::vector<double>> both, requests;
  std::vector<double> cpu;
  for (const ServingSample& s : samples) {
    if (!(s.*cpu_seconds > 0) || s.requests <= 0) continue;
    both.push_back({static_cast<double>(s.requests), static_cast<double>(s.output_tokens)});
    requests.push_back({static_cast<double>(s.requests)});
    cpu.push_back(s.*cpu_seconds);
  }
  const planner::FitOptions options{.weighting = planner::FitWeighting::kAbsolute, .non_negative = true};
  if (StatusOr<planner::LinearFit> fit = planner::FitLeastSquares(both, cpu, options); fit.ok()) {
    return {fit->coefficients[0], fit->coefficients[1]};
  }
  if (StatusOr<planner::LinearFit> per_request = planner::FitLeastSquares(requests, cpu, options); per_request.ok()) {
    return {per_request->coefficients[0], 0};  // runs of alike tokens per request
  }
  return {0, 0};
}

}  // namespace

ServingCpu FitServingCpu(double idle_cores_per_node, const std::vector<ServingSample>& samples) {
  ServingCpu out{.idle_cores_per_node = idle_cores_per_node};
  std::tie(out.seconds_per_request, out.seconds_per_output_token) =
      FitPerRequestAndToken(samples, &ServingSample::cpu_seconds);
  const auto [node_per_request, node_per_token] =
      FitPerRequestAndToken(samples, &ServingSample::decode_node_cpu_seconds);
  out.node_seconds_per_request = std::min(out.seconds_per_request, node_per_request);
  out.node_seconds_per_output_token = std::min(out.seconds_per_output_token, node_per_token);
  return out;
}

EngineCalibration CalibrateEngines(const planner::EngineWork& prefill, double prefill_cpu,
                                   const planner::EngineWork& decode, double decode_cpu) {
  const double work = prefill.seconds + decode.seconds, cpu = prefill_cpu + decode_cpu;
  if (!(work > 0) || !(cpu > 0)) return {};
  const EngineCalibration uniform{.speed = work / cpu, .step_overhead_seconds = 0};
  const double p = static_cast<double>(prefill.steps), d = static_cast<double>(decode.steps);
  if (p < 1 || d < 1) return uniform;
  const double denominator = prefill_cpu * d - p * decode_cpu;
  if (denominator == 0) return uniform;
  const double speed = (prefill.seconds * d - p * decode.seconds) / denominator;
  const double overhead = (speed * decode_cpu - decode.seconds) / d;
  if (!(speed >= 0.05 && speed <= 20) || !(overhead >= 0)) return uniform;
  return {.speed = speed, .step_overhead_seconds = overhead};
}

planner::SimOptions HostSimOptions(const HostModel& host, uint64_t seed) {
  return {.seed = seed,
          .host_cores = host.cores,
          .host_idle_cores_per_node = host.serving.idle_cores_per_node,
          .host_cpu_seconds_per_request = host.serving.seconds_per_request,
          .host_cpu_seconds_per_output_token = host.serving.seconds_per_output_token,
          .host_node_cpu_seconds_per_output_token = host.serving.node_seconds_per_output_token,
          .host_node_cpu_seconds_per_request = host.serving.node_seconds_per_request,
          .engine_speed = host.engine_speed,
          .step_overhead_seconds = host.step_overhead_seconds};
}

PointStats PredictedStats(const planner::Layout& layout, const planner::CostModel& cost,
                          const std::vector<MeasuredRequest>& requests, const planner::Slo& slo, uint64_t seed,
                          const HostModel& host, planner::SimResult* simulated) {
  planner::Workload workload;
  for (const MeasuredRequest& r : requests) {
    workload.trace.push_back({.arrival_seconds = r.send_s, .prompt_tokens = r.prompt_tokens,
                              .output_tokens = r.output_tokens});
  }
  const double rate = workload.TraceRate();
  planner::SimOptions options = HostSimOptions(host, seed);
  options.num_requests = options.max_requests = static_cast<int>(requests.size());
  options.warmup_fraction = 0;
  options.min_span_ttfts = 0;
  options.record_requests = simulated != nullptr;
  const planner::SimResult with_slo = planner::Simulate(layout, cost, workload, slo, rate, options);
  // No deadline: the simulation runs every request to its end, as the cluster did.
  const planner::Slo open{.ttft_seconds = 1e6, .tpot_seconds = 1e6, .attainment = slo.attainment};
  const planner::SimResult all = planner::Simulate(layout, cost, workload, open, rate, options);
  PointStats s;
  s.requests = all.measured;
  s.completed = all.completed;
  s.offered_rate = OfferedRate(requests);
  s.e2e_mean = all.e2e_mean;
  // The engines' busy time at speed 1, the overhead included.
  s.engine_seconds = all.prefill_work.seconds + all.decode_work.seconds +
                     host.step_overhead_seconds * static_cast<double>(all.prefill_work.steps + all.decode_work.steps);
  if (simulated != nullptr) *simulated = all;
  s.ttft_p50 = all.latency.ttft_p50;
  s.ttft_p90 = all.latency.ttft_p90;
  s.tpot_p50 = all.latency.tpot_p50;
  s.attainment = with_slo.attainment;
  s.goodput = s.attainment * s.offered_rate;
  return s;
}

std::string ComparedRecordsJsonl(const std::vector<MeasuredRequest>& requests, const planner::SimResult& simulated) {
  std::string out;
  for (size_t i = 0; i < requests.size(); ++i) {
    const MeasuredRequest& m = requests[i];
    nlohmann::json line = {{"send_s", m.send_s}, {"prompt_tokens", m.prompt_tokens},
                           {"output_tokens", m.output_tokens}, {"ttft_s", m.ttft_s}, {"e2e_s", m.e2e_s},
                           {"predicted_ttft_s", nullptr}, {"predicted_e2e_s", nullptr}};
    if (i < simulated.requests.size()) {
      const planner::SimRequestTimes& p = simulated.requests[i];
      if (p.first >= 0) line["predicted_ttft_s"] = p.first - p.arrival;
      if (p.done >= 0) line["predicted_e2e_s"] = p.done - p.arrival;
    }
    out += line.dump() + "\n";
  }
  return out;
}

PointStats MedianStats(const std::vector<PointStats>& runs) {
  if (runs.empty()) return {};
  auto median = [&](auto field) {
    std::vector<double> v;
    for (const PointStats& r : runs) v.push_back(static_cast<double>(r.*field));
    return Median(std::move(v));
  };
  PointStats s;
  s.requests = static_cast<int>(median(&PointStats::requests));
  s.completed = static_cast<int>(median(&PointStats::completed));
  s.offered_rate = median(&PointStats::offered_rate);
  s.e2e_mean = median(&PointStats::e2e_mean);
  s.ttft_p50 = median(&PointStats::ttft_p50);
  s.ttft_p90 = median(&PointStats::ttft_p90);
  s.tpot_p50 = median(&PointStats::tpot_p50);
  s.attainment = median(&PointStats::attainment);
  s.goodput = median(&PointStats::goodput);
  s.engine_seconds = median(&PointStats::engine_seconds);
  return s;
}

double E2eErrorSpread(const std::vector<PointStats>& predicted, const std::vector<PointStats>& measured) {
  const size_t n = std::min(predicted.size(), measured.size());
  if (n < 2) return 0;
  double lo = kInf, hi = -kInf;
  for (size_t i = 0; i < n; ++i) {
    const double e = RelativeError(predicted[i].e2e_mean, measured[i].e2e_mean);
    if (!std::isfinite(e)) return kInf;
    lo = std::min(lo, e);
    hi = std::max(hi, e);
  }
  return hi - lo;
}

double RelativeError(double predicted, double measured) {
  if (measured == 0) return predicted == 0 ? 0 : kInf;
  return (predicted - measured) / measured;
}

Knee FindKnee(const std::vector<double>& rates, const std::vector<double>& attainments, double target) {
  std::vector<std::pair<double, double>> points;
  for (size_t i = 0; i < rates.size() && i < attainments.size(); ++i) points.push_back({rates[i], attainments[i]});
  std::sort(points.begin(), points.end());
  Knee knee;
  if (points.empty()) return knee;
  if (points.front().second < target) return {.rate = points.front().first, .bracketed = false, .below_sweep = true};
  for (size_t i = 1; i < points.size(); ++i) {
    if (points[i].second >= target) continue;
    const auto [r0, a0] = points[i - 1];
    const auto [r1, a1] = points[i];
    return {.rate = r0 + (r1 - r0) * (a0 - target) / (a0 - a1), .bracketed = true, .below_sweep = false};
  }
  return {.rate = points.back().first, .bracketed = false, .below_sweep = false};
}

std::vector<double> SteadyKneeErrorsUnderProtocol(const planner::Layout& layout, const planner::CostModel& cost,
                                                  const planner::Workload& workload, const planner::Slo& slo,
                                                  const planner::SimOptions& options, double steady_knee,
                                                  const KneeProtocol& protocol, int sweeps) {
  uint64_t seed = options.seed;
  // One point: its runs' offered rate and attainment, the medians.
  auto point = [&](double rate) {
    std::vector<double> offered, attained;
    for (int r = 0; r < protocol.repeats; ++r) {
      planner::SimOptions run = options;
      run.seed = ++seed;
      run.num_requests = run.max_requests =
          std::clamp(static_cast<int>(rate * protocol.seconds_per_point), protocol.min_requests, protocol.max_requests);
      run.warmup_fraction = 0;
      run.min_span_ttfts = 0;
      run.record_requests = true;
      const planner::SimResult result = planner::Simulate(layout, cost, workload, slo, rate, run);
      if (result.requests.size() < 2) continue;
      const double span = result.requests.back().arrival - result.requests.front().arrival;
      offered.push_back(span > 0 ? static_cast<double>(result.requests.size() - 1) / span : rate);
      attained.push_back(result.attainment);
    }
    return std::pair<double, double>{Median(std::move(offered)), Median(std::move(attained))};
  };
  std::vector<double> errors;
  for (int s = 0; s < sweeps && steady_knee > 0; ++s) {
    std::vector<double> rates, attainments;
    auto add = [&](double rate) {
      const auto [offered, attained] = point(rate);
      rates.push_back(offered);
      attainments.push_back(attained);
    };
    for (double fraction : protocol.fractions) add(fraction * steady_knee);
    Knee knee = FindKnee(rates, attainments, slo.attainment);
    if (protocol.refine && knee.bracketed) {
      add(knee.rate);
      knee = FindKnee(rates, attainments, slo.attainment);
    }
    if (knee.bracketed) errors.push_back(RelativeError(steady_knee, knee.rate));
  }
  std::sort(errors.begin(), errors.end());
  return errors;
}

}  // namespace tandem::tools
