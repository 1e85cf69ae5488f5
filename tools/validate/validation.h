// The validation's arithmetic, apart from the processes: a run's per-request
// records (tandem-bench-serving --requests-out) in, the planner's prediction for
// the same requests, measured and predicted statistics, relative errors, the
// goodput knee of a rate sweep, and the summary of issue 24's must-show numbers.
//
// The prediction of a point replays the run's own arrivals and lengths as a trace
// through the planner's simulator (common random numbers: the model is compared
// on the requests the cluster served, not on another Poisson draw), once with the
// SLO (attainment) and once with no deadline (every request to its end: latencies).
// Thread rule: free functions over values.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/base/status.h"
#include "planner/cost_model.h"
#include "planner/layout.h"
#include "planner/statistics.h"
#include "planner/simulator.h"
#include "planner/workload.h"

namespace tandem::tools {

// One request as the load generator recorded it (seconds).
struct MeasuredRequest {
  double send_s = 0;          // from the run's start
  int prompt_tokens = 0;
  int output_tokens = 0;      // asked for (ignore_eos)
  bool ok = false;
  double ttft_s = 0;
  double e2e_s = 0;
  int completion_tokens = 0;
};

// JSON lines of tandem-bench-serving --requests-out, sorted by send time.
// InvalidArgument with the line number for a malformed line; fewer than two
// requests is an error.
StatusOr<std::vector<MeasuredRequest>> ParseRequestRecords(std::string_view text);

// One run's statistics (seconds; rates in req/s). Failed requests miss the SLO and
// are left out of the latencies.
struct PointStats {
  int requests = 0;
  int completed = 0;
  double offered_rate = 0;  // (requests − 1) / span of the sends
  double e2e_mean = 0;
  double ttft_p50 = 0;
  double ttft_p90 = 0;
  double tpot_p50 = 0;      // per request (e2e − ttft) / (tokens − 1), its median
  double attainment = 0;    // fraction of the requests within the SLO
  double goodput = 0;       // attainment × offered_rate
  // The engine threads' busy time, all nodes: measured, their CPU time over the run
  // (tandem_engine_cpu_seconds_total); predicted, the simulated steps' profiled times.
  double engine_seconds = 0;
};

PointStats MeasuredStats(const std::vector<MeasuredRequest>& requests, const planner::Slo& slo);

// CPU seconds of a cluster's processes (router and nodes), from their counters.
struct ClusterCpu {
  double process_seconds = 0;  // process_cpu_seconds_total, summed
  double engine_seconds = 0;   // the nodes' tandem_engine_cpu_seconds_total, summed
  double prefill_engine_seconds = 0;  // of it, the prefill nodes'
  // The nodes that decode (decode and colocated nodes): their processes' CPU, of it their
  // engine threads', and how many they are; and all the nodes (the router is none).
  double decode_process_seconds = 0;
  double decode_engine_seconds = 0;
  int decode_nodes = 0;
  int nodes = 0;
  // The engine threads' waits for a core (tandem_engine_runqueue_wait_seconds_total): the
  // prefill nodes', and the nodes' that decode.
  double prefill_engine_wait_seconds = 0;
  double decode_engine_wait_seconds = 0;
};

// Adds one counter of one process (the router, or a node by its name: prefill-N, or one
// that decodes) to `cpu`: process_cpu_seconds_total (which counts the process),
// tandem_engine_cpu_seconds_total or tandem_engine_runqueue_wait_seconds_total; other
// counters are ignored.
void AddCpu(ClusterCpu* cpu, std::string_view process, std::string_view counter, double value);
// The CPU between two readings (the processes of `to`).
ClusterCpu CpuBetween(const ClusterCpu& from, const ClusterCpu& to);
// Of the time engine threads were runnable, the share they ran: cpu / (cpu + wait); 1 when
// they never waited, 0 when they did nothing.
double RanOfRunnable(double engine_cpu_seconds, double engine_wait_seconds);

// What the serving path costs the host's CPU, outside the engines' steps, as the
// simulation takes it (planner::SimOptions::host_idle_cores_per_node,
// host_cpu_seconds_per_request, host_cpu_seconds_per_output_token,
// host_node_cpu_seconds_per_output_token, host_node_cpu_seconds_per_request).
struct ServingCpu {
  double idle_cores_per_node = 0;
  double seconds_per_request = 0;
  double seconds_per_output_token = 0;
  double node_seconds_per_output_token = 0;  // of it, the decode nodes' own (at most all of it)
  double node_seconds_per_request = 0;       // of seconds_per_request, the decode nodes' own
};

// The processes' CPU over an idle spell of `idle_seconds` (polling, heartbeats), per node.
double IdleCoresPerNode(const ClusterCpu& idle, double idle_seconds, int nodes);

// One run's serving-path CPU: every process's CPU less the engine threads' and the idle
// share (`idle_cores_per_node` × run.nodes × `run_seconds`), plus the load generator's own
// `client_seconds`; of it the decode nodes' own (their processes' less their engines' and
// their idle share); and what the run served.
struct ServingSample {
  double cpu_seconds = 0;
  double decode_node_cpu_seconds = 0;
  int requests = 0;
  int64_t output_tokens = 0;
};
ServingSample MeasureServingSample(const ClusterCpu& run, double idle_cores_per_node, double client_seconds,
                                   double run_seconds, int requests, int64_t output_tokens);

// The serving path's CPU per request and per output token: the least-squares fit
// (planner::FitLeastSquares, non-negative) of cpu = requests · a + output_tokens · b over
// runs of different output lengths; all per request when the runs' tokens per request
// are alike and cannot tell the two apart. Runs of no CPU are left out. The decode nodes'
// own CPU per request and per output token are fitted the same way from their part (each at
// most the whole path's).
ServingCpu FitServingCpu(double idle_cores_per_node, const std::vector<ServingSample>& samples);

// The host the nodes share in a prediction: none (cores 0: a device per node), or
// `cores` less what the serving path takes.
struct HostModel {
  int cores = 0;
  ServingCpu serving;
  double engine_speed = 1;            // planner::SimOptions::engine_speed
  double step_overhead_seconds = 0;   // planner::SimOptions::step_overhead_seconds
};

// The simulation's options for `host` (its cores, serving path and engines).
planner::SimOptions HostSimOptions(const HostModel& host, uint64_t seed);

// The engines' speed s and per-step overhead o from a run's engine threads: the prefill
// nodes' CPU time `prefill_cpu` and the decode nodes' `decode_cpu` against the work the
// simulation of the same run gave each (profiled seconds P, D over p, d steps), solving
//   s · prefill_cpu = P + o · p   and   s · decode_cpu = D + o · d.
// When that has no sound answer (o < 0, s out of [0.05, 20], too few steps) the
// overhead is 0 and s the total work over the total CPU; {1, 0} without CPU.
struct EngineCalibration {
  double speed = 1;
  double step_overhead_seconds = 0;
};
EngineCalibration CalibrateEngines(const planner::EngineWork& prefill, double prefill_cpu,
                                   const planner::EngineWork& decode, double decode_cpu);

// The planner's prediction for the same requests on `layout`; `simulated` (if not null)
// gets the simulation of every request to its end.
PointStats PredictedStats(const planner::Layout& layout, const planner::CostModel& cost,
                          const std::vector<MeasuredRequest>& requests, const planner::Slo& slo, uint64_t seed,
                          const HostModel& host = {}, planner::SimResult* simulated = nullptr);

// One JSON line per request, measured beside predicted (`simulated` with its requests
// recorded, in the same order): send_s, prompt_tokens, output_tokens, ttft_s, e2e_s,
// predicted_ttft_s, predicted_e2e_s (null where the simulation never got there).
std::string ComparedRecordsJsonl(const std::vector<MeasuredRequest>& requests, const planner::SimResult& simulated);

// Each field the median over the runs (repeats of one point).
PointStats MedianStats(const std::vector<PointStats>& runs);
// How far the repeats of one point disagree on the prediction's error: the largest less the
// smallest of the runs' relative mean-E2E errors (each run against its own prediction, pairs
// in order); 0 with fewer than two runs. The host's noise floor for the E2E bound.
double E2eErrorSpread(const std::vector<PointStats>& predicted, const std::vector<PointStats>& measured);
using planner::Median;  // planner/statistics.h; 0 when empty

// (predicted − measured) / measured; 0 when both are 0, +inf when only measured is.
double RelativeError(double predicted, double measured);

// Where a sweep's attainment falls below `target`, by linear interpolation between
// the two rates around the crossing. `bracketed` false: it never crosses (the knee
// is above the highest rate, returned) or already misses at the lowest (returned).
struct Knee {
  double rate = 0;
  bool bracketed = false;
  bool below_sweep = false;  // misses already at the lowest rate
};
Knee FindKnee(const std::vector<double>& rates, const std::vector<double>& attainments, double target);

// The measuring protocol of a sweep's knee (tandem-validate): per rate, a fraction of the
// predicted knee, `repeats` runs of Poisson arrivals from an empty cluster, rate ×
// seconds_per_point requests within [min_requests, max_requests], each statistic the median;
// the knee where the attainment at the offered rates crosses the SLO's (FindKnee), with
// `refine` one more rate there.
struct KneeProtocol {
  std::vector<double> fractions;
  int repeats = 1;
  double seconds_per_point = 8;
  int min_requests = 40;
  int max_requests = 400;
  bool refine = true;
};

// How far `protocol` measures a knee from the steady-state one (planner::FindMaxGoodput's,
// `steady_knee`) when the cluster behaves exactly as the model: `sweeps` sweeps simulated with
// `options`' host (fresh arrivals each run), the steady knee's relative error against each
// knee bracketed, sorted. Runs of seconds start empty and draw their arrivals' luck: their
// knee is not the steady state's.
std::vector<double> SteadyKneeErrorsUnderProtocol(const planner::Layout& layout, const planner::CostModel& cost,
                                                  const planner::Workload& workload, const planner::Slo& slo,
                                                  const planner::SimOptions& options, double steady_knee,
                                                  const KneeProtocol& protocol, int sweeps);

}  // namespace tandem::tools
