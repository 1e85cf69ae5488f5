// A plan as JSON (tandem-plan --json): the inputs that shaped it (profiles'
// identity, cost models with their fit errors, workload, SLO, budget), every
// candidate's screen and simulation, the recommendation. Keys in a fixed order
// and numbers as computed, so the same inputs give the same text.
// Thread rule: free functions.
#pragma once

#include <string>
#include <vector>

#include "planner/cost_model.h"
#include "planner/plan.h"
#include "planner/profile.h"

namespace tandem::planner {

// What the JSON says about where the plan came from.
struct PlanContext {
  std::vector<std::string> profile_paths = {};  // as given
  const Profile* prefill_profile = nullptr;
  const Profile* decode_profile = nullptr;
  const Workload* workload = nullptr;
  const Slo* slo = nullptr;
  const PlanOptions* options = nullptr;
  std::string launch = {};  // the launch configuration text of the recommended layout
};

// Two-space indents, a final newline; +inf as null.
std::string PlanToJson(const Plan& plan, const CostModel& cost, const PlanContext& context);

}  // namespace tandem::planner
