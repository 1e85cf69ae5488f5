// tandem-plan as a user runs it, on the planner's sample profile written to a
// file: the table, the JSON (the same twice), the plots, the launch configuration
// (every key one the shipped configs carry), the origin check, and a clear
// message with a nonzero exit for each kind of bad input.
#include <gtest/gtest.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "nlohmann/json.hpp"
#include "planner/profile_io.h"
#include "tests/planner/sample_profile.h"
#include "tests/testing/run_command.h"
#include "tools/plan/launch_config.h"

namespace tandem::tools {
namespace {

std::string Dir(const char* variable) {
  const char* dir = std::getenv(variable);
  return dir != nullptr ? dir : ".";
}

using Result = ::tandem::testing::CommandResult;
using ::tandem::testing::RunCommand;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteFile(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

class PlanToolTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new std::string(::testing::TempDir() + "/plan_tool_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(*root_);
    planner::Profile profile = planner::testing::SampleProfile();
    profile.engine.num_device_blocks = 10000;  // 160K KV tokens
    profile.kv_capacity.device_tokens = 160000;
    ASSERT_TRUE(planner::SaveProfile(profile, *root_ + "/profile.json").ok());
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*root_);
    delete root_;
  }
  // tandem-plan on the sample profile, its origin only warned about, with a workload it serves.
  static std::string Plan(const std::string& more = "") {
    return Dir("TANDEM_BINARY_DIR") + "/tools/plan/tandem-plan --profile " + *root_ +
           "/profile.json --profile-origin warn --workload-rate 20 --workload-prompt-distribution lognormal "
           "--workload-prompt-mean 600 --workload-prompt-stddev 300 --workload-prompt-max 4000 "
           "--workload-output-distribution uniform --workload-output-min 20 --workload-output-max 200 "
           "--slo-ttft-ms 500 --slo-tpot-ms 20 --budget-max-gpus 6 --plan-num-requests 400 " +
           more;
  }
  static std::string* root_;
};

std::string* PlanToolTest::root_ = nullptr;

TEST_F(PlanToolTest, PlansTheSampleProfile) {
  const std::string json = *root_ + "/plan.json";
  Result run = RunCommand(Plan("--json " + json + " --svg-dir " + *root_ + "/svg"));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  for (const char* text : {"prefill step:", "decode step:", "KV transfer:  local", "layout", "goodput r/s",
                           "TTFT p90", "binding", "1P1D", "3C", "recommended: ", "tandem-router --config deploy/router.yaml",
                           "--kv-num-device-blocks 10000", "commit: profile 0123456789"}) {
    EXPECT_NE(run.output.find(text), std::string::npos) << text << "\n" << run.output;
  }
  const nlohmann::json plan = nlohmann::json::parse(ReadFile(json));
  EXPECT_EQ(plan["format"], "tandem-plan");
  EXPECT_EQ(plan["candidates"].size(), 15u + 6u);  // xPyD with x + y <= 6, and 1C..6C
  ASSERT_TRUE(plan["recommended"].is_string());
  int simulated = 0;
  for (const auto& c : plan["candidates"]) simulated += c.contains("simulation");
  EXPECT_GE(simulated, 2);
  EXPECT_GT(plan["cost_model"]["prefill"]["r2"].get<double>(), 0.9);
  for (const char* name : {"goodput_vs_pd_ratio.svg", "throughput_vs_interactivity.svg"}) {
    const std::string svg = ReadFile(*root_ + "/svg/" + name);
    EXPECT_EQ(svg.rfind("<svg", 0), 0u) << name;
    EXPECT_NE(svg.find("</svg>"), std::string::npos) << name;
    EXPECT_NE(svg.find("<polyline"), std::string::npos) << name;
  }
  // The same inputs give the same plan.
  ASSERT_EQ(RunCommand(Plan("--json " + *root_ + "/again.json")).exit_code, 0);
  EXPECT_EQ(ReadFile(json), ReadFile(*root_ + "/again.json"));
}

TEST_F(PlanToolTest, TakesTheWorkloadFromAFileAndATrace) {
  std::string trace;
  for (int i = 0; i < 400; ++i) {
    trace += "{\"timestamp\": " + std::to_string(i * 0.1) + ", \"prompt_tokens\": " + std::to_string(200 + i % 7 * 50) +
             ", \"output_tokens\": " + std::to_string(20 + i % 5 * 10) + "}\n";
  }
  WriteFile(*root_ + "/trace.jsonl", trace);
  // JSON is YAML: the same keys as the flags, nested.
  WriteFile(*root_ + "/workload.json", "{\"profile\": \"" + *root_ +
                                           "/profile.json\", \"profile_origin\": \"warn\", \"workload\": {\"trace\": \"" +
                                           *root_ + "/trace.jsonl\"}, \"slo\": {\"ttft_ms\": 500, \"tpot_ms\": 20}, "
                                           "\"budget\": {\"max_gpus\": 3}}");
  Result run = RunCommand(Dir("TANDEM_BINARY_DIR") + "/tools/plan/tandem-plan --config " + *root_ + "/workload.json");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("at 10 req/s"), std::string::npos) << run.output;  // the trace's own rate
}

TEST_F(PlanToolTest, WarnsAboutAProfileWhoseRoundsDisagreed) {
  Result quiet = RunCommand(Plan());
  ASSERT_EQ(quiet.exit_code, 0) << quiet.output;
  EXPECT_EQ(quiet.output.find("disagreed"), std::string::npos) << quiet.output;

  planner::Profile noisy = planner::testing::SampleProfile();
  noisy.engine.num_device_blocks = 10000;
  noisy.kv_capacity.device_tokens = 160000;
  for (planner::PrefillPoint& x : noisy.prefill.points) x.spread = 0.3;
  ASSERT_TRUE(planner::SaveProfile(noisy, *root_ + "/noisy.json").ok());
  Result run =
      RunCommand(Plan("--prefill-profile " + *root_ + "/noisy.json --decode-profile " + *root_ + "/noisy.json"));
  ASSERT_EQ(run.exit_code, 0) << run.output;  // a warning: the plan is still made
  EXPECT_NE(run.output.find("noisy.json: the repetitions of half its 6 points disagreed by more than"),
            std::string::npos)
      << run.output;
  EXPECT_NE(run.output.find("recommended: "), std::string::npos) << run.output;
}

TEST_F(PlanToolTest, RefusesAProfileOfAnotherBuildByDefault) {
  Result run = RunCommand(Dir("TANDEM_BINARY_DIR") + "/tools/plan/tandem-plan --profile " + *root_ +
                          "/profile.json --workload-rate 1");
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_NE(run.output.find("--profile-origin warn"), std::string::npos) << run.output;
  EXPECT_EQ(run.output.find("layout"), std::string::npos) << run.output;
}

TEST_F(PlanToolTest, BadInputGetsAMessageAndANonzeroExit) {
  WriteFile(*root_ + "/empty.json", "");
  WriteFile(*root_ + "/malformed.json", "{\"format\": \"tandem-profile\", ");
  WriteFile(*root_ + "/empty.jsonl", "");
  WriteFile(*root_ + "/bad.jsonl", "{\"timestamp\": 0, \"prompt_tokens\": 10, \"output_tokens\": 5}\n{oops\n");
  const std::string plan = Dir("TANDEM_BINARY_DIR") + "/tools/plan/tandem-plan --profile-origin warn ";
  const std::string profile = "--profile " + *root_ + "/profile.json ";
  const struct {
    std::string args;
    int exit_code;
    std::string message;
  } cases[] = {
      {"--profile " + *root_ + "/empty.json --workload-rate 1", 1, "empty.json"},
      {"--profile " + *root_ + "/malformed.json --workload-rate 1", 1, "malformed.json"},
      {"--profile " + *root_ + "/missing.json --workload-rate 1", 1, "missing.json"},
      {profile + "--workload-trace " + *root_ + "/empty.jsonl", 1, "at least two requests"},
      {profile + "--workload-trace " + *root_ + "/bad.jsonl", 1, "bad.jsonl line 2"},
      {profile + "--workload-rate 1 --slo-ttft-ms 0.01", 1, "no layout meets the SLO at any rate"},
      {profile + "--workload-rate 1 --slo-tpot-ms 1", 1, "no layout meets the SLO at any rate"},
      {profile + "--workload-rate 100000 --budget-max-gpus 2 --plan-num-requests 100", 1, "no layout within 2 GPUs"},
      {profile + "--workload-rate 1 --transfer-path ucx", 1, "(it has: local)"},
      {profile + "--workload-rate 1 --workload-prompt-distribution zipf", 1, "zipf"},
      {profile + "--workload-rate 1 --workload-prompt-mean 200000", 1, "max_model_len 32768"},
      {profile + "--workload-rate 0", 1, "workload.rate"},
      {profile + "--workload-rate 1 --plan-engine-speed 0", 1, "plan.engine_speed"},
      {profile + "--workload-rate 1 --plan-step-overhead-ms -2", 1, "plan.step_overhead_ms"},
      {profile + "--workload-rate 1 --plan-host-cpu-ms-per-request -1", 1, "plan.host_cpu_ms_per_request"},
      {profile + "--workload-rate 1 --plan-host-cpu-ms-per-output-token -0.5", 1, "plan.host_cpu_ms_per_output_token"},
      {profile + "--workload-rate 1 --plan-host-cpu-ms-per-output-token 0.1 --plan-host-node-cpu-ms-per-output-token 0.2",
       1, "cannot be larger"},
      {profile + "--workload-rate 1 --plan-host-cpu-ms-per-request 1 --plan-host-node-cpu-ms-per-request 2", 1,
       "plan.host_node_cpu_ms_per_request is part of"},
      {profile + "--no-such-flag 1", 2, "no-such-flag"},
  };
  for (const auto& c : cases) {
    Result run = RunCommand(plan + c.args);
    EXPECT_EQ(run.exit_code, c.exit_code) << c.args << "\n" << run.output;
    EXPECT_NE(run.output.find(c.message), std::string::npos) << c.args << "\n" << run.output;
    EXPECT_EQ(run.output.find("Segmentation"), std::string::npos) << run.output;
  }
  // A rate no layout serves still prints its table.
  Result run = RunCommand(plan + profile + "--workload-rate 100000 --budget-max-gpus 2 --plan-num-requests 100");
  EXPECT_NE(run.output.find("1P1D"), std::string::npos) << run.output;
}

// Every key of the launch configuration is one the shipped config of its program has.
TEST(LaunchConfigTest, UsesOnlyKeysTheShippedConfigsHave) {
  auto keys_of = [](const std::string& path) {
    std::set<std::string> keys;
    const YAML::Node root = YAML::LoadFile(Dir("TANDEM_SOURCE_DIR") + "/" + path);
    for (const auto& kv : root) {
      const std::string key = kv.first.as<std::string>();
      if (kv.second.IsMap()) {
        for (const auto& inner : kv.second) keys.insert(key + "." + inner.first.as<std::string>());
      } else {
        keys.insert(key);
      }
    }
    return keys;
  };
  planner::Profile profile = planner::testing::SampleProfile();
  profile.transfer.paths[0].transport = "ucx";
  profile.transfer.paths[0].options = "tcp";
  for (const planner::Layout layout : {planner::Layout{.prefill_nodes = 2, .decode_nodes = 3},
                                       planner::Layout{.colocated_nodes = 4}}) {
    const std::vector<LaunchGroup> groups = LaunchGroups(layout, profile, profile, profile.transfer.paths[0]);
    ASSERT_EQ(groups.size(), layout.colocated() ? 2u : 3u);
    int nodes = 0;
    for (const LaunchGroup& g : groups) {
      const std::set<std::string> keys = keys_of(g.config_file);
      for (const auto& [key, value] : g.settings) EXPECT_TRUE(keys.count(key)) << g.config_file << ": " << key;
      if (g.program != "tandem-router") nodes += g.count;
    }
    EXPECT_EQ(nodes, layout.Gpus());
    const std::string text = FormatLaunch(groups, "");
    EXPECT_NE(text.find(layout.colocated() ? "role: colocated" : "ucx_transports: tcp"), std::string::npos) << text;
  }
}

}  // namespace
}  // namespace tandem::tools
