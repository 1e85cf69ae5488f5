#include "planner/plan_json.h"

#include <cmath>

#include "nlohmann/json.hpp"

namespace tandem::planner {
namespace {

using nlohmann::ordered_json;

ordered_json Number(double v) { return std::isfinite(v) ? ordered_json(v) : ordered_json(nullptr); }

ordered_json LatencyJson(const LatencySummary& l) {
  return {{"ttft_p50_seconds", Number(l.ttft_p50)},
          {"ttft_p90_seconds", Number(l.ttft_p90)},
          {"tpot_p50_seconds", Number(l.tpot_p50)},
          {"tpot_p90_seconds", Number(l.tpot_p90)}};
}

ordered_json SimJson(const SimResult& s) {
  return {{"rate", Number(s.rate)},
          {"measured", s.measured},
          {"completed", s.completed},
          {"attainment", Number(s.attainment)},
          {"latency", LatencyJson(s.latency)},
          {"e2e_p50_seconds", Number(s.e2e_p50)},
          {"e2e_p90_seconds", Number(s.e2e_p90)},
          {"e2e_mean_seconds", Number(s.e2e_mean)},
          {"output_tokens_per_second", Number(s.output_tokens_per_second)},
          {"steps", s.steps}};
}

ordered_json LengthJson(const LengthDistribution& d) {
  ordered_json j = {{"distribution", LengthKindName(d.kind)}};
  switch (d.kind) {
    case LengthKind::kFixed: j["mean"] = d.mean; break;
    case LengthKind::kUniform: j["min"] = d.min, j["max"] = d.max; break;
    case LengthKind::kNormal:
    case LengthKind::kLognormal:
      j["mean"] = d.mean, j["stddev"] = d.stddev, j["min"] = d.min, j["max"] = d.max;
      break;
    case LengthKind::kEmpirical: j["values"] = d.values; break;
  }
  return j;
}

ordered_json ProfileJson(const std::string& path, const Profile& p) {
  return {{"path", path},       {"commit", p.commit},       {"date", p.date},        {"quick", p.quick},
          {"backend", p.device.backend}, {"device", p.device.name}, {"model", p.model.id}};
}

ordered_json CostJson(const CostModel& cost) {
  const PrefillFit& p = cost.prefill_fit();
  const DecodeFit& d = cost.decode_fit();
  const TransferPath& t = cost.transfer_path();
  return {{"prefill",
           {{"form", "per_step * steps + per_token * tokens + per_attention * pairs"},
            {"terms", p.terms},
            {"per_step_seconds", p.per_step_seconds},
            {"per_token_seconds", p.per_token_seconds},
            {"per_attention_seconds", p.per_attention_seconds},
            {"points", p.num_points},
            {"r2", p.r2},
            {"max_relative_error", p.max_relative_error},
            {"mean_relative_error", p.mean_relative_error}}},
          {"decode",
           {{"intercept_seconds", d.intercept_seconds},
            {"per_sequence_seconds", d.per_sequence_seconds},
            {"per_kv_token_seconds", d.per_kv_token_seconds},
            {"r2", d.r2},
            {"max_relative_error", d.max_relative_error}}},
          {"transfer",
           {{"transport", t.transport},
            {"options", t.options},
            {"fixed_seconds", t.fit.fixed_seconds},
            {"per_run_seconds", t.fit.per_run_seconds},
            {"bytes_per_second", t.fit.bytes_per_second},
            {"r2", t.fit.r2},
            {"max_relative_error", t.fit.max_relative_error}}}};
}

ordered_json CandidateJson(const Plan& plan, const CandidateResult& c) {
  const ScreenResult& s = c.screen;
  ordered_json j = {{"layout", s.layout.Name()},
                    {"prefill_nodes", s.layout.prefill_nodes},
                    {"decode_nodes", s.layout.decode_nodes},
                    {"colocated_nodes", s.layout.colocated_nodes},
                    {"gpus", s.layout.Gpus()},
                    {"goodput", Number(c.Goodput())},
                    {"goodput_from", c.simulated ? "simulation" : "screen"},
                    {"output_tokens_per_second_per_gpu", Number(plan.TokensPerGpu(c))},
                    {"headroom", Number(c.Goodput() / plan.rate - 1)},
                    {"latency_at_rate", LatencyJson(c.Latency())},
                    {"screen",
                     {{"max_rate", Number(s.max_rate)},
                      {"binding", ConstraintName(s.binding)},
                      {"meets_slo_at_rate", s.meets_slo_at_rate},
                      {"latency_at_rate", LatencyJson(s.at_rate)},
                      {"prefill_utilization", Number(s.prefill_utilization)},
                      {"transfer_utilization", Number(s.transfer_utilization)},
                      {"decode_batch", Number(s.decode_batch)},
                      {"decode_kv_fraction", Number(s.decode_kv_fraction)}}}};
  if (c.simulated) {
    j["simulation"] = {{"goodput", Number(c.des.goodput)},
                       {"simulations", c.des.simulations},
                       {"at_goodput", SimJson(c.des.at_goodput)},
                       {"at_rate", SimJson(c.at_rate)}};
    ordered_json curve = ordered_json::array();
    for (const SimResult& r : c.curve) curve.push_back(SimJson(r));
    j["simulation"]["curve"] = curve;
  }
  return j;
}

}  // namespace

std::string PlanToJson(const Plan& plan, const CostModel& cost, const PlanContext& context) {
  ordered_json j;
  j["format"] = "tandem-plan";
  j["format_version"] = 1;
  ordered_json profiles = ordered_json::array();
  if (context.prefill_profile != nullptr) {
    profiles.push_back(ProfileJson(context.profile_paths.empty() ? "" : context.profile_paths.front(),
                                   *context.prefill_profile));
  }
  if (context.decode_profile != nullptr && context.decode_profile != context.prefill_profile) {
    profiles.push_back(ProfileJson(context.profile_paths.size() > 1 ? context.profile_paths[1] : "",
                                   *context.decode_profile));
  }
  j["profiles"] = profiles;
  j["cost_model"] = CostJson(cost);
  if (context.workload != nullptr) {
    const Workload& w = *context.workload;
    j["workload"] = {{"rate", w.rate},
                     {"trace_requests", w.trace.size()},
                     {"prompt", w.trace.empty() ? LengthJson(w.prompt) : ordered_json{{"distribution", "trace"}}},
                     {"output", w.trace.empty() ? LengthJson(w.output) : ordered_json{{"distribution", "trace"}}},
                     {"prefix_hit_rate", w.prefix_hit_rate},
                     {"mean_prompt_tokens", plan.stats.mean_prompt},
                     {"mean_output_tokens", plan.mean_output_tokens},
                     {"mean_decode_context_tokens", plan.stats.mean_decode_context}};
  }
  if (context.slo != nullptr) {
    j["slo"] = {{"ttft_seconds", context.slo->ttft_seconds},
                {"tpot_seconds", context.slo->tpot_seconds},
                {"attainment", context.slo->attainment}};
  }
  if (context.options != nullptr) {
    const PlanOptions& o = *context.options;
    j["budget"] = {{"max_gpus", o.max_gpus}, {"colocated", o.colocated}};
    j["simulation"] = {{"seed", o.sim.seed},
                       {"num_requests", o.sim.num_requests},
                       {"warmup_fraction", o.sim.warmup_fraction},
                       {"simulated_candidates", o.simulate}};
  }
  ordered_json candidates = ordered_json::array();
  for (const CandidateResult& c : plan.candidates) candidates.push_back(CandidateJson(plan, c));
  j["candidates"] = candidates;
  j["recommended"] = plan.recommended >= 0
                         ? ordered_json(plan.candidates[static_cast<size_t>(plan.recommended)].screen.layout.Name())
                         : ordered_json(nullptr);
  j["launch"] = context.launch;
  j["warnings"] = plan.warnings;
  return j.dump(2) + "\n";
}

}  // namespace tandem::planner
