// tandem-plan's text on stdout: the cost models with their fit errors, the
// candidate table and the recommendation. Thread rule: free functions.
#pragma once

#include <string>

#include "planner/cost_model.h"
#include "planner/plan.h"

namespace tandem::tools {

// The cost models the plan used, one line each, with their fit errors.
std::string FormatCostModel(const planner::CostModel& cost);
// One row per candidate: layout, GPUs, max goodput (req/s; "~" where only the
// screen estimated it), output tokens/s per GPU at it, TTFT and TPOT p50/p90 at
// the requested rate, the screen's binding constraint, headroom over the rate;
// the recommended row is marked ">".
std::string FormatPlanTable(const planner::Plan& plan);

}  // namespace tandem::tools
