// What tandem-validate prints and writes: a table per layout (predicted against
// measured per rate, with relative errors), the summary of issue 24's must-show
// numbers, and the whole sweep as JSON.
// Thread rule: free functions over values.
#pragma once

#include <string>
#include <vector>

#include "planner/layout.h"
#include "tools/validate/validation.h"

namespace tandem::tools {

struct SweepPoint {
  double target_rate = 0;        // req/s asked of the load generator
  double fraction = 0;           // of the layout's predicted knee
  PointStats measured;           // median over the repeats
  PointStats predicted;          // median over the repeats (each on its run's requests; the host as calibrated)
  PointStats at_run_speed;       // the same with the engines as each run measured them (CalibrateEngines)
  PointStats profiled;           // the same at the profile's speed (engine speed 1)
  double engine_speed = 1;       // the runs' engine speed against the profile (CalibrateEngines), median
  double load_average = 0;       // the host's 1-minute load average before the point (max over repeats)
  int runs = 1;                  // repeats measured
  double e2e_error_spread = 0;   // E2eErrorSpread of its runs (the prediction proper); 0 with one run
};

struct LayoutSweep {
  planner::Layout layout;
  double predicted_knee = 0;     // the planner's goodput: max Poisson rate at the SLO attainment (host as tracked)
  double run_speed_knee = 0;     // the same with the engines as the sweep's runs measured them (medians)
  double profiled_knee = 0;      // the same at the profile's speed
  double calibrated_speed = 0;   // the engines' speed its calibration run measured (0: none ran)
  Knee measured_knee;            // where the sweep's measured attainment crosses it
  // Where each prediction's attainment of the sweep's own runs, at the rates they offered,
  // crosses it: the measured knee's way on the same arrivals (whose luck moves a knee measured
  // from runs of seconds as much as any model error: docs/planner.md).
  Knee predicted_knee_on_runs, run_speed_knee_on_runs, profiled_knee_on_runs;
  // The steady-state knee's relative errors against the sweep's protocol run on a cluster that is
  // exactly the model (SteadyKneeErrorsUnderProtocol, sorted): how far this measurement alone
  // puts a knee from the steady state's.
  std::vector<double> protocol_knee_errors;
  std::vector<SweepPoint> points;
};

struct ValidationSummary {
  int points = 0;
  double mean_e2e_error = 0;        // mean |relative error| of mean E2E over every point
  double mean_ttft_p90_error = 0;   // mean |relative error| of p90 TTFT over every point
  int light_points = 0;             // points at or below the predicted knee (fraction <= 1)
  double light_e2e_error = 0;       // mean |relative error| of mean E2E over them (the CI bound's)
  double max_knee_error = 0;        // largest |relative error| of a bracketed knee, on the runs
  int bracketed_knees = 0;
  double max_steady_knee_error = 0;  // the same of the planner's steady-state knee
  // The largest over the layouts of the 90th percentile of |protocol_knee_errors|: the steady-state
  // knee's error this measurement gives a model-exact cluster (0: not simulated).
  double protocol_knee_error_p90 = 0;
  std::vector<std::string> predicted_top2;  // by predicted goodput per node
  std::string measured_best;                // by measured knee per node
  bool best_in_top2 = false;
  double max_load_average = 0;
  // The median over the points with repeats of their E2eErrorSpread: how much two runs of one
  // point disagree on the error, which no prediction can get under; 0 points without repeats.
  int repeated_points = 0;
  double median_e2e_error_spread = 0;
};

// Which prediction a summary is of: the engines at the speed calibrated before the
// sweep (the prediction proper), at the speed each run measured (the model given the
// engines' actual speed), or at the profile's.
enum class Prediction { kCalibrated, kRunSpeed, kProfiled };
ValidationSummary Summarize(const std::vector<LayoutSweep>& sweeps, Prediction which = Prediction::kCalibrated);

// One Markdown table per layout.
std::string FormatSweeps(const std::vector<LayoutSweep>& sweeps);
// The must-show lines against issue 24's bounds.
// The must-show lines against issue 24's bounds (the predictions proper), then the same
// errors at each run's engine speed and at the profile's.
std::string FormatSummary(const ValidationSummary& summary, const ValidationSummary& at_run_speed,
                          const ValidationSummary& as_profiled);
// Everything, with `context` (the workload, SLO, profile, machine) under "context".
std::string ValidationJson(const std::vector<LayoutSweep>& sweeps, const ValidationSummary& summary,
                           const ValidationSummary& at_run_speed, const ValidationSummary& as_profiled,
                           const std::string& context_json);

}  // namespace tandem::tools
