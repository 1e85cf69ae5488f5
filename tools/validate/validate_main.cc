// tandem-validate: checks tandem-plan's predictions against the real local
// cluster (issue 24 item 3, docs/planner.md "Validation"). It profiles this
// machine's node with tandem-profile (or takes --profile), asks the planner for
// each layout's goodput knee, starts the layout as real processes with the
// launch configuration tandem-plan prints, drives it with tandem-bench-serving
// (Poisson arrivals) at rates from light load to past the knee, and prints
// predicted against measured per layout and rate, then the must-show summary.
//
//   tandem-validate --layouts 1P1D,1P2D,2P1D,2P2D,1C --rate-fractions 0.3,0.6,0.9,1.2,1.5
//   tandem-validate --short --max-mean-e2e-error 0.6      # the CI form
//
// Exit status: 0; 1 when a run fails or an error bound given is exceeded; 2 on bad flags.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/metrics/metric_names.h"
#include "planner/plan.h"
#include "planner/profile_io.h"
#include "tools/plan/launch_config.h"
#include "tools/validate/layout_cluster.h"
#include "tools/validate/validate_report.h"

namespace tandem::tools {
namespace {

struct ValidateOptions {
  std::string out_dir = "validate-out";   // profile, logs, per-run records, validation.json
  std::string profile;                    // a profile to use; empty: measure one now
  std::string model_dir;                  // empty: write the built-in tiny model
  std::vector<std::string> layouts = {"1P1D", "1P2D", "2P1D", "2P2D", "1C"};
  std::vector<double> rate_fractions = {0.3, 0.6, 0.9, 1.2, 1.5};  // of each layout's predicted knee
  // One more rate where the knee's bracket puts it (the measured knee from three points
  // around it, not two).
  bool refine_knee = true;
  int prompt_tokens = 512;                // uniform in len·(1 ± range_ratio), as tandem-bench-serving draws
  int output_tokens = 64;
  double range_ratio = 0.5;
  double slo_ttft_ms = 300;
  double slo_tpot_ms = 15;
  double attainment_percent = 90;
  double seconds_per_point = 8;           // requests per point: rate × this, within [min, max]
  int min_requests = 40;
  int max_requests = 400;
  int repeats = 1;                        // runs per point; each statistic is their median
  uint64_t seed = 1;
  // Cores the nodes share in the prediction (planner::SimOptions::host_cores): every
  // node runs on this machine. -1: the profile's hardware threads for a CPU backend,
  // 0 (a device per node) for a GPU one.
  int host_cores = -1;
  // The serving path's CPU on that host (planner::SimOptions::host_*), when host_cores > 0:
  // < 0 measures them first on a 1P1D cluster (an idle spell and light runs; FitServingCpu).
  double host_idle_cores_per_node = -1;
  double host_cpu_ms_per_request = -1;
  double host_cpu_ms_per_output_token = -1;
  double host_node_cpu_ms_per_output_token = -1;  // of it, the decode node's own
  double host_node_cpu_ms_per_request = -1;       // of host_cpu_ms_per_request, the decode node's own
  double engine_speed = -1;  // the engines against the profile; <= 0: measure (with the two above)
  double step_overhead_ms = -1;  // engine time per step beyond the profiled; < 0: measure
  // Predict each run, and each layout's knee, with the host as measured up to it: the
  // engines' speed and per-step overhead as the run before measured them (the first at the
  // calibration's: the host's speed drifts between minutes), the serving path's CPU fitted
  // over every run so far.
  bool track_host = true;
  // With track_host: before a layout's sweep, one light run on it (0.3 of its knee as
  // predicted so far) measures its engines, and the layout's knee and first run are
  // predicted with them. Engines that share a host's caches run slower the more of them
  // there are (2-core box, 2026-12-07: 0.61-0.72 of the profile in the disaggregated
  // layouts, 0.78-0.84 in the colocated one), so the run before, of another layout, says
  // little about this one's.
  bool calibrate_layouts = true;
  // Sweeps of this protocol simulated per layout on a cluster exactly as the model: how far
  // it measures a knee from the steady state's (SteadyKneeErrorsUnderProtocol); 0: none.
  int protocol_sweeps = 40;
  bool short_form = false;                // CI: 1P1D and 1C, two rates (+ the refinement), a quick profile
  // > 0: exit 1 when the mean |E2E error| of the points at or below the predicted knee is
  // above it (past the knee a backlog's growth makes any latency noisy: not a CI bound).
  double max_mean_e2e_error = 0;
  std::string binary_dir;                 // empty: the build tree this program is in
  std::string source_dir = TANDEM_SOURCE_DIR;
};

std::string Dirname(std::string path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

std::string BinaryDirOfThisProgram() {
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n <= 0) return ".";
  exe[n] = 0;
  return Dirname(Dirname(Dirname(exe)));  // <build>/tools/validate/tandem-validate
}

std::string Quote(const std::string& s) { return "'" + s + "'"; }

Status RunCommand(const std::string& command) {
  if (std::system(command.c_str()) != 0) return UnavailableError("failed: " + command);
  return Status::Ok();
}

double LoadAverage() {
  std::ifstream in("/proc/loadavg");
  double one = 0;
  in >> one;
  return one;
}

StatusOr<planner::Layout> ParseLayout(const std::string& name) {
  int a = 0, b = 0;
  char c = 0, d = 0, tail = 0;
  if (std::sscanf(name.c_str(), "%dP%dD%c", &a, &b, &tail) == 2 && a > 0 && b > 0) {
    return planner::Layout{.prefill_nodes = a, .decode_nodes = b};
  }
  if (std::sscanf(name.c_str(), "%d%c%c", &a, &c, &d) == 2 && c == 'C' && a > 0) {
    return planner::Layout{.colocated_nodes = a};
  }
  return InvalidArgumentError("layout '" + name + "': expected xPyD (e.g. 2P1D) or NC (colocated, e.g. 2C)");
}

StatusOr<std::string> MeasureProfile(const ValidateOptions& o, const std::string& model_dir) {
  const std::string path = o.out_dir + "/profile.json";
  const int max_prompt = static_cast<int>(o.prompt_tokens * (1 + o.range_ratio));
  std::string grid = o.short_form ? " --quick"
                                  : " --prefill-max-tokens " + std::to_string(std::max(1024, max_prompt)) +
                                        " --decode-max-batch 64 --decode-max-context 1024 --transfer-max-blocks 64";
  TANDEM_RETURN_IF_ERROR(RunCommand(o.binary_dir + "/tools/profile/tandem-profile --model-dir " + Quote(model_dir) +
                                    grid + " --transfer-transports ucx --output " + Quote(path) + " > " +
                                    Quote(o.out_dir + "/profile.log") + " 2>&1"));
  return path;
}

// One load-generator run against the router; the requests it recorded.
// Its log (<records>.log) has the server side too: the router's and every node's
// histograms (prefill time, queue, KV transfer, ...) diffed over the run.
// Its summary (--json-out) is <records>.summary.json.
StatusOr<std::vector<MeasuredRequest>> RunLoad(const ValidateOptions& o, const LayoutCluster& cluster, double rate,
                                               int requests, uint64_t seed, const std::string& records,
                                               int output_tokens = 0) {
  char command[2048];
  std::snprintf(command, sizeof(command),
                "%s/tools/bench_serving/tandem-bench-serving --port %d --model tiny --num-prompts %d "
                "--request-rate %.4f --input-len %d --output-len %d --range-ratio %g --vocab-size 500 --seed %llu "
                "--timeout-s 120%s --requests-out %s --json-out %s > %s.log 2>&1",
                o.binary_dir.c_str(), cluster.http_port(), requests, rate, o.prompt_tokens,
                output_tokens > 0 ? output_tokens : o.output_tokens, o.range_ratio,
                static_cast<unsigned long long>(seed), cluster.NodeMetricsFlags().c_str(), Quote(records).c_str(),
                Quote(records + ".summary.json").c_str(), Quote(records).c_str());
  std::system(command);  // failed requests are in the records (they miss the SLO)
  std::ifstream in(records);
  std::stringstream text;
  text << in.rdbuf();
  return ParseRequestRecords(text.str());
}

int64_t CompletionTokens(const std::vector<MeasuredRequest>& records) {
  int64_t tokens = 0;
  for (const MeasuredRequest& m : records) tokens += m.completion_tokens;
  return tokens;
}

// The CPU a run's summary recorded: the router's and the nodes' (their server counters)
// and the load generator's own.
struct RunCpu {
  ClusterCpu cluster;
  double client_seconds = 0;
  double seconds = 0;  // the run's duration
};
StatusOr<RunCpu> ReadRunCpu(const std::string& records) {
  const std::string path = records + ".summary.json";
  std::ifstream in(path);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("server") || !j["server"].is_object() || !j.contains("client_cpu_s") ||
      !j["client_cpu_s"].is_number()) {
    return UnavailableError(path + ": no server counters or client_cpu_s");
  }
  RunCpu cpu{.cluster = {}, .client_seconds = j["client_cpu_s"].get<double>(), .seconds = j.value("duration_s", 0.0)};
  for (const auto& [page, report] : j["server"].items()) {
    if (!report.contains("counters")) return UnavailableError(path + ": " + page + ": no counters");
    for (const char* counter :
         {metrics::kProcessCpuSeconds, metrics::kEngineCpuSeconds, metrics::kEngineRunQueueWaitSeconds}) {
      AddCpu(&cpu.cluster, page, counter, report["counters"].value(counter, 0.0));
    }
  }
  return cpu;
}

// The host as the predictions take it, measured on a 1P1D cluster before the sweep: after
// a warm-up, every process's CPU over an idle spell, then over light runs (0.3 of the
// layout's knee as profiled, the sweep's first rate), --repeats pairs of them, one with the
// sweep's output lengths and one with a quarter of them: the serving path's CPU (the
// processes' less the engine threads', fitted per request and per output token over the
// runs: FitServingCpu), and the engines' speed and per-step overhead against the profile
// (CalibrateEngines on each run, the median).
StatusOr<HostModel> CalibrateHost(const ValidateOptions& o, const planner::Profile& profile,
                                  const planner::CostModel& cost, const planner::Workload& workload,
                                  const planner::Slo& slo, const std::string& model_dir,
                                  std::vector<ServingSample>* samples) {
  const planner::Layout layout{.prefill_nodes = 1, .decode_nodes = 1};
  const planner::WorkloadStats stats = planner::ComputeWorkloadStats(workload, cost.decode_limits().block_size);
  const double knee =
      planner::FindMaxGoodput(layout, cost, workload, slo, planner::ScreenLayout(layout, cost, stats, slo, 1).max_rate,
                              planner::SimOptions{.seed = o.seed, .host_cores = o.host_cores})
          .goodput;
  if (knee <= 0) return FailedPreconditionError("1P1D: the planner predicts no goodput");
  const std::string log_dir = o.out_dir + "/serving-cpu";
  mkdir(log_dir.c_str(), 0755);
  TANDEM_ASSIGN_OR_RETURN(
      std::unique_ptr<LayoutCluster> cluster,
      LayoutCluster::Start(LaunchGroups(layout, profile, profile, cost.transfer_path()),
                           {.binary_dir = o.binary_dir, .source_dir = o.source_dir, .model_dir = model_dir,
                            .log_dir = log_dir}));
  (void)RunLoad(o, *cluster, 0.5 * knee, 10, o.seed + 998, log_dir + "/warmup.jsonl");
  std::this_thread::sleep_for(std::chrono::seconds(1));
  using Clock = std::chrono::steady_clock;
  auto seconds_since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
  TANDEM_ASSIGN_OR_RETURN(ClusterCpu idle_start, cluster->ScrapeCpu());
  const Clock::time_point idle_from = Clock::now();
  std::this_thread::sleep_for(std::chrono::seconds(4));
  TANDEM_ASSIGN_OR_RETURN(ClusterCpu idle_end, cluster->ScrapeCpu());
  const double idle_seconds = seconds_since(idle_from);
  const ClusterCpu idle = CpuBetween(idle_start, idle_end);
  const int requests = std::clamp(static_cast<int>(0.3 * knee * o.seconds_per_point), o.min_requests, o.max_requests);
  HostModel host;
  host.cores = o.host_cores;
  // --repeats pairs of runs, full and quarter outputs.
  host.serving.idle_cores_per_node = IdleCoresPerNode(idle, idle_seconds, cluster->nodes());
  std::vector<double> speeds, overheads;
  for (int r = 0; r < 2 * o.repeats; ++r) {
    const std::string records_path = log_dir + "/run" + std::to_string(r) + ".jsonl";
    const int output_tokens = r % 2 == 0 ? o.output_tokens : std::max(2, o.output_tokens / 4);
    TANDEM_ASSIGN_OR_RETURN(ClusterCpu run_start, cluster->ScrapeCpu());
    const Clock::time_point run_from = Clock::now();
    TANDEM_ASSIGN_OR_RETURN(std::vector<MeasuredRequest> records,
                            RunLoad(o, *cluster, 0.3 * knee, requests, o.seed + 997 - r, records_path, output_tokens));
    TANDEM_ASSIGN_OR_RETURN(ClusterCpu run_end, cluster->ScrapeCpu());
    const double run_seconds = seconds_since(run_from);
    TANDEM_ASSIGN_OR_RETURN(RunCpu run_cpu, ReadRunCpu(records_path));
    const double client_seconds = run_cpu.client_seconds;
    const ClusterCpu run = CpuBetween(run_start, run_end);
    samples->push_back(MeasureServingSample(run, host.serving.idle_cores_per_node, client_seconds, run_seconds,
                                            static_cast<int>(records.size()), CompletionTokens(records)));
    HostModel measured_host = host;
    measured_host.serving = FitServingCpu(host.serving.idle_cores_per_node, {samples->back()});
    planner::SimResult simulated;
    (void)PredictedStats(layout, cost, records, slo, o.seed, measured_host, &simulated);
    const EngineCalibration engines =
        CalibrateEngines(simulated.prefill_work, run.prefill_engine_seconds, simulated.decode_work,
                         run.decode_engine_seconds);
    std::printf("calibration run %d (1P1D, logs in %s): %zu requests in %.1f s: the processes' CPU %.2f s, of it "
                "the engine threads' %.2f s (prefill %.2f s for %.2f s of profiled work in %lld steps, decode %.2f s "
                "for %.2f s in %lld steps); the load generator's %.2f s; the serving path's %.2f s (the decode node's %.2f s) for "
                "%lld output tokens; engine speed %.2f, step overhead %.3f ms\n",
                r, log_dir.c_str(), records.size(), run_seconds, run.process_seconds, run.engine_seconds,
                run.prefill_engine_seconds, simulated.prefill_work.seconds,
                static_cast<long long>(simulated.prefill_work.steps), run.decode_engine_seconds,
                simulated.decode_work.seconds, static_cast<long long>(simulated.decode_work.steps), client_seconds,
                samples->back().cpu_seconds, samples->back().decode_node_cpu_seconds,
                static_cast<long long>(samples->back().output_tokens), engines.speed,
                engines.step_overhead_seconds * 1e3);
    speeds.push_back(engines.speed);
    overheads.push_back(engines.step_overhead_seconds);
  }
  host.serving = FitServingCpu(host.serving.idle_cores_per_node, *samples);
  host.engine_speed = Median(speeds);
  host.step_overhead_seconds = Median(overheads);
  return host;
}

StatusOr<LayoutSweep> SweepLayout(const ValidateOptions& o, const planner::Layout& layout,
                                  const planner::Profile& profile, const planner::CostModel& cost,
                                  const planner::Workload& workload, const planner::Slo& slo,
                                  HostModel* tracked, std::vector<ServingSample>* samples,
                                  const std::string& model_dir) {
  const HostModel& host = *tracked;
  LayoutSweep sweep;
  sweep.layout = layout;
  const planner::WorkloadStats stats = planner::ComputeWorkloadStats(workload, cost.decode_limits().block_size);
  const planner::ScreenResult screen = planner::ScreenLayout(layout, cost, stats, slo, workload.rate);
  auto knee_at = [&](double engine_speed, double step_overhead_seconds) {
    HostModel at = host;
    at.engine_speed = engine_speed;
    at.step_overhead_seconds = step_overhead_seconds;
    return planner::FindMaxGoodput(layout, cost, workload, slo, screen.max_rate * engine_speed,
                                   HostSimOptions(at, o.seed))
        .goodput;
  };
  sweep.profiled_knee = knee_at(1, 0);
  sweep.predicted_knee = knee_at(host.engine_speed, host.step_overhead_seconds);
  std::printf("%s: predicted goodput knee %.2f req/s (engines at %.2f of the profile's speed, the serving path %.2f ms "
              "of CPU a request and %.3f ms an output token); starting the cluster\n",
              layout.Name().c_str(), sweep.predicted_knee, host.engine_speed, host.serving.seconds_per_request * 1e3,
              host.serving.seconds_per_output_token * 1e3);
  std::fflush(stdout);
  if (sweep.predicted_knee <= 0) return FailedPreconditionError(layout.Name() + ": the planner predicts no goodput");
  const std::string log_dir = o.out_dir + "/" + layout.Name();
  mkdir(log_dir.c_str(), 0755);
  const LayoutClusterOptions cluster_options{.binary_dir = o.binary_dir, .source_dir = o.source_dir,
                                             .model_dir = model_dir, .log_dir = log_dir};
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<LayoutCluster> cluster,
                          LayoutCluster::Start(LaunchGroups(layout, profile, profile, cost.transfer_path()),
                                               cluster_options));
  // Warm-up: first requests pay for lazy setup (connections, UCX endpoints).
  (void)RunLoad(o, *cluster, 0.5 * sweep.predicted_knee, 10, o.seed + 999, log_dir + "/warmup.jsonl");
  // The engines of a run (CalibrateEngines on their threads' CPU against the profiled work of
  // its steps as the simulation replays them); with --track-host the next run's.
  auto track = [&](const std::vector<MeasuredRequest>& records, const RunCpu& run_cpu,
                   const planner::SimResult& as_profiled) {
    const ClusterCpu& c = run_cpu.cluster;
    const EngineCalibration engines = CalibrateEngines(as_profiled.prefill_work, c.prefill_engine_seconds,
                                                       as_profiled.decode_work, c.decode_engine_seconds);
    if (o.track_host) {  // the next run is predicted with this one's engines, the serving path fitted so far
      tracked->engine_speed = engines.speed;
      tracked->step_overhead_seconds = engines.step_overhead_seconds;
      if (host.cores > 0) {
        samples->push_back(MeasureServingSample(c, host.serving.idle_cores_per_node, run_cpu.client_seconds,
                                                run_cpu.seconds, static_cast<int>(records.size()),
                                                CompletionTokens(records)));
        tracked->serving = FitServingCpu(host.serving.idle_cores_per_node, *samples);
      }
    }
    return engines;
  };
  auto at_profile = [&] {  // the host as measured so far, the engines at the profile's speed
    HostModel at = host;
    at.engine_speed = 1;
    at.step_overhead_seconds = 0;
    return at;
  };
  if (o.track_host && o.calibrate_layouts) {
    const double rate = 0.3 * sweep.predicted_knee;
    // Half a point's floor of requests: enough for the engines' speed, which is all it measures.
    const int requests = std::clamp(static_cast<int>(rate * o.seconds_per_point), o.min_requests / 2, o.max_requests);
    const std::string records_path = log_dir + "/calibration.jsonl";
    TANDEM_ASSIGN_OR_RETURN(std::vector<MeasuredRequest> records,
                            RunLoad(o, *cluster, rate, requests, o.seed + 996, records_path));
    TANDEM_ASSIGN_OR_RETURN(RunCpu run_cpu, ReadRunCpu(records_path));
    planner::SimResult as_profiled;
    (void)PredictedStats(layout, cost, records, slo, o.seed, at_profile(), &as_profiled);
    const EngineCalibration engines = track(records, run_cpu, as_profiled);
    sweep.calibrated_speed = engines.speed;
    sweep.predicted_knee = knee_at(host.engine_speed, host.step_overhead_seconds);
    std::printf(
        "  calibrated on this layout (%zu requests at %.2f req/s): engine speed %.2f, step overhead %.3f ms; "
        "predicted goodput knee %.2f req/s\n",
        records.size(), rate, engines.speed, engines.step_overhead_seconds * 1e3, sweep.predicted_knee);
    std::fflush(stdout);
    if (sweep.predicted_knee <= 0) return FailedPreconditionError(layout.Name() + ": the planner predicts no goodput");
  }
  if (o.protocol_sweeps > 0) {
    const KneeProtocol protocol{.fractions = o.rate_fractions,
                                .repeats = o.repeats,
                                .seconds_per_point = o.seconds_per_point,
                                .min_requests = o.min_requests,
                                .max_requests = o.max_requests,
                                .refine = o.refine_knee};
    sweep.protocol_knee_errors =
        SteadyKneeErrorsUnderProtocol(layout, cost, workload, slo, HostSimOptions(host, o.seed + 5000),
                                      sweep.predicted_knee, protocol, o.protocol_sweeps);
  }
  std::vector<double> rates, attainments, layout_speeds, layout_overheads;
  std::vector<double> predicted_attainments, run_speed_attainments, profiled_attainments;
  auto run_point = [&](double fraction) -> Status {
    SweepPoint point;
    point.fraction = fraction;
    point.target_rate = fraction * sweep.predicted_knee;
    const int requests = std::clamp(static_cast<int>(point.target_rate * o.seconds_per_point), o.min_requests,
                                    o.max_requests);
    std::vector<PointStats> measured, predicted, at_run_speed, profiled;
    std::vector<double> speeds, prefill_ran, decode_ran, prefill_ran_simulated, decode_ran_simulated;
    for (int r = 0; r < o.repeats; ++r) {
      point.load_average = std::max(point.load_average, LoadAverage());
      char name[128];
      std::snprintf(name, sizeof(name), "/rate%.3f-run%d.jsonl", point.target_rate, r);
      // A seed per run: the load generator's prompt contents follow (seed, index, length),
      // and a prompt seen before would be a prefix-cache hit, not a prefill.
      const uint64_t seed = o.seed + 1000 * (sweep.points.size() + 1) + static_cast<uint64_t>(r);
      TANDEM_ASSIGN_OR_RETURN(std::vector<MeasuredRequest> records,
                              RunLoad(o, *cluster, point.target_rate, requests, seed, log_dir + name));
      PointStats m = MeasuredStats(records, slo);
      TANDEM_ASSIGN_OR_RETURN(RunCpu run_cpu, ReadRunCpu(log_dir + name));
      m.engine_seconds = run_cpu.cluster.engine_seconds;
      // The run with the host as measured before it (--track-host), as profiled, and with
      // the engines as its own engine threads showed them (CalibrateEngines: the speed and
      // per-step overhead that turn the profiled work of its steps into their CPU time).
      planner::SimResult simulated;
      predicted.push_back(PredictedStats(layout, cost, records, slo, o.seed, host, &simulated));
      std::ofstream(log_dir + name + ".compared.jsonl") << ComparedRecordsJsonl(records, simulated);
      HostModel own = at_profile();
      planner::SimResult as_profiled;
      profiled.push_back(PredictedStats(layout, cost, records, slo, o.seed, own, &as_profiled));
      const EngineCalibration engines = track(records, run_cpu, as_profiled);
      own.engine_speed = engines.speed;
      own.step_overhead_seconds = engines.step_overhead_seconds;
      speeds.push_back(engines.speed);
      const ClusterCpu& c = run_cpu.cluster;
      prefill_ran.push_back(RanOfRunnable(c.prefill_engine_seconds, c.prefill_engine_wait_seconds));
      decode_ran.push_back(RanOfRunnable(c.decode_engine_seconds, c.decode_engine_wait_seconds));
      layout_speeds.push_back(engines.speed);
      layout_overheads.push_back(engines.step_overhead_seconds);
      planner::SimResult at_own;
      at_run_speed.push_back(PredictedStats(layout, cost, records, slo, o.seed, own, &at_own));
      prefill_ran_simulated.push_back(RanOfRunnable(at_own.prefill_work.cpu_seconds, at_own.prefill_work.wait_seconds));
      decode_ran_simulated.push_back(RanOfRunnable(at_own.decode_work.cpu_seconds, at_own.decode_work.wait_seconds));
      measured.push_back(m);
    }
    point.measured = MedianStats(measured);
    point.predicted = MedianStats(predicted);
    point.at_run_speed = MedianStats(at_run_speed);
    point.profiled = MedianStats(profiled);
    point.engine_speed = Median(speeds);
    point.runs = static_cast<int>(measured.size());
    point.e2e_error_spread = E2eErrorSpread(predicted, measured);
    std::printf("  %.2f req/s: E2E %.1f ms predicted (%.1f with the run's own engines, speed %.2f; %.1f as profiled), %.1f "
                "measured; attainment %.2f / %.2f; load %.1f; of their runnable time the engines ran %.2f "
                "(prefill; simulated with the run's own engines %.2f) / %.2f (decode; %.2f)\n",
                point.target_rate, point.predicted.e2e_mean * 1e3, point.at_run_speed.e2e_mean * 1e3,
                point.engine_speed, point.profiled.e2e_mean * 1e3, point.measured.e2e_mean * 1e3,
                point.predicted.attainment, point.measured.attainment, point.load_average, Median(prefill_ran),
                Median(prefill_ran_simulated), Median(decode_ran), Median(decode_ran_simulated));
    std::fflush(stdout);
    rates.push_back(point.measured.offered_rate);
    attainments.push_back(point.measured.attainment);
    predicted_attainments.push_back(point.predicted.attainment);
    run_speed_attainments.push_back(point.at_run_speed.attainment);
    profiled_attainments.push_back(point.profiled.attainment);
    sweep.points.push_back(point);
    return Status::Ok();
  };
  for (double fraction : o.rate_fractions) TANDEM_RETURN_IF_ERROR(run_point(fraction));
  sweep.measured_knee = FindKnee(rates, attainments, slo.attainment);
  if (o.refine_knee && sweep.measured_knee.bracketed) {
    // The straight line between the two rates around the crossing puts the knee low: the
    // attainment holds until close to the knee and falls fast past it. One more point
    // where that line crosses the SLO narrows the bracket.
    std::printf("  the knee's bracket refined:\n");
    TANDEM_RETURN_IF_ERROR(run_point(sweep.measured_knee.rate / sweep.predicted_knee));
    std::sort(sweep.points.begin(), sweep.points.end(),
              [](const SweepPoint& a, const SweepPoint& b) { return a.target_rate < b.target_rate; });
    sweep.measured_knee = FindKnee(rates, attainments, slo.attainment);
  }
  // The knee again with the engines as the sweep's runs measured them (the medians).
  sweep.run_speed_knee = knee_at(Median(layout_speeds), Median(layout_overheads));
  sweep.predicted_knee_on_runs = FindKnee(rates, predicted_attainments, slo.attainment);
  sweep.run_speed_knee_on_runs = FindKnee(rates, run_speed_attainments, slo.attainment);
  sweep.profiled_knee_on_runs = FindKnee(rates, profiled_attainments, slo.attainment);
  return sweep;
}

std::string ContextJson(const ValidateOptions& o, const planner::Profile& profile, const std::string& profile_path,
                        const HostModel& host) {
  char hostname[256] = {};
  gethostname(hostname, sizeof(hostname) - 1);
  const planner::ProfileSpread spread = planner::MeasurementSpread(profile);
  nlohmann::json j = {
      {"profile", profile_path},
      {"profile_commit", profile.commit},
      {"profile_spread_max", spread.max},
      {"profile_spread_median", spread.median},
      {"device", profile.device.name},
      {"hardware_threads", profile.device.compute_units},
      {"host_cores", host.cores},
      {"host_idle_cores_per_node", host.serving.idle_cores_per_node},
      {"host_cpu_ms_per_request", host.serving.seconds_per_request * 1e3},
      {"host_cpu_ms_per_output_token", host.serving.seconds_per_output_token * 1e3},
      {"host_node_cpu_ms_per_output_token", host.serving.node_seconds_per_output_token * 1e3},
      {"host_node_cpu_ms_per_request", host.serving.node_seconds_per_request * 1e3},
      {"engine_speed", host.engine_speed},
      {"step_overhead_ms", host.step_overhead_seconds * 1e3},
      {"track_host", o.track_host},
      {"calibrate_layouts", o.calibrate_layouts},
      {"protocol_sweeps", o.protocol_sweeps},
      {"host", hostname},
      {"workload",
       {{"prompt_tokens", o.prompt_tokens}, {"output_tokens", o.output_tokens}, {"range_ratio", o.range_ratio}}},
      {"slo", {{"ttft_ms", o.slo_ttft_ms}, {"tpot_ms", o.slo_tpot_ms}, {"attainment_percent", o.attainment_percent}}},
      {"rate_fractions", o.rate_fractions},
      {"repeats", o.repeats},
      {"short", o.short_form}};
  return j.dump();
}

StatusOr<int> Run(ValidateOptions o) {
  if (o.binary_dir.empty()) o.binary_dir = BinaryDirOfThisProgram();
  if (o.short_form) {
    o.layouts = {"1P1D", "1C"};
    o.rate_fractions = {0.4, 1.4};
    // The full form's lengths: with short prompts the serving path's fixed costs (HTTP, RPCs,
    // wake-ups), which no profile prices, dwarf the compute (7x at 256 / 32 tokens).
    o.seconds_per_point = 5;
    o.max_requests = 120;
    o.protocol_sweeps = std::min(o.protocol_sweeps, 10);
  }
  std::vector<planner::Layout> layouts;
  for (const std::string& name : o.layouts) {
    TANDEM_ASSIGN_OR_RETURN(planner::Layout layout, ParseLayout(name));
    layouts.push_back(layout);
  }
  if (o.rate_fractions.empty() || o.repeats < 1 || o.range_ratio < 0 || o.range_ratio >= 1) {
    return InvalidArgumentError("need rate fractions, repeats >= 1 and a range ratio in [0, 1)");
  }
  mkdir(o.out_dir.c_str(), 0755);
  std::string model_dir = o.model_dir;
  if (model_dir.empty()) {
    model_dir = o.out_dir + "/tiny";
    TANDEM_RETURN_IF_ERROR(RunCommand(o.binary_dir + "/tools/make_model/tandem-make-model --preset tiny -f -o " +
                                      Quote(model_dir) + " > /dev/null"));
  }
  std::string profile_path = o.profile;
  if (profile_path.empty()) {
    std::printf("profiling this machine's node (tandem-profile, log in %s/profile.log); load average %.1f\n",
                o.out_dir.c_str(), LoadAverage());
    std::fflush(stdout);
    TANDEM_ASSIGN_OR_RETURN(profile_path, MeasureProfile(o, model_dir));
  }
  TANDEM_ASSIGN_OR_RETURN(planner::Profile profile, planner::LoadProfile(profile_path));
  if (o.host_cores < 0) o.host_cores = profile.device.backend == "cpu" ? profile.device.compute_units : 0;
  TANDEM_ASSIGN_OR_RETURN(planner::CostModel cost, planner::CostModel::Build(profile, profile, "ucx"));
  // How well the profile holds together: its rounds' disagreement (the host moving while it was
  // measured) and its fits' errors bound how close any prediction from it can be.
  const planner::ProfileSpread spread = planner::MeasurementSpread(profile);
  std::printf(
      "the profile: its rounds agreed within %.0f %% (median %.0f %%); the prefill fit is off its grid by up "
      "to %.0f %% (mean %.0f %%), the decode fit by up to %.0f %% (mean %.0f %%)\n",
      100 * spread.max, 100 * spread.median, 100 * cost.prefill_fit().max_relative_error,
      100 * cost.prefill_fit().mean_relative_error, 100 * profile.decode.fit.max_relative_error,
      100 * profile.decode.fit.mean_relative_error);
  if (const std::string noisy = planner::NoisyProfileWarning(profile); !noisy.empty()) {
    std::printf("warning: the profile: %s\n", noisy.c_str());
  }
  planner::Workload workload;
  workload.rate = 1;
  workload.prompt = {.kind = planner::LengthKind::kUniform,
                     .min = std::max(1, static_cast<int>(o.prompt_tokens * (1 - o.range_ratio))),
                     .max = std::max(1, static_cast<int>(o.prompt_tokens * (1 + o.range_ratio)))};
  workload.output = {.kind = planner::LengthKind::kUniform,
                     .min = std::max(1, static_cast<int>(o.output_tokens * (1 - o.range_ratio))),
                     .max = std::max(1, static_cast<int>(o.output_tokens * (1 + o.range_ratio)))};
  const planner::Slo slo{.ttft_seconds = o.slo_ttft_ms / 1e3, .tpot_seconds = o.slo_tpot_ms / 1e3,
                         .attainment = o.attainment_percent / 100};
  TANDEM_RETURN_IF_ERROR(workload.Validate());
  TANDEM_RETURN_IF_ERROR(slo.Validate());
  HostModel host;
  host.cores = o.host_cores;
  std::vector<ServingSample> samples;  // the serving path's CPU over the runs so far
  if (host.cores > 0) {
    if (o.host_idle_cores_per_node >= 0 && o.host_cpu_ms_per_request >= 0 && o.host_cpu_ms_per_output_token >= 0 &&
        o.host_node_cpu_ms_per_output_token >= 0 && o.host_node_cpu_ms_per_request >= 0 && o.engine_speed > 0 &&
        o.step_overhead_ms >= 0) {
      host.serving = {.idle_cores_per_node = o.host_idle_cores_per_node,
                      .seconds_per_request = o.host_cpu_ms_per_request / 1e3,
                      .seconds_per_output_token = o.host_cpu_ms_per_output_token / 1e3,
                      .node_seconds_per_output_token =
                          std::min(o.host_node_cpu_ms_per_output_token, o.host_cpu_ms_per_output_token) / 1e3,
                      .node_seconds_per_request =
                          std::min(o.host_node_cpu_ms_per_request, o.host_cpu_ms_per_request) / 1e3};
      host.engine_speed = o.engine_speed;
      host.step_overhead_seconds = o.step_overhead_ms / 1e3;
    } else {
      TANDEM_ASSIGN_OR_RETURN(host, CalibrateHost(o, profile, cost, workload, slo, model_dir, &samples));
    }
    std::printf("the host: %d cores; the serving path takes %.3f cores per node idle, %.2f ms of CPU per request "
                "and %.3f ms per output token (%.2f and %.3f ms of them on the decode node); the engines run at %.2f "
                "of the profile's speed, each step %.3f ms beyond its profiled time\n",
                host.cores, host.serving.idle_cores_per_node, host.serving.seconds_per_request * 1e3,
                host.serving.seconds_per_output_token * 1e3, host.serving.node_seconds_per_request * 1e3,
                host.serving.node_seconds_per_output_token * 1e3, host.engine_speed, host.step_overhead_seconds * 1e3);
    std::printf("  (tandem-plan on this host: --plan-host-cores %d --plan-host-idle-cores-per-node %.4f "
                "--plan-host-cpu-ms-per-request %.3f --plan-host-cpu-ms-per-output-token %.4f "
                "--plan-host-node-cpu-ms-per-request %.3f --plan-host-node-cpu-ms-per-output-token %.4f "
                "--plan-engine-speed %.3f --plan-step-overhead-ms %.4f)\n",
                host.cores, host.serving.idle_cores_per_node, host.serving.seconds_per_request * 1e3,
                host.serving.seconds_per_output_token * 1e3, host.serving.node_seconds_per_request * 1e3,
                host.serving.node_seconds_per_output_token * 1e3, host.engine_speed, host.step_overhead_seconds * 1e3);
    std::fflush(stdout);
  }
  std::vector<LayoutSweep> sweeps;
  HostModel tracked = host;  // as measured up to each run (--track-host)
  for (const planner::Layout& layout : layouts) {
    TANDEM_ASSIGN_OR_RETURN(LayoutSweep sweep,
                            SweepLayout(o, layout, profile, cost, workload, slo, &tracked, &samples, model_dir));
    sweeps.push_back(std::move(sweep));
  }
  const ValidationSummary summary = Summarize(sweeps);
  const ValidationSummary at_run_speed = Summarize(sweeps, Prediction::kRunSpeed);
  const ValidationSummary as_profiled = Summarize(sweeps, Prediction::kProfiled);
  std::printf("%s\n\n%s", FormatSweeps(sweeps).c_str(), FormatSummary(summary, at_run_speed, as_profiled).c_str());
  const std::string json_path = o.out_dir + "/validation.json";
  std::ofstream(json_path) << ValidationJson(sweeps, summary, at_run_speed, as_profiled, ContextJson(o, profile, profile_path, host));
  std::printf("wrote %s\n", json_path.c_str());
  if (o.max_mean_e2e_error > 0 && !(summary.light_e2e_error <= o.max_mean_e2e_error)) {
    std::fprintf(stderr,
                 "tandem-validate: mean E2E error %.1f %% at or below the predicted knees is above the bound %.1f %%\n",
                 summary.light_e2e_error * 100, o.max_mean_e2e_error * 100);
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace tandem::tools

int main(int argc, char** argv) {
  tandem::tools::ValidateOptions o;
  CLI::App app("tandem-validate: tandem-plan's predictions against the real local cluster (docs/planner.md)");
  app.add_option("--out-dir", o.out_dir, "profile, logs, per-run request records, validation.json")
      ->capture_default_str();
  app.add_option("--profile", o.profile, "use this profile (default: measure one now with tandem-profile)");
  app.add_option("--model-dir", o.model_dir, "model of every node (default: the built-in tiny model, written now)");
  app.add_option("--layouts", o.layouts, "layouts to run: xPyD or NC")->delimiter(',')->capture_default_str();
  app.add_option("--rate-fractions", o.rate_fractions, "rates as fractions of each layout's predicted knee")
      ->delimiter(',')->capture_default_str();
  app.add_option("--refine-knee", o.refine_knee,
                 "run one more rate per layout where the swept rates around the knee put it, and measure the knee "
                 "again with it")
      ->capture_default_str();
  app.add_option("--prompt-tokens", o.prompt_tokens, "prompt length (uniform within ± range ratio)")
      ->capture_default_str();
  app.add_option("--output-tokens", o.output_tokens, "output length (uniform within ± range ratio)")
      ->capture_default_str();
  app.add_option("--range-ratio", o.range_ratio, "length spread, [0, 1)")->capture_default_str();
  app.add_option("--slo-ttft-ms", o.slo_ttft_ms, "SLO: TTFT")->capture_default_str();
  app.add_option("--slo-tpot-ms", o.slo_tpot_ms, "SLO: TPOT")->capture_default_str();
  app.add_option("--slo-attainment-percent", o.attainment_percent, "SLO: requests within both")
      ->capture_default_str();
  app.add_option("--seconds-per-point", o.seconds_per_point, "arrivals per point: rate × this")->capture_default_str();
  app.add_option("--min-requests", o.min_requests, "requests per point, at least")->capture_default_str();
  app.add_option("--max-requests", o.max_requests, "requests per point, at most")->capture_default_str();
  app.add_option("--repeats", o.repeats, "runs per point (medians)")->capture_default_str();
  app.add_option("--seed", o.seed, "seed of the load and the simulation")->capture_default_str();
  app.add_option("--host-cores", o.host_cores,
                 "cores the nodes share in the predictions (-1: the profile's hardware threads on a CPU backend, "
                 "0 on a GPU)")
      ->capture_default_str();
  app.add_option("--host-idle-cores-per-node", o.host_idle_cores_per_node,
                 "the serving path's CPU per node while idle, in cores (the calibration is skipped when this, "
                 "--host-cpu-ms-per-request, --host-cpu-ms-per-output-token, --host-node-cpu-ms-per-request, "
                 "--host-node-cpu-ms-per-output-token, --engine-speed and --step-overhead-ms are all given; -1: measure them on a 1P1D cluster first)")
      ->capture_default_str();
  app.add_option("--host-cpu-ms-per-request", o.host_cpu_ms_per_request,
                 "the serving path's CPU per request outside the engines' steps, ms (-1: measure)")
      ->capture_default_str();
  app.add_option("--host-cpu-ms-per-output-token", o.host_cpu_ms_per_output_token,
                 "the serving path's CPU per output token (the decode node's output, the router's stream, the client), "
                 "ms (-1: measure)")
      ->capture_default_str();
  app.add_option("--host-node-cpu-ms-per-request", o.host_node_cpu_ms_per_request,
                 "of the CPU per request, the decode node's own part, done when the KV has landed while its engine "
                 "waits, ms (-1: measure)")
      ->capture_default_str();
  app.add_option("--host-node-cpu-ms-per-output-token", o.host_node_cpu_ms_per_output_token,
                 "of that, the decode node's own part, which its engine's next step waits for, ms (-1: measure)")
      ->capture_default_str();
  app.add_option("--engine-speed", o.engine_speed,
                 "the engines' speed against the profile (-1: measure, with the serving path's CPU, on a 1P1D cluster "
                 "first)")
      ->capture_default_str();
  app.add_option("--step-overhead-ms", o.step_overhead_ms,
                 "engine time each step costs beyond its profiled time, ms (-1: measure)")
      ->capture_default_str();
  app.add_option("--track-host", o.track_host,
                 "predict each run (and each layout's knee) with the host as measured up to it: the engines' speed "
                 "and per-step overhead as the run before measured them, the serving path's CPU "
                 "fitted over every run so far; false: as calibrated throughout")
      ->capture_default_str();
  app.add_option("--calibrate-layouts", o.calibrate_layouts,
                 "with --track-host: one light run on each layout before its sweep measures its engines, and its "
                 "knee and first run are predicted with them (engines sharing a host run slower the more they are)")
      ->capture_default_str();
  app.add_option("--protocol-sweeps", o.protocol_sweeps,
                 "sweeps of this protocol simulated per layout on a cluster exactly as the model, to show how far "
                 "it measures a knee from the steady state's (0: none)")
      ->capture_default_str();
  app.add_flag("--short", o.short_form, "the CI form: 1P1D and 1C, two rates and the knee's refinement, a --quick profile");
  app.add_option("--max-mean-e2e-error", o.max_mean_e2e_error,
                 "exit 1 when the mean |relative error| of mean E2E at or below the predicted knees is above this "
                 "(e.g. 0.8)");
  app.add_option("--binary-dir", o.binary_dir, "the build tree (default: the one this program is in)");
  app.add_option("--source-dir", o.source_dir, "the source tree (deploy/*.yaml)")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  tandem::StatusOr<int> result = tandem::tools::Run(o);
  if (!result.ok()) {
    std::fprintf(stderr, "tandem-validate: %s\n", result.status().ToString().c_str());
    return 1;
  }
  return *result;
}
