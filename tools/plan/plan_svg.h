// tandem-plan's two plots as hand-written SVG (no plotting dependency):
//   goodput_vs_pd_ratio.svg: max goodput against the prefill share x / (x + y),
//     one line per total GPU count, colocated layouts at the right edge;
//   throughput_vs_interactivity.svg: output tokens/s per GPU against tokens/s per
//     user (1 / TPOT p50) of each simulated layout at ¼ … all of its goodput.
// Thread rule: free functions.
#pragma once

#include <string>

#include "common/base/status.h"
#include "planner/plan.h"

namespace tandem::tools {

std::string GoodputVsRatioSvg(const planner::Plan& plan);
std::string ThroughputVsInteractivitySvg(const planner::Plan& plan);
// Writes both into `dir` (created if missing).
Status WritePlanSvgs(const planner::Plan& plan, const std::string& dir);

}  // namespace tandem::tools
