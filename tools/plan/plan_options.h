// PlanToolOptions: everything tandem-plan reads — the profiles, the workload,
// the SLO, the budget and the simulation — as config keys (a YAML or JSON file
// given with --config) and flags (ConfigBinder: `workload.prompt.mean` is
// --workload-prompt-mean). ToWorkload/ToSlo/ToPlanOptions turn them into the
// planner's types, with the first bad field named.
// Thread rule: plain value type.
#pragma once

#include <string>
#include <vector>

#include "common/base/status.h"
#include "common/config/config_binder.h"
#include "planner/plan.h"
#include "planner/workload.h"

namespace tandem::tools {

// One length distribution's keys (workload.prompt.*, workload.output.*).
struct LengthOptions {
  // fixed | uniform | normal | lognormal | empirical.
  std::string distribution = "fixed";
  double mean = 0;      // tokens (fixed, normal, lognormal)
  double stddev = 0;    // tokens (normal, lognormal: of the length itself)
  int min = 1;          // tokens: uniform's range, the clamp of normal and lognormal
  int max = 1 << 20;
  std::vector<std::string> values;  // empirical: token counts, each equally likely

  static LengthOptions Fixed(double tokens) {
    LengthOptions o;
    o.mean = tokens;
    return o;
  }
  void Bind(config::ConfigBinder& b, const std::string& prefix);
  StatusOr<planner::LengthDistribution> ToDistribution(const std::string& what) const;
};

struct PlanToolOptions {
  // Profile of every node (tandem-profile's JSON); prefill_profile / decode_profile
  // override it for one pool (profiles of different engine settings, one model).
  std::string profile;
  std::string prefill_profile;
  std::string decode_profile;
  // refuse: a profile of another commit, a dirty build or another device
  // (expected_device, when given) is an error; warn: named on stderr, used.
  std::string profile_origin = "refuse";
  // The device the plan is for (DeviceInfo::name, e.g. "NVIDIA H200"); empty: not checked.
  std::string expected_device;
  // The profile's KV transfer path to price handoffs with (local, ucx); empty: ucx
  // when measured, else the first.
  std::string transfer_path;

  // Poisson arrivals of this rate (req/s); with a trace, the rate its timestamps are
  // scaled to (0: the trace's own).
  double rate = 0;
  // JSON lines: {"timestamp": s, "prompt_tokens": n, "output_tokens": n}.
  std::string trace;
  LengthOptions prompt = LengthOptions::Fixed(512);
  LengthOptions output = LengthOptions::Fixed(128);
  // Fraction of each prompt found in the prefix cache, [0, 1).
  double prefix_hit_rate = 0;

  double ttft_ms = 2000;        // SLO: time to first token
  double tpot_ms = 100;         // SLO: time per output token
  double attainment_percent = 90;  // SLO: requests within both, at least

  int max_gpus = 8;             // budget: nodes (one GPU each) at most
  bool colocated = true;        // consider colocated layouts too
  int simulate = 6;             // candidates simulated (plus the two most efficient)
  int seed = 1;                 // the simulation's seed
  int num_requests = 1000;      // requests per simulation
  int host_cores = 0;           // > 0: the nodes share one host of this many cores (a CPU cluster)
  double host_idle_cores_per_node = 0;  // with host_cores: the serving path's CPU (planner::SimOptions)
  double host_cpu_ms_per_request = 0;
  double host_cpu_ms_per_output_token = 0;
  double host_node_cpu_ms_per_output_token = 0;  // of it, the decode node's own
  double host_node_cpu_ms_per_request = 0;       // of host_cpu_ms_per_request, the decode node's own
  double engine_speed = 1;              // the engines against their profile (what-if; tandem-validate measures it)
  double step_overhead_ms = 0;          // engine time per step beyond the profiled (tandem-validate measures it)

  std::string json;             // write the plan as JSON here (empty: no)
  std::string svg_dir;          // write the two plots here (empty: no)

  void Bind(config::ConfigBinder& b);
  // InvalidArgument naming the first bad field (files are read later).
  Status Validate() const;
  planner::Slo ToSlo() const;
  planner::PlanOptions ToPlanOptions() const;
  // The workload; reads the trace file when one is named.
  StatusOr<planner::Workload> ToWorkload() const;
};

}  // namespace tandem::tools
