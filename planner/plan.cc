#include "planner/plan.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace tandem::planner {
namespace {

std::string Fixed(double v, int digits) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.*f", digits, v);
  return text;
}

Status CheckFits(const CostModel& cost, const Workload& workload, const WorkloadStats& stats, int max_model_len) {
  double longest = stats.max_sequence_tokens;
  for (const TraceRequest& r : workload.trace) longest = std::max<double>(longest, r.prompt_tokens + r.output_tokens);
  if (max_model_len > 0 && longest > max_model_len) {
    return FailedPreconditionError("requests of up to " + Fixed(longest, 0) + " tokens (prompt + output) exceed the " +
                                   "profile's max_model_len " + std::to_string(max_model_len) +
                                   ": the nodes would refuse them");
  }
  for (const NodeLimits& limits : {cost.prefill_limits(), cost.decode_limits()}) {
    const double pool = double{1} * limits.num_device_blocks * limits.block_size;
    if (longest > pool) {
      return FailedPreconditionError("requests of up to " + Fixed(longest, 0) +
                                     " tokens (prompt + output) do not fit a node's KV pool of " + Fixed(pool, 0) +
                                     " tokens: profile with more KV (kv.num_device_blocks, kv.cache_bytes)");
    }
  }
  return Status::Ok();
}

// Which candidates to simulate: those the screen says serve the rate, fewest GPUs
// (then most rate) first, up to `count`; plus the two of most goodput per GPU.
std::set<size_t> PickForSimulation(const std::vector<CandidateResult>& c, int count) {
  std::vector<size_t> order(c.size());
  for (size_t i = 0; i < c.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const ScreenResult& x = c[a].screen;
    const ScreenResult& y = c[b].screen;
    if (x.meets_slo_at_rate != y.meets_slo_at_rate) return x.meets_slo_at_rate;
    if (x.meets_slo_at_rate && x.layout.Gpus() != y.layout.Gpus()) return x.layout.Gpus() < y.layout.Gpus();
    return x.max_rate > y.max_rate;
  });
  std::set<size_t> chosen;
  for (size_t i = 0; i < order.size() && static_cast<int>(chosen.size()) < count; ++i) {
    if (c[order[i]].screen.max_rate > 0) chosen.insert(order[i]);
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return c[a].screen.max_rate / c[a].screen.layout.Gpus() > c[b].screen.max_rate / c[b].screen.layout.Gpus();
  });
  for (size_t i = 0; i < std::min<size_t>(2, order.size()); ++i) {
    if (c[order[i]].screen.max_rate > 0) chosen.insert(order[i]);
  }
  return chosen;
}

}  // namespace

std::vector<Layout> CandidateLayouts(int max_gpus, bool colocated) {
  std::vector<Layout> out;
  for (int gpus = 1; gpus <= max_gpus; ++gpus) {
    for (int x = 1; x < gpus; ++x) out.push_back({.prefill_nodes = x, .decode_nodes = gpus - x});
    if (colocated) out.push_back({.colocated_nodes = gpus});
  }
  return out;
}

StatusOr<Plan> MakePlan(const CostModel& cost, const Workload& workload, const Slo& slo, const PlanOptions& options,
                        int max_model_len) {
  TANDEM_RETURN_IF_ERROR(workload.Validate());
  TANDEM_RETURN_IF_ERROR(slo.Validate());
  if (options.max_gpus < 1 || options.max_gpus > 256) return InvalidArgumentError("budget: max_gpus must be in [1, 256]");
  if (options.max_gpus < 2 && !options.colocated) {
    return InvalidArgumentError("budget: a disaggregated layout needs at least 2 GPUs");
  }
  if (options.sim.num_requests < 10) return InvalidArgumentError("simulation: num_requests must be >= 10");
  Plan plan;
  plan.rate = workload.rate;
  plan.stats = ComputeWorkloadStats(workload, cost.decode_limits().block_size);
  plan.mean_output_tokens = plan.stats.mean_decode_steps + 1;
  TANDEM_RETURN_IF_ERROR(CheckFits(cost, workload, plan.stats, max_model_len));
  for (const Layout& layout : CandidateLayouts(options.max_gpus, options.colocated)) {
    CandidateResult c;
    c.screen = ScreenLayout(layout, cost, plan.stats, slo, workload.rate);
    plan.candidates.push_back(std::move(c));
  }
  const auto best = std::max_element(plan.candidates.begin(), plan.candidates.end(), [](const auto& a, const auto& b) {
    return a.screen.max_rate < b.screen.max_rate;
  });
  if (best->screen.max_rate <= 0) {
    const ScreenResult light = ScreenLayout(best->screen.layout, cost, plan.stats, slo, 1e-6);
    return FailedPreconditionError("no layout meets the SLO at any rate: at light load the best, " +
                                   best->screen.layout.Name() + ", has TTFT p90 " +
                                   Fixed(light.at_rate.ttft_p90 * 1e3, 1) + " ms (SLO " +
                                   Fixed(slo.ttft_seconds * 1e3, 1) + " ms) and TPOT " +
                                   Fixed(light.at_rate.tpot_p90 * 1e3, 2) + " ms (SLO " +
                                   Fixed(slo.tpot_seconds * 1e3, 2) + " ms); its binding constraint is " +
                                   ConstraintName(best->screen.binding));
  }
  for (size_t i : PickForSimulation(plan.candidates, options.simulate)) {
    CandidateResult& c = plan.candidates[i];
    c.simulated = true;
    c.des = FindMaxGoodput(c.screen.layout, cost, workload, slo, c.screen.max_rate, options.sim);
    c.at_rate = Simulate(c.screen.layout, cost, workload, slo, workload.rate, options.sim);
    if (c.des.goodput <= 0) continue;
    for (double fraction : {0.25, 0.5, 0.75}) {
      c.curve.push_back(Simulate(c.screen.layout, cost, workload, slo, fraction * c.des.goodput, options.sim));
    }
    c.curve.push_back(c.des.at_goodput);
  }
  for (size_t i = 0; i < plan.candidates.size(); ++i) {
    const CandidateResult& c = plan.candidates[i];
    if (!c.simulated || c.des.goodput < workload.rate || c.at_rate.attainment < slo.attainment) continue;
    if (plan.recommended < 0) {
      plan.recommended = static_cast<int>(i);
      continue;
    }
    const CandidateResult& r = plan.candidates[static_cast<size_t>(plan.recommended)];
    if (c.screen.layout.Gpus() < r.screen.layout.Gpus() ||
        (c.screen.layout.Gpus() == r.screen.layout.Gpus() && c.des.goodput > r.des.goodput)) {
      plan.recommended = static_cast<int>(i);
    }
  }
  for (const CandidateResult& c : plan.candidates) {
    if (!c.simulated || c.screen.max_rate <= 0 || c.des.goodput <= 0) continue;
    const double ratio = c.des.goodput / c.screen.max_rate;
    if (ratio < 0.5 || ratio > 2) {
      plan.warnings.push_back(c.screen.layout.Name() + ": the simulation's goodput " + Fixed(c.des.goodput, 2) +
                              " req/s is far from the screen's " + Fixed(c.screen.max_rate, 2) +
                              " (the closed forms miss something here; trust the simulation)");
    }
  }
  return plan;
}

}  // namespace tandem::planner
