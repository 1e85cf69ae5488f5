#include "tools/plan/plan_options.h"

#include <algorithm>
#include <cstdlib>

namespace tandem::tools {

void LengthOptions::Bind(config::ConfigBinder& b, const std::string& prefix) {
  b.Field(prefix + ".distribution", distribution, "fixed | uniform | normal | lognormal | empirical");
  b.Field(prefix + ".mean", mean, "mean length (tokens; fixed, normal, lognormal)");
  b.Field(prefix + ".stddev", stddev, "standard deviation of the length (tokens; normal, lognormal)");
  b.Field(prefix + ".min", min, "shortest length (tokens): uniform's range, normal's and lognormal's clamp");
  b.Field(prefix + ".max", max, "longest length (tokens): uniform's range, normal's and lognormal's clamp");
  b.Field(prefix + ".values", values, "empirical: lengths (tokens), each equally likely");
}

StatusOr<planner::LengthDistribution> LengthOptions::ToDistribution(const std::string& what) const {
  planner::LengthDistribution d;
  TANDEM_ASSIGN_OR_RETURN(d.kind, planner::ParseLengthKind(distribution));
  d.mean = mean;
  d.stddev = stddev;
  d.min = min;
  d.max = max;
  for (const std::string& v : values) {
    char* end = nullptr;
    const long n = std::strtol(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0' || n < 1 || n > (1 << 24)) {
      return InvalidArgumentError(what + ".values: '" + v + "' is not a token count");
    }
    d.values.push_back(static_cast<int>(n));
  }
  std::sort(d.values.begin(), d.values.end());
  TANDEM_RETURN_IF_ERROR(d.Validate(what));
  return d;
}

void PlanToolOptions::Bind(config::ConfigBinder& b) {
  b.Field("profile", profile, "profile of every node (tandem-profile JSON)");
  b.Field("prefill_profile", prefill_profile, "profile of the prefill nodes (default: profile)");
  b.Field("decode_profile", decode_profile, "profile of the decode and colocated nodes (default: profile)");
  b.Field("profile_origin", profile_origin,
          "refuse | warn: a profile of another commit, a dirty build or another device");
  b.Field("expected_device", expected_device, "device name the plan is for (empty: not checked)");
  b.Field("transfer_path", transfer_path, "profile transfer path for handoffs: local, ucx (empty: ucx if measured)");
  b.Field("workload.rate", rate, "arrival rate, requests/s (with a trace: scale it to this; 0: its own)");
  b.Field("workload.trace", trace, "arrival trace, JSON lines {timestamp, prompt_tokens, output_tokens}");
  prompt.Bind(b, "workload.prompt");
  output.Bind(b, "workload.output");
  b.Field("workload.prefix_hit_rate", prefix_hit_rate, "fraction of each prompt in the prefix cache, [0, 1)");
  b.Field("slo.ttft_ms", ttft_ms, "SLO: time to first token (ms)");
  b.Field("slo.tpot_ms", tpot_ms, "SLO: time per output token (ms)");
  b.Field("slo.attainment_percent", attainment_percent, "SLO: percent of requests within both bounds");
  b.Field("budget.max_gpus", max_gpus, "nodes (GPUs) at most");
  b.Field("budget.colocated", colocated, "consider colocated layouts too");
  b.Field("plan.simulate", simulate, "candidates simulated after the screen (plus the two most efficient)");
  b.Field("plan.seed", seed, "simulation seed (same seed, same plan)");
  b.Field("plan.num_requests", num_requests, "requests per simulation");
  b.Field("plan.host_cores", host_cores,
          "> 0: every node runs on one host of this many cores, shared (CPU backend on one machine); 0: a device each");
  b.Field("plan.host_idle_cores_per_node", host_idle_cores_per_node,
          "with host_cores: cores each node's serving path takes while idle (polling, heartbeats)");
  b.Field("plan.host_cpu_ms_per_request", host_cpu_ms_per_request,
          "with host_cores: CPU ms per request outside the engines' steps (router, RPCs, KV transfer) at its "
          "arrival, as tandem-validate measures it");
  b.Field("plan.host_cpu_ms_per_output_token", host_cpu_ms_per_output_token,
          "with host_cores: CPU ms per output token on its way to the client (the decode node's output, the router's "
          "stream), as tandem-validate measures it");
  b.Field("plan.host_node_cpu_ms_per_output_token", host_node_cpu_ms_per_output_token,
          "with host_cores: of that, the decode node's own part (its output handed to the router), which the node's "
          "next step waits for, as tandem-validate measures it (at most plan.host_cpu_ms_per_output_token)");
  b.Field("plan.host_node_cpu_ms_per_request", host_node_cpu_ms_per_request,
          "with host_cores: of plan.host_cpu_ms_per_request, the decode node's own part (the reservation, the KV's "
          "landing), done when a request's KV has landed while the node's engine waits (at most "
          "plan.host_cpu_ms_per_request)");
  b.Field("plan.engine_speed", engine_speed,
          "the engines' speed against their profile: every step takes its profiled time / this (1: as profiled)");
  b.Field("plan.step_overhead_ms", step_overhead_ms,
          "engine time every step costs beyond its profiled time, ms (a node handing on the step's outputs)");
  b.Field("json", json, "write the plan as JSON to this file");
  b.Field("svg_dir", svg_dir, "write goodput_vs_pd_ratio.svg and throughput_vs_interactivity.svg here");
}

Status PlanToolOptions::Validate() const {
  if (profile.empty() && (prefill_profile.empty() || decode_profile.empty())) {
    return InvalidArgumentError("profile is required (or both prefill_profile and decode_profile)");
  }
  if (profile_origin != "refuse" && profile_origin != "warn") {
    return InvalidArgumentError("profile_origin must be refuse or warn");
  }
  if (trace.empty() && !(rate > 0)) return InvalidArgumentError("workload.rate must be > 0 (or give workload.trace)");
  if (rate < 0) return InvalidArgumentError("workload.rate must be >= 0");
  if (simulate < 0) return InvalidArgumentError("plan.simulate must be >= 0");
  if (host_cores < 0 || host_cores > 4096) return InvalidArgumentError("plan.host_cores must be in [0, 4096]");
  if (!(host_idle_cores_per_node >= 0) || !(host_cpu_ms_per_request >= 0) || !(host_cpu_ms_per_output_token >= 0) ||
      !(host_node_cpu_ms_per_request >= 0) || !(host_node_cpu_ms_per_output_token >= 0)) {
    return InvalidArgumentError(
        "plan.host_idle_cores_per_node, plan.host_cpu_ms_per_request, plan.host_cpu_ms_per_output_token, "
        "plan.host_node_cpu_ms_per_request and plan.host_node_cpu_ms_per_output_token must be >= 0");
  }
  if (host_node_cpu_ms_per_output_token > host_cpu_ms_per_output_token) {
    return InvalidArgumentError(
        "plan.host_node_cpu_ms_per_output_token is part of plan.host_cpu_ms_per_output_token: it cannot be larger");
  }
  if (host_node_cpu_ms_per_request > host_cpu_ms_per_request) {
    return InvalidArgumentError(
        "plan.host_node_cpu_ms_per_request is part of plan.host_cpu_ms_per_request: it cannot be larger");
  }
  if (!(engine_speed > 0) || engine_speed > 100) return InvalidArgumentError("plan.engine_speed must be in (0, 100]");
  if (!(step_overhead_ms >= 0) || step_overhead_ms > 1e4) {
    return InvalidArgumentError("plan.step_overhead_ms must be in [0, 10000]");
  }
  if (num_requests < 10 || num_requests > 1'000'000) {
    return InvalidArgumentError("plan.num_requests must be in [10, 1000000]");
  }
  return Status::Ok();
}

planner::Slo PlanToolOptions::ToSlo() const {
  return {.ttft_seconds = ttft_ms / 1e3, .tpot_seconds = tpot_ms / 1e3, .attainment = attainment_percent / 100};
}

planner::PlanOptions PlanToolOptions::ToPlanOptions() const {
  planner::PlanOptions o;
  o.max_gpus = max_gpus;
  o.colocated = colocated;
  o.simulate = simulate;
  o.sim.seed = static_cast<uint64_t>(seed);
  o.sim.num_requests = num_requests;
  o.sim.host_cores = host_cores;
  o.sim.host_idle_cores_per_node = host_idle_cores_per_node;
  o.sim.host_cpu_seconds_per_request = host_cpu_ms_per_request / 1e3;
  o.sim.host_cpu_seconds_per_output_token = host_cpu_ms_per_output_token / 1e3;
  o.sim.host_node_cpu_seconds_per_output_token = host_node_cpu_ms_per_output_token / 1e3;
  o.sim.host_node_cpu_seconds_per_request = host_node_cpu_ms_per_request / 1e3;
  o.sim.engine_speed = engine_speed;
  o.sim.step_overhead_seconds = step_overhead_ms / 1e3;
  return o;
}

StatusOr<planner::Workload> PlanToolOptions::ToWorkload() const {
  planner::Workload w;
  w.rate = rate;
  w.prefix_hit_rate = prefix_hit_rate;
  if (!trace.empty()) {
    TANDEM_ASSIGN_OR_RETURN(w.trace, planner::LoadTrace(trace));
    if (w.rate == 0) w.rate = w.TraceRate();
  } else {
    TANDEM_ASSIGN_OR_RETURN(w.prompt, prompt.ToDistribution("workload.prompt"));
    TANDEM_ASSIGN_OR_RETURN(w.output, output.ToDistribution("workload.output"));
  }
  TANDEM_RETURN_IF_ERROR(w.Validate());
  return w;
}

}  // namespace tandem::tools
