// tandem-plan: sizes the prefill and decode pools for a workload and its SLO
// from tandem-profile's measurements (docs/planner.md).
//
//   tandem-plan --profile h200.json --workload-rate 20 --workload-prompt-distribution lognormal
//     --workload-prompt-mean 1500 --workload-prompt-stddev 800 --slo-ttft-ms 500 --slo-tpot-ms 40
//   tandem-plan --config workload.yaml --json plan.json --svg-dir plots/
//
// It screens every xPyD and colocated layout within the GPU budget analytically,
// simulates the best few, prints a table and the launch configuration of the
// recommended layout. Exit status: 0 with a recommendation, 1 on an error or when
// no layout within the budget serves the rate, 2 on bad usage.
#include <cstdio>
#include <fstream>

#include "common/base/build_info.h"
#include "planner/plan_json.h"
#include "planner/profile_io.h"
#include "planner/profile_origin.h"
#include "tools/plan/launch_config.h"
#include "tools/plan/plan_options.h"
#include "tools/plan/plan_report.h"
#include "tools/plan/plan_svg.h"

namespace tandem::tools {
namespace {

struct Profiles {
  planner::Profile prefill;
  planner::Profile decode;
  std::vector<std::string> paths;
};

StatusOr<Profiles> LoadProfiles(const PlanToolOptions& options) {
  Profiles p;
  const std::string prefill_path = options.prefill_profile.empty() ? options.profile : options.prefill_profile;
  const std::string decode_path = options.decode_profile.empty() ? options.profile : options.decode_profile;
  TANDEM_ASSIGN_OR_RETURN(p.prefill, planner::LoadProfile(prefill_path));
  TANDEM_ASSIGN_OR_RETURN(p.decode, planner::LoadProfile(decode_path));
  p.paths = {prefill_path, decode_path};
  const planner::ProfileOrigin expected{.commit = std::string(BuildCommit()), .backend = "",
                                        .device_name = options.expected_device};
  const planner::OriginPolicy policy =
      options.profile_origin == "warn" ? planner::OriginPolicy::kWarn : planner::OriginPolicy::kRefuse;
  for (const auto& [path, profile] : {std::pair{prefill_path, &p.prefill}, std::pair{decode_path, &p.decode}}) {
    if (profile == &p.decode && decode_path == prefill_path) break;  // one file: checked once
    std::vector<std::string> warnings;
    const Status origin = planner::CheckProfileOrigin(*profile, expected, policy, &warnings);
    if (!origin.ok()) {
      return FailedPreconditionError(path + ": " + origin.message() +
                                     " (measure again with this build, or --profile-origin warn to plan anyway)");
    }
    for (const std::string& w : warnings) std::fprintf(stderr, "tandem-plan: warning: %s: %s\n", path.c_str(), w.c_str());
    if (const std::string noisy = planner::NoisyProfileWarning(*profile); !noisy.empty()) {
      std::fprintf(stderr, "tandem-plan: warning: %s: %s\n", path.c_str(), noisy.c_str());
    }
    if (profile->quick) {
      std::fprintf(stderr, "tandem-plan: warning: %s was made with --quick (small grids: not for planning)\n",
                   path.c_str());
    }
  }
  return p;
}

Status WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return InvalidArgumentError("cannot write " + path);
  return Status::Ok();
}

// Returns the exit status: 0 with a recommendation, 1 without.
StatusOr<int> Run(const PlanToolOptions& options) {
  TANDEM_RETURN_IF_ERROR(options.Validate());
  TANDEM_ASSIGN_OR_RETURN(Profiles profiles, LoadProfiles(options));
  TANDEM_ASSIGN_OR_RETURN(planner::CostModel cost,
                          planner::CostModel::Build(profiles.prefill, profiles.decode, options.transfer_path));
  TANDEM_ASSIGN_OR_RETURN(planner::Workload workload, options.ToWorkload());
  const planner::Slo slo = options.ToSlo();
  const planner::PlanOptions plan_options = options.ToPlanOptions();
  std::printf("%s", FormatCostModel(cost).c_str());
  TANDEM_ASSIGN_OR_RETURN(planner::Plan plan,
                          planner::MakePlan(cost, workload, slo, plan_options, profiles.decode.engine.max_model_len));
  std::printf("\n%s", FormatPlanTable(plan).c_str());
  for (const std::string& w : plan.warnings) std::fprintf(stderr, "tandem-plan: warning: %s\n", w.c_str());
  std::string launch;
  if (plan.recommended >= 0) {
    const planner::CandidateResult& best = plan.candidates[static_cast<size_t>(plan.recommended)];
    const std::string note = cost.transfer_path().transport == "local"
                                 ? "handoffs were priced on the profile's local (in-process memcpy) path"
                                 : "";
    launch = FormatLaunch(LaunchGroups(best.screen.layout, profiles.prefill, profiles.decode, cost.transfer_path()),
                          note);
    std::printf("\nrecommended: %s, %d GPU%s: goodput %.2f req/s at the SLO (%.0f %% over %.3g req/s)\n\n%s",
                best.screen.layout.Name().c_str(), best.screen.layout.Gpus(), best.screen.layout.Gpus() > 1 ? "s" : "",
                best.des.goodput,
                (best.des.goodput / plan.rate - 1) * 100, plan.rate, launch.c_str());
  }
  if (!options.json.empty()) {
    const planner::PlanContext context{.profile_paths = profiles.paths,
                                       .prefill_profile = &profiles.prefill,
                                       .decode_profile = &profiles.decode,
                                       .workload = &workload,
                                       .slo = &slo,
                                       .options = &plan_options,
                                       .launch = launch};
    TANDEM_RETURN_IF_ERROR(WriteText(options.json, planner::PlanToJson(plan, cost, context)));
    std::printf("wrote %s\n", options.json.c_str());
  }
  if (!options.svg_dir.empty()) {
    TANDEM_RETURN_IF_ERROR(WritePlanSvgs(plan, options.svg_dir));
    std::printf("wrote %s/goodput_vs_pd_ratio.svg, %s/throughput_vs_interactivity.svg\n", options.svg_dir.c_str(),
                options.svg_dir.c_str());
  }
  if (plan.recommended < 0) {
    double best = 0;
    std::string name = "none";
    for (const planner::CandidateResult& c : plan.candidates) {
      if (c.simulated && c.des.goodput > best) best = c.des.goodput, name = c.screen.layout.Name();
    }
    std::fprintf(stderr,
                 "tandem-plan: no layout within %d GPUs serves %.3g req/s at the SLO (the best simulated, %s, "
                 "reaches %.3g req/s): raise budget.max_gpus, relax the SLO or lower the rate\n",
                 plan_options.max_gpus, plan.rate, name.c_str(), best);
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace tandem::tools

int main(int argc, char** argv) {
  tandem::tools::PlanToolOptions options;
  tandem::config::ConfigBinder binder;
  options.Bind(binder);
  if (auto code = binder.ParseCommandLine(
          "tandem-plan",
          "Sizes the prefill and decode pools for a workload and its SLO from tandem-profile's profiles "
          "(docs/planner.md): an analytic screen of every layout within the GPU budget, a simulation of the best, "
          "a table, JSON, plots and the launch configuration. --config takes a YAML or JSON file of the same keys.",
          argc, argv)) {
    return *code;
  }
  tandem::StatusOr<int> result = tandem::tools::Run(options);
  if (!result.ok()) {
    std::fprintf(stderr, "tandem-plan: %s\n", result.status().ToString().c_str());
    return 1;
  }
  return *result;
}
