#include "tools/validate/validation.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <sstream>

#include "tests/planner/sample_profile.h"
#include "tools/validate/validate_report.h"

namespace tandem::tools {
namespace {

std::string Line(double send, int prompt, int output, bool ok, double ttft, double e2e) {
  char text[256];
  std::snprintf(text, sizeof(text),
                "{\"send_s\": %g, \"prompt_tokens\": %d, \"output_tokens\": %d, \"ok\": %s, \"ttft_s\": %g, "
                "\"e2e_s\": %g, \"completion_tokens\": %d}\n",
                send, prompt, output, ok ? "true" : "false", ttft, e2e, ok ? output : 0);
  return text;
}

constexpr char kProcessCpu[] = "process_cpu_seconds_total";
constexpr char kEngineCpu[] = "tandem_engine_cpu_seconds_total";
constexpr char kEngineWait[] = "tandem_engine_runqueue_wait_seconds_total";

TEST(ValidationTest, ParsesRecordsSortedBySendTimeAndRefusesBadLines) {
  auto records = ParseRequestRecords(Line(0.2, 10, 5, true, 0.1, 0.5) + "\n" + Line(0.1, 20, 5, true, 0.1, 0.5));
  ASSERT_TRUE(records.ok()) << records.status().ToString();
  ASSERT_EQ(records->size(), 2u);
  EXPECT_EQ((*records)[0].prompt_tokens, 20);  // sent first
  EXPECT_FALSE(ParseRequestRecords(Line(0, 10, 5, true, 0.1, 0.5)).ok());            // one request
  EXPECT_FALSE(ParseRequestRecords(Line(0, 10, 5, true, 0.1, 0.5) + "{\"send_s\": 1}\n").ok());  // fields missing
  EXPECT_FALSE(ParseRequestRecords(Line(0, 10, 5, true, 0.1, 0.5) + "not json\n").ok());
  EXPECT_FALSE(ParseRequestRecords(Line(0, 0, 5, true, 0.1, 0.5) + Line(1, 10, 5, true, 0.1, 0.5)).ok());
}

TEST(ValidationTest, MeasuredStatsCountFailuresAsMisses) {
  auto records = ParseRequestRecords(Line(0, 10, 11, true, 0.1, 0.6) + Line(1, 10, 11, true, 0.3, 0.8) +
                                     Line(2, 10, 11, false, 0, 0.1));
  ASSERT_TRUE(records.ok());
  const planner::Slo slo{.ttft_seconds = 0.2, .tpot_seconds = 0.1, .attainment = 0.9};
  const PointStats s = MeasuredStats(*records, slo);
  EXPECT_EQ(s.requests, 3);
  EXPECT_EQ(s.completed, 2);
  EXPECT_DOUBLE_EQ(s.offered_rate, 1.0);
  EXPECT_DOUBLE_EQ(s.e2e_mean, 0.7);
  EXPECT_DOUBLE_EQ(s.ttft_p50, 0.1);
  EXPECT_DOUBLE_EQ(s.ttft_p90, 0.3);
  EXPECT_DOUBLE_EQ(s.tpot_p50, 0.05);
  EXPECT_DOUBLE_EQ(s.attainment, 1.0 / 3);  // the slow TTFT and the failure miss
  EXPECT_DOUBLE_EQ(s.goodput, 1.0 / 3);
}

TEST(ValidationTest, PredictionOfALightLoadIsThePrefillTransferAndDecodeTimes) {
  StatusOr<planner::CostModel> cost = planner::CostModel::Build(planner::testing::SampleProfile(), planner::testing::SampleProfile(), "");
  ASSERT_TRUE(cost.ok()) << cost.status().ToString();
  // Two requests far apart: no queueing, so each is its own prefill, handoff and decode steps.
  auto records = ParseRequestRecords(Line(0, 512, 8, true, 1, 1) + Line(100, 512, 8, true, 1, 1));
  ASSERT_TRUE(records.ok());
  const planner::Slo slo{.ttft_seconds = 10, .tpot_seconds = 1, .attainment = 0.9};
  const PointStats p = PredictedStats({.prefill_nodes = 1, .decode_nodes = 1}, *cost, *records, slo, 1);
  const double ttft = cost->PrefillSeconds(512) + cost->TransferSeconds(512);
  EXPECT_NEAR(p.ttft_p50, ttft, 1e-9);
  EXPECT_GT(p.e2e_mean, ttft);
  EXPECT_NEAR(p.e2e_mean - ttft, 7 * p.tpot_p50, 1e-9);
  EXPECT_EQ(p.completed, 2);
  EXPECT_DOUBLE_EQ(p.attainment, 1);
}

// Each request measured beside its prediction, in order: what a point's records file gets.
TEST(ValidationTest, ComparedRecordsPutEachPredictionBesideItsMeasurement) {
  StatusOr<planner::CostModel> cost = planner::CostModel::Build(planner::testing::SampleProfile(), planner::testing::SampleProfile(), "");
  ASSERT_TRUE(cost.ok()) << cost.status().ToString();
  auto records = ParseRequestRecords(Line(0, 512, 8, true, 0.25, 0.5) + Line(100, 256, 4, true, 0.125, 0.375));
  ASSERT_TRUE(records.ok());
  const planner::Slo slo{.ttft_seconds = 10, .tpot_seconds = 1, .attainment = 0.9};
  planner::SimResult simulated;
  const PointStats p = PredictedStats({.prefill_nodes = 1, .decode_nodes = 1}, *cost, *records, slo, 1, {}, &simulated);
  ASSERT_EQ(simulated.requests.size(), 2u);
  std::istringstream lines(ComparedRecordsJsonl(*records, simulated));
  std::string line;
  std::vector<nlohmann::json> parsed;
  while (std::getline(lines, line)) parsed.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(parsed.size(), 2u);
  EXPECT_EQ(parsed[1]["prompt_tokens"], 256);
  EXPECT_DOUBLE_EQ(parsed[1]["ttft_s"].get<double>(), 0.125);
  EXPECT_DOUBLE_EQ(parsed[1]["e2e_s"].get<double>(), 0.375);
  EXPECT_NEAR(parsed[0]["predicted_ttft_s"].get<double>(), cost->PrefillSeconds(512) + cost->TransferSeconds(512), 1e-9);
  EXPECT_NEAR(parsed[0]["predicted_e2e_s"].get<double>() + parsed[1]["predicted_e2e_s"].get<double>(), 2 * p.e2e_mean,
              1e-9);
  // A request the simulation never finished: null, not a number.
  simulated.requests[1].done = -1;
  std::istringstream again(ComparedRecordsJsonl(*records, simulated));
  std::getline(again, line);
  std::getline(again, line);
  EXPECT_TRUE(nlohmann::json::parse(line)["predicted_e2e_s"].is_null());
}

TEST(ValidationTest, ServingCpuIsTheProcessesCpuLessTheEnginesAndTheIdleShare) {
  // Idle: 0.6 s of CPU in 3 s over 2 nodes (and the router): 0.2 cores, 0.1 a node.
  EXPECT_NEAR(IdleCoresPerNode({.process_seconds = 0.6, .engine_seconds = 0.01}, 3, 2), 0.1, 1e-12);
  EXPECT_EQ(IdleCoresPerNode({.process_seconds = 3}, 1, 0), 0);  // nothing to divide by
  // The run: 10 s of CPU in 5 s, 6 of them the engines', 1 the idle share (0.1 cores a node,
  // two nodes), plus the load generator's 0.5: 3.5 s. The decode node's: 4 s, 3 of them its
  // engine's, 0.5 its idle share: 0.5 s.
  const ClusterCpu cpu{.process_seconds = 10, .engine_seconds = 6, .decode_process_seconds = 4,
                       .decode_engine_seconds = 3, .decode_nodes = 1, .nodes = 2};
  const ServingSample run = MeasureServingSample(cpu, 0.1, 0.5, 5, 100, 6400);
  EXPECT_NEAR(run.cpu_seconds, 3.5, 1e-12);
  EXPECT_NEAR(run.decode_node_cpu_seconds, 0.5, 1e-12);
  EXPECT_EQ(run.requests, 100);
  EXPECT_EQ(run.output_tokens, 6400);
  // Less than the idle share: zero, never negative.
  const ServingSample short_run = MeasureServingSample({.process_seconds = 1, .decode_nodes = 1, .nodes = 1}, 2, 0, 5, 10, 10);
  EXPECT_EQ(short_run.cpu_seconds, 0);
  EXPECT_EQ(short_run.decode_node_cpu_seconds, 0);
}

// The counters of a cluster's pages: the router's process only; a prefill node's engine
// apart from the nodes that decode (decode and colocated); the nodes counted.
TEST(ValidationTest, ClusterCpuAddsEachProcessWhereItBelongs) {
  ClusterCpu cpu;
  AddCpu(&cpu, "router", kProcessCpu, 1);
  AddCpu(&cpu, "router", kEngineCpu, 5);  // a router has no engine: not counted
  AddCpu(&cpu, "prefill-0", kProcessCpu, 2);
  AddCpu(&cpu, "prefill-0", kEngineCpu, 1.5);
  AddCpu(&cpu, "decode-0", kProcessCpu, 3);
  AddCpu(&cpu, "decode-0", kEngineCpu, 2);
  AddCpu(&cpu, "colocated-0", kProcessCpu, 4);
  AddCpu(&cpu, "colocated-0", kEngineCpu, 3);
  AddCpu(&cpu, "decode-0", "tandem_generation_tokens_total", 100);
  AddCpu(&cpu, "prefill-0", kEngineWait, 0.25);
  AddCpu(&cpu, "decode-0", kEngineWait, 1);
  AddCpu(&cpu, "colocated-0", kEngineWait, 0.5);
  AddCpu(&cpu, "router", kEngineWait, 9);  // not counted
  EXPECT_NEAR(cpu.process_seconds, 10, 1e-12);
  EXPECT_NEAR(cpu.engine_seconds, 6.5, 1e-12);
  EXPECT_NEAR(cpu.prefill_engine_seconds, 1.5, 1e-12);
  EXPECT_NEAR(cpu.decode_process_seconds, 7, 1e-12);
  EXPECT_NEAR(cpu.decode_engine_seconds, 5, 1e-12);
  EXPECT_EQ(cpu.nodes, 3);
  EXPECT_EQ(cpu.decode_nodes, 2);
  EXPECT_NEAR(cpu.prefill_engine_wait_seconds, 0.25, 1e-12);
  EXPECT_NEAR(cpu.decode_engine_wait_seconds, 1.5, 1e-12);
  const ClusterCpu later{.process_seconds = 12, .engine_seconds = 7, .prefill_engine_seconds = 2,
                         .decode_process_seconds = 8, .decode_engine_seconds = 5.5, .decode_nodes = 2, .nodes = 3,
                         .prefill_engine_wait_seconds = 0.5, .decode_engine_wait_seconds = 2};
  const ClusterCpu run = CpuBetween(cpu, later);
  EXPECT_NEAR(run.process_seconds, 2, 1e-12);
  EXPECT_NEAR(run.prefill_engine_seconds, 0.5, 1e-12);
  EXPECT_NEAR(run.decode_process_seconds, 1, 1e-12);
  EXPECT_NEAR(run.decode_engine_seconds, 0.5, 1e-12);
  EXPECT_EQ(run.nodes, 3);
  EXPECT_EQ(run.decode_nodes, 2);
  EXPECT_NEAR(run.prefill_engine_wait_seconds, 0.25, 1e-12);
  EXPECT_NEAR(run.decode_engine_wait_seconds, 0.5, 1e-12);
  // The decode engines ran 0.5 s and waited 0.5 s: half of their runnable time.
  EXPECT_NEAR(RanOfRunnable(run.decode_engine_seconds, run.decode_engine_wait_seconds), 0.5, 1e-12);
  EXPECT_NEAR(RanOfRunnable(run.prefill_engine_seconds, run.prefill_engine_wait_seconds), 2.0 / 3, 1e-12);
  EXPECT_EQ(RanOfRunnable(1, 0), 1);
  EXPECT_EQ(RanOfRunnable(0, 0), 0);
}

// Runs of different output lengths separate the CPU per request from the CPU per token.
TEST(ValidationTest, ServingCpuIsFittedPerRequestAndPerOutputToken) {
  // 2 ms a request and 0.1 ms a token: 100 requests of 64 tokens, 100 of 16, 50 of 64.
  auto sample = [](int requests, int64_t tokens) {
    return ServingSample{.cpu_seconds = requests * 0.002 + tokens * 0.0001, .requests = requests,
                         .output_tokens = tokens};
  };
  const ServingCpu fit = FitServingCpu(0.01, {sample(100, 6400), sample(100, 1600), sample(50, 3200)});
  EXPECT_NEAR(fit.idle_cores_per_node, 0.01, 1e-15);
  EXPECT_NEAR(fit.seconds_per_request, 0.002, 1e-12);
  EXPECT_NEAR(fit.seconds_per_output_token, 0.0001, 1e-12);
  EXPECT_EQ(fit.node_seconds_per_output_token, 0);  // no decode node's CPU measured
  // The decode node's part: 1 ms a request and 0.04 ms a token of it; never more than all.
  auto with_node = [&](int requests, int64_t tokens, double node_per_token) {
    ServingSample s = sample(requests, tokens);
    s.decode_node_cpu_seconds = requests * 0.001 + tokens * node_per_token;
    return s;
  };
  const ServingCpu node = FitServingCpu(0, {with_node(100, 6400, 4e-5), with_node(100, 1600, 4e-5)});
  EXPECT_NEAR(node.node_seconds_per_output_token, 4e-5, 1e-12);
  EXPECT_NEAR(node.node_seconds_per_request, 0.001, 1e-12);
  EXPECT_NEAR(FitServingCpu(0, {with_node(100, 6400, 3e-4), with_node(100, 1600, 3e-4)}).node_seconds_per_output_token,
              1e-4, 1e-12);
  // Alike runs cannot tell the two apart: all of it per request.
  const ServingCpu alike = FitServingCpu(0, {sample(100, 6400), sample(50, 3200)});
  EXPECT_NEAR(alike.seconds_per_request, 0.0084, 1e-12);
  EXPECT_EQ(alike.seconds_per_output_token, 0);
  // A fit that would make the per-request CPU negative puts it all on the tokens.
  const ServingCpu tokens =
      FitServingCpu(0, {{.cpu_seconds = 0.5, .requests = 100, .output_tokens = 6400},
                        {.cpu_seconds = 0.05, .requests = 100, .output_tokens = 1600}});
  EXPECT_EQ(tokens.seconds_per_request, 0);
  EXPECT_NEAR(tokens.seconds_per_output_token, (0.5 * 6400 + 0.05 * 1600) / (6400.0 * 6400 + 1600.0 * 1600), 1e-15);
  // ... and one that would make the per-token CPU negative, on the requests.
  const ServingCpu requests =
      FitServingCpu(0, {{.cpu_seconds = 0.1, .requests = 100, .output_tokens = 6400},
                        {.cpu_seconds = 0.3, .requests = 100, .output_tokens = 1600}});
  EXPECT_NEAR(requests.seconds_per_request, 0.002, 1e-12);
  EXPECT_EQ(requests.seconds_per_output_token, 0);
  EXPECT_EQ(FitServingCpu(0, {}).seconds_per_request, 0);  // nothing measured
}

// The serving path's CPU slows a prediction only where the host is short of cores.
TEST(ValidationTest, ServingCpuSlowsPredictionsOnlyWhenTheHostIsShort) {
  StatusOr<planner::CostModel> cost = planner::CostModel::Build(planner::testing::SampleProfile(), planner::testing::SampleProfile(), "");
  ASSERT_TRUE(cost.ok()) << cost.status().ToString();
  auto records = ParseRequestRecords(Line(0, 512, 8, true, 1, 1) + Line(0, 512, 8, true, 1, 1) +
                                     Line(100, 512, 8, true, 1, 1));
  ASSERT_TRUE(records.ok());
  const planner::Slo slo{.ttft_seconds = 10, .tpot_seconds = 1, .attainment = 0.9};
  const planner::Layout layout{.prefill_nodes = 2, .decode_nodes = 1};
  const PointStats free_host = PredictedStats(layout, *cost, *records, slo, 1, {.cores = 4, .serving = {}});
  const PointStats busy_host = PredictedStats(layout, *cost, *records, slo, 1,
                                              {.cores = 4, .serving = {.idle_cores_per_node = 1}});
  EXPECT_NEAR(free_host.ttft_p90, PredictedStats(layout, *cost, *records, slo, 1).ttft_p90, 1e-12);
  EXPECT_GT(busy_host.ttft_p90, free_host.ttft_p90);  // one core left for two prefills
}

TEST(ValidationTest, MedianOfOddAndEvenCounts) {
  EXPECT_DOUBLE_EQ(Median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(Median({4, 1}), 2.5);
}

// Speed 0.8 and 0.1 ms a step: the prefill engine's 70 steps of 2 s profiled took
// (2 + 0.007) / 0.8 s, the decode engine's 4,000 steps of 0.4 s took (0.4 + 0.4) / 0.8 s.
TEST(ValidationTest, EnginesCalibrateToASpeedAndAStepOverhead) {
  const planner::EngineWork prefill{.seconds = 2, .steps = 70}, decode{.seconds = 0.4, .steps = 4000};
  EngineCalibration c = CalibrateEngines(prefill, 2.007 / 0.8, decode, 0.8 / 0.8);
  EXPECT_NEAR(c.speed, 0.8, 1e-9);
  EXPECT_NEAR(c.step_overhead_seconds, 1e-4, 1e-12);
  // Engines faster per step than profiled (a negative overhead): one speed, no overhead.
  c = CalibrateEngines(prefill, 2.0, decode, 0.3);
  EXPECT_NEAR(c.speed, 2.4 / 2.3, 1e-12);
  EXPECT_EQ(c.step_overhead_seconds, 0);
  // No decode steps, or no CPU: what can be said.
  c = CalibrateEngines(prefill, 4.0, {}, 0);
  EXPECT_NEAR(c.speed, 0.5, 1e-12);
  EXPECT_EQ(c.step_overhead_seconds, 0);
  c = CalibrateEngines(prefill, 0, decode, 0);
  EXPECT_EQ(c.speed, 1);
}

TEST(ValidationTest, KneeInterpolatesTheCrossingOrSaysItIsOutsideTheSweep) {
  Knee k = FindKnee({10, 20, 30}, {1.0, 0.95, 0.75}, 0.9);
  EXPECT_TRUE(k.bracketed);
  EXPECT_NEAR(k.rate, 22.5, 1e-9);
  k = FindKnee({30, 10, 20}, {0.75, 1.0, 0.95}, 0.9);  // any order
  EXPECT_NEAR(k.rate, 22.5, 1e-9);
  k = FindKnee({10, 20}, {1.0, 0.99}, 0.9);
  EXPECT_FALSE(k.bracketed);
  EXPECT_FALSE(k.below_sweep);
  EXPECT_EQ(k.rate, 20);
  k = FindKnee({10, 20}, {0.5, 0.1}, 0.9);
  EXPECT_TRUE(k.below_sweep);
  EXPECT_EQ(k.rate, 10);
}

// A cluster exactly as the model, measured the way tandem-validate measures a knee: runs of a few
// seconds from an empty cluster scatter the knee around the steady state's; runs a hundred
// times as long put it close.
TEST(ValidationTest, ShortRunsMeasureAKneeFarFromTheSteadyState) {
  StatusOr<planner::CostModel> cost =
      planner::CostModel::Build(planner::testing::SampleProfile(), planner::testing::SampleProfile(), "");
  ASSERT_TRUE(cost.ok()) << cost.status().ToString();
  const planner::Layout layout{.prefill_nodes = 1, .decode_nodes = 1};
  planner::Workload workload;
  workload.rate = 1;
  workload.prompt = {.kind = planner::LengthKind::kUniform, .min = 256, .max = 768};
  workload.output = {.kind = planner::LengthKind::kUniform, .min = 32, .max = 96};
  const planner::Slo slo{.ttft_seconds = 1, .tpot_seconds = 0.1, .attainment = 0.9};
  const planner::SimOptions options{.seed = 7};
  const double steady = planner::FindMaxGoodput(layout, *cost, workload, slo, 1, options).goodput;
  ASSERT_GT(steady, 0);
  KneeProtocol protocol{.fractions = {0.3, 0.6, 0.9, 1.2, 1.5}, .repeats = 1, .seconds_per_point = 8};
  const std::vector<double> short_runs =
      SteadyKneeErrorsUnderProtocol(layout, *cost, workload, slo, options, steady, protocol, 20);
  protocol.seconds_per_point = 800;
  protocol.max_requests = 100000;
  const std::vector<double> long_runs =
      SteadyKneeErrorsUnderProtocol(layout, *cost, workload, slo, options, steady, protocol, 5);
  ASSERT_GE(short_runs.size(), 15u);
  ASSERT_EQ(long_runs.size(), 5u);
  EXPECT_TRUE(std::is_sorted(short_runs.begin(), short_runs.end()));
  auto widest = [](const std::vector<double>& e) { return std::max(std::abs(e.front()), std::abs(e.back())); };
  EXPECT_GT(widest(short_runs), 0.1);
  EXPECT_LT(widest(long_runs), 0.1);
  EXPECT_LT(widest(long_runs), widest(short_runs) / 2);
}

TEST(ValidationTest, SummaryAveragesAbsoluteErrorsAndRanksByGoodputPerNode) {
  auto point = [](double predicted_e2e, double measured_e2e) {
    SweepPoint p;
    p.predicted.e2e_mean = predicted_e2e;
    p.measured.e2e_mean = measured_e2e;
    p.predicted.ttft_p90 = p.measured.ttft_p90 = 1;
    p.profiled = p.measured;  // as profiled: exact
    p.profiled.ttft_p90 = 1.5;
    return p;
  };
  // The knee error is the predictions' on the sweep's runs (1P1D: 18 against 16 measured); the
  // planner's steady-state knee (20) is reported beside it.
  LayoutSweep a{.layout = {.prefill_nodes = 1, .decode_nodes = 1},
                .predicted_knee = 20,
                .run_speed_knee = 20,
                .profiled_knee = 26,
                .measured_knee = {.rate = 16, .bracketed = true},
                .predicted_knee_on_runs = {.rate = 18, .bracketed = true},
                .run_speed_knee_on_runs = {.rate = 18, .bracketed = true},
                .profiled_knee_on_runs = {.rate = 24, .bracketed = true},
                .protocol_knee_errors = {-0.3, -0.1, 0, 0.05, 0.2},
                .points = {point(1.1, 1), point(0.9, 1)}};
  LayoutSweep b{.layout = {.colocated_nodes = 1},
                .predicted_knee = 12,
                .run_speed_knee = 12,
                .profiled_knee = 12,
                .measured_knee = {.rate = 12, .bracketed = true},
                .predicted_knee_on_runs = {.rate = 12, .bracketed = true},
                .run_speed_knee_on_runs = {.rate = 12, .bracketed = true},
                .profiled_knee_on_runs = {.rate = 12, .bracketed = true},
                .protocol_knee_errors = {},
                .points = {point(1, 1)}};
  LayoutSweep c{.layout = {.prefill_nodes = 2, .decode_nodes = 2},
                .predicted_knee = 30,
                .run_speed_knee = 30,
                .profiled_knee = 30,
                .measured_knee = {.rate = 20, .bracketed = false},
                .predicted_knee_on_runs = {},
                .run_speed_knee_on_runs = {},
                .profiled_knee_on_runs = {},
                .protocol_knee_errors = {},
                .points = {point(1.3, 1)}};
  const ValidationSummary s = Summarize({a, b, c});
  EXPECT_EQ(s.points, 4);
  EXPECT_NEAR(s.mean_e2e_error, (0.1 + 0.1 + 0 + 0.3) / 4, 1e-12);
  EXPECT_DOUBLE_EQ(s.mean_ttft_p90_error, 0);
  EXPECT_EQ(s.light_points, 4);  // fraction 0 in these points
  EXPECT_NEAR(s.light_e2e_error, s.mean_e2e_error, 1e-12);
  EXPECT_NEAR(s.max_knee_error, 0.125, 1e-12);  // a's; c's knee is not bracketed
  EXPECT_NEAR(s.max_steady_knee_error, 0.25, 1e-12);
  EXPECT_NEAR(s.protocol_knee_error_p90, 0.3, 1e-12);  // a's largest |error| of five (nearest rank)
  EXPECT_EQ(s.bracketed_knees, 2);
  EXPECT_EQ(s.predicted_top2, (std::vector<std::string>{"1C", "1P1D"}));  // 12 and 10 per node
  EXPECT_EQ(s.measured_best, "1C");
  EXPECT_TRUE(s.best_in_top2);
  // The same sweeps as profiled: E2E exact, TTFT p90 +50 %, 1P1D's knee 24 on the runs (+50 %),
  // 26 in steady state (+62.5 %).
  const ValidationSummary profiled = Summarize({a, b, c}, Prediction::kProfiled);
  EXPECT_DOUBLE_EQ(profiled.mean_e2e_error, 0);
  EXPECT_NEAR(profiled.mean_ttft_p90_error, 0.5, 1e-12);
  EXPECT_NEAR(profiled.max_knee_error, 0.5, 1e-12);
  EXPECT_NEAR(profiled.max_steady_knee_error, 0.625, 1e-12);
  EXPECT_EQ(profiled.predicted_top2, (std::vector<std::string>{"1P1D", "1C"}));  // 13 and 12 per node
  const std::string text = FormatSummary(s, s, profiled);
  EXPECT_NE(text.find("12.5 %  [<= 15 %]  ok"), std::string::npos) << text;
  EXPECT_NE(text.find("steady-state knees: up to 25.0 % off, where this way of measuring puts a model-exact "
                      "cluster's up to 30.0 % off"),
            std::string::npos)
      << text;
  EXPECT_NE(FormatSweeps({a}).find("(5 sweeps simulated): the steady-state knee -30 % to +20 % off it (p10-p90), more "
                                   "than 15 % in 40 % of them"),
            std::string::npos)
      << FormatSweeps({a});
  EXPECT_NE(text.find("MISS"), std::string::npos);  // mean E2E 12.5 % > 12 %
  EXPECT_NE(text.find("as profiled"), std::string::npos);
  EXPECT_NE(FormatSweeps({a}).find("| 0.00 (0.00) |"), std::string::npos);
  EXPECT_EQ(s.repeated_points, 0);  // no repeats: no noise floor
  EXPECT_EQ(text.find("noise floor"), std::string::npos);
}

// The repeats of a point, each against its own prediction: how far their errors lie apart.
TEST(ValidationTest, RepeatsGiveTheSpreadOfTheErrorAsTheNoiseFloor) {
  auto stats = [](double e2e) {
    PointStats s;
    s.e2e_mean = e2e;
    return s;
  };
  EXPECT_EQ(E2eErrorSpread({stats(1.1)}, {stats(1)}), 0);  // one run
  EXPECT_NEAR(E2eErrorSpread({stats(1.1), stats(0.9)}, {stats(1), stats(1)}), 0.2, 1e-12);
  EXPECT_NEAR(E2eErrorSpread({stats(1), stats(1), stats(3)}, {stats(1), stats(2), stats(2)}), 1.0, 1e-12);
  EXPECT_FALSE(std::isfinite(E2eErrorSpread({stats(1), stats(1)}, {stats(1), stats(0)})));
  auto point = [](int runs, double spread) {
    SweepPoint p;
    p.predicted.e2e_mean = p.measured.e2e_mean = p.at_run_speed.e2e_mean = p.profiled.e2e_mean = 1;
    p.runs = runs;
    p.e2e_error_spread = spread;
    return p;
  };
  // Three points with repeats (one whose runs agreed exactly) and one without.
  LayoutSweep a{.layout = {.prefill_nodes = 1, .decode_nodes = 1},
                .predicted_knee = 10,
                .run_speed_knee = 10,
                .profiled_knee = 10,
                .measured_knee = {.rate = 10, .bracketed = true},
                .predicted_knee_on_runs = {},
                .run_speed_knee_on_runs = {},
                .profiled_knee_on_runs = {},
                .protocol_knee_errors = {},
                .points = {point(2, 0.1), point(3, 0.3), point(2, 0), point(1, 0)}};
  const ValidationSummary s = Summarize({a});
  EXPECT_EQ(s.repeated_points, 3);
  EXPECT_NEAR(s.median_e2e_error_spread, 0.1, 1e-12);
  EXPECT_EQ(Summarize({a}, Prediction::kRunSpeed).repeated_points, 0);  // of the prediction proper only
  EXPECT_NE(FormatSummary(s, s, s).find("disagreed on its E2E error by 10.0 % (median over 3 points)"),
            std::string::npos);
}

}  // namespace
}  // namespace tandem::tools
