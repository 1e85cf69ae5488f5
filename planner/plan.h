// MakePlan: the capacity plan for a workload and its SLO within a GPU budget.
// Every candidate (xPyD with x, y ≥ 1 and x + y ≤ max_gpus, and N colocated
// nodes for N ≤ max_gpus) is screened by the analytic model; the most promising
// (those the screen says serve the rate, fewest GPUs first, and the two with
// the most goodput per GPU) are simulated (simulator.h) with a binary search for
// their max goodput and once at the requested rate. The recommended layout is
// the simulated one with the fewest GPUs whose goodput covers the rate (then the
// most goodput).
// Thread rule: free functions over values.
#pragma once

#include <string>
#include <vector>

#include "common/base/status.h"
#include "planner/analytic_model.h"
#include "planner/cost_model.h"
#include "planner/simulator.h"

namespace tandem::planner {

struct PlanOptions {
  int max_gpus = 8;           // the budget: nodes (GPUs) at most
  bool colocated = true;      // also consider colocated layouts
  int simulate = 6;           // candidates simulated (besides the two most efficient)
  SimOptions sim = {};
};

struct CandidateResult {
  ScreenResult screen;
  bool simulated = false;
  GoodputResult des;      // when simulated
  SimResult at_rate;      // the simulation at the requested rate, when simulated
  // Simulations at ¼, ½, ¾ and all of the goodput (throughput against interactivity).
  std::vector<SimResult> curve;

  // The simulated goodput, else the screen's max rate (req/s).
  double Goodput() const { return simulated ? des.goodput : screen.max_rate; }
  // At the requested rate: the simulation's percentiles, else the screen's.
  const LatencySummary& Latency() const { return simulated ? at_rate.latency : screen.at_rate; }
};

struct Plan {
  double rate = 0;                      // the requested rate, req/s
  WorkloadStats stats;
  double mean_output_tokens = 0;
  std::vector<CandidateResult> candidates;  // by GPUs, then colocated last, then prefill nodes
  int recommended = -1;                 // index into candidates; -1: none serves the rate
  std::vector<std::string> warnings;

  // Output tokens/s per GPU at a candidate's goodput.
  double TokensPerGpu(const CandidateResult& c) const {
    return c.Goodput() * mean_output_tokens / c.screen.layout.Gpus();
  }
};

// InvalidArgument for a bad workload, SLO or budget; FailedPrecondition when a
// request cannot fit a node (prompt + output over the KV pool or max_model_len)
// or when no layout meets the SLO at any rate (the message says what stops the
// best one). A plan whose layouts all fall short of the rate is returned with
// recommended = -1 (the caller reports it).
StatusOr<Plan> MakePlan(const CostModel& cost, const Workload& workload, const Slo& slo, const PlanOptions& options,
                        int max_model_len);

// Every candidate layout of a budget.
std::vector<Layout> CandidateLayouts(int max_gpus, bool colocated);

}  // namespace tandem::planner
