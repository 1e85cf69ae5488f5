#include "planner/simulator.h"

#include <gtest/gtest.h>

#include "planner/analytic_model.h"
#include "planner/plan.h"
#include "planner/plan_json.h"
#include "tests/planner/sample_profile.h"

namespace tandem::planner {
namespace {

using testing::SampleProfile;

CostModel CostOf(const Profile& p) {
  StatusOr<CostModel> cost = CostModel::Build(p, p, "");
  EXPECT_TRUE(cost.ok()) << cost.status().ToString();
  return *cost;
}

Workload Lognormal(double rate) {
  return {.rate = rate,
          .prompt = {.kind = LengthKind::kLognormal, .mean = 600, .stddev = 300, .min = 16, .max = 4000},
          .output = {.kind = LengthKind::kLognormal, .mean = 100, .stddev = 50, .min = 2, .max = 600}};
}

// The sample profile with every time scaled by `factor` (< 1: a faster device).
Profile Scaled(double factor) {
  Profile p = SampleProfile();
  for (PrefillPoint& point : p.prefill.points) point.seconds *= factor;
  p.decode.fit.intercept_seconds *= factor;
  p.decode.fit.per_sequence_seconds *= factor;
  p.decode.fit.per_kv_token_seconds *= factor;
  p.transfer.paths[0].fit.fixed_seconds *= factor;
  p.transfer.paths[0].fit.per_run_seconds *= factor;
  p.transfer.paths[0].fit.bytes_per_second /= factor;
  p.kv_capacity.device_tokens = 160000;
  p.engine.num_device_blocks = 10000;
  return p;
}

TEST(SimulatorTest, AgreesWithTheAnalyticModelInLightLoad) {
  const CostModel cost = CostOf(SampleProfile());
  const Slo slo{.ttft_seconds = 1, .tpot_seconds = 0.05, .attainment = 0.9};
  for (const Layout layout : {Layout{.prefill_nodes = 1, .decode_nodes = 1}, Layout{.colocated_nodes = 1}}) {
    const Workload w{.rate = 0.2,
                     .prompt = {.kind = LengthKind::kFixed, .mean = 512},
                     .output = {.kind = LengthKind::kFixed, .mean = 65}};
    const ScreenResult screen = ScreenLayout(layout, cost, ComputeWorkloadStats(w, 16), slo, w.rate);
    const SimResult sim = Simulate(layout, cost, w, slo, w.rate, {.seed = 3, .num_requests = 400});
    SCOPED_TRACE(layout.Name());
    EXPECT_EQ(sim.completed, sim.measured);
    EXPECT_EQ(sim.attainment, 1.0);
    EXPECT_NEAR(sim.latency.ttft_p50, screen.at_rate.ttft_p50, 0.03 * screen.at_rate.ttft_p50);
    EXPECT_NEAR(sim.latency.tpot_p50, screen.at_rate.tpot_p50, 0.03 * screen.at_rate.tpot_p50);
    EXPECT_NEAR(sim.output_tokens_per_second, w.rate * 65, 0.15 * w.rate * 65);  // Poisson: ±15 %
  }
}

TEST(SimulatorTest, AgreesWithTheScreenOnTheKneeWithinAFactor) {
  const CostModel cost = CostOf(Scaled(1));
  const Slo slo{.ttft_seconds = 0.5, .tpot_seconds = 0.02, .attainment = 0.9};
  const Workload w = Lognormal(1);
  for (const Layout layout : {Layout{.prefill_nodes = 1, .decode_nodes = 1}, Layout{.prefill_nodes = 1, .decode_nodes = 3},
                              Layout{.colocated_nodes = 2}}) {
    const ScreenResult screen = ScreenLayout(layout, cost, ComputeWorkloadStats(w, 16), slo, w.rate);
    const GoodputResult des = FindMaxGoodput(layout, cost, w, slo, screen.max_rate, {.num_requests = 600});
    EXPECT_GT(des.goodput, 0.6 * screen.max_rate) << layout.Name();
    EXPECT_LT(des.goodput, 1.6 * screen.max_rate) << layout.Name();
  }
}

TEST(SimulatorTest, SameSeedSamePlanBitForBit) {
  const Profile profile = Scaled(1);
  const CostModel cost = CostOf(profile);
  const Workload w = Lognormal(20);
  const Slo slo{.ttft_seconds = 0.5, .tpot_seconds = 0.02, .attainment = 0.9};
  PlanOptions options{.max_gpus = 4, .simulate = 3, .sim = {.seed = 11, .num_requests = 300}};
  auto json = [&](const PlanOptions& o) {
    StatusOr<Plan> plan = MakePlan(cost, w, slo, o, 32768);
    EXPECT_TRUE(plan.ok()) << plan.status().ToString();
    return PlanToJson(*plan, cost, {.prefill_profile = &profile, .workload = &w, .slo = &slo, .options = &o});
  };
  const std::string first = json(options);
  EXPECT_EQ(first, json(options));
  options.sim.seed = 12;
  EXPECT_NE(first, json(options));  // the seed reaches the simulation
}

TEST(SimulatorTest, TheKneeMovesWithTheProfile) {
  const Slo slo{.ttft_seconds = 0.5, .tpot_seconds = 0.02, .attainment = 0.9};
  const Workload w = Lognormal(1);
  const Layout layout{.prefill_nodes = 1, .decode_nodes = 1};
  const SimOptions sim{.seed = 5, .num_requests = 600};
  const CostModel base = CostOf(Scaled(1));
  const GoodputResult at_base = FindMaxGoodput(layout, base, w, slo, 10, sim);
  ASSERT_GT(at_base.goodput, 0);
  // It is a knee: the SLO holds at the goodput and fails a little past it.
  EXPECT_GE(at_base.at_goodput.attainment, slo.attainment);
  EXPECT_LT(Simulate(layout, base, w, slo, at_base.goodput * 1.1, sim).attainment, slo.attainment);
  // A device twice as fast serves well over 1.5× as much; one twice as slow, well under.
  const GoodputResult faster = FindMaxGoodput(layout, CostOf(Scaled(0.5)), w, slo, 10, sim);
  const GoodputResult slower = FindMaxGoodput(layout, CostOf(Scaled(2)), w, slo, 10, sim);
  EXPECT_GT(faster.goodput, 1.5 * at_base.goodput);
  EXPECT_LT(slower.goodput, 0.7 * at_base.goodput);
}

TEST(SimulatorTest, KvBlocksBoundTheBatch) {
  // A pool of 40 blocks × 16 tokens holds about one 600-token request: every request
  // still completes (they wait for blocks), and the rate it takes collapses.
  Profile small = Scaled(1);
  small.engine.num_device_blocks = 60;
  small.kv_capacity.device_tokens = 960;
  const CostModel cost = CostOf(small);
  const Workload w{.rate = 2,
                   .prompt = {.kind = LengthKind::kFixed, .mean = 600},
                   .output = {.kind = LengthKind::kFixed, .mean = 200}};
  const Slo slo{.ttft_seconds = 100, .tpot_seconds = 1, .attainment = 0.9};
  const SimResult sim =
      Simulate({.prefill_nodes = 1, .decode_nodes = 1}, cost, w, slo, 2, {.num_requests = 60, .min_span_ttfts = 0});
  EXPECT_EQ(sim.completed, sim.measured);
  // One request at a time on the decode node: 200 tokens per 199 steps of ~4.07 ms.
  EXPECT_LT(sim.output_tokens_per_second, 200 / (199 * 0.00407) * 1.05);
  EXPECT_GT(sim.output_tokens_per_second, 200 / (199 * 0.00407) * 0.8);
}

TEST(SimulatorTest, NodesSharingAHostsCoresSlowEachOther) {
  const CostModel cost = CostOf(Scaled(1));
  const Slo open{.ttft_seconds = 1e6, .tpot_seconds = 1e6, .attainment = 0.9};
  const Layout layout{.prefill_nodes = 2, .decode_nodes = 1};
  // Two 512-token prompts, the second `second_at` after the first (one to each prefill
  // node), and a third long after, alone. TTFT p90: the later of the first two.
  auto ttft = [&](double second_at, int host_cores) {
    Workload w;
    for (double t : {0.0, second_at, 100.0}) w.trace.push_back({.arrival_seconds = t, .prompt_tokens = 512, .output_tokens = 2});
    const SimOptions o{.num_requests = 3, .warmup_fraction = 0, .min_span_ttfts = 0, .max_requests = 3,
                       .host_cores = host_cores};
    const SimResult r = Simulate(layout, cost, w, open, w.TraceRate(), o);
    EXPECT_EQ(r.completed, 3);
    return std::pair{r.latency.ttft_p50, r.latency.ttft_p90};
  };
  const double transfer = cost.TransferSeconds(512);
  const double alone = ttft(0, 0).first;  // each on its own device: both take one prefill
  const double prefill = alone - transfer;
  ASSERT_GT(prefill, 0);
  EXPECT_DOUBLE_EQ(ttft(0, 0).second, alone);
  EXPECT_DOUBLE_EQ(ttft(0, 2).second, alone);  // two cores: no one waits
  // One core, both at once: each runs at half speed, both end after two prefills.
  EXPECT_NEAR(ttft(0, 1).first, 2 * prefill + transfer, 1e-9);
  EXPECT_NEAR(ttft(0, 1).second, 2 * prefill + transfer, 1e-9);
  // The second arrives halfway through the first: the first's remaining half and the
  // second's first half share the core (a prefill of time), then the second runs alone.
  // Both end 1.5 prefills after they arrived.
  const auto [p50, p90] = ttft(prefill / 2, 1);
  EXPECT_NEAR(p50, 1.5 * prefill + transfer, 1e-9);
  EXPECT_NEAR(p90, 1.5 * prefill + transfer, 1e-9);
}

// The serving path's CPU (idle per node, and per request at the trace's rate) takes
// cores from the steps: two cores less 0.75 idle and 0.25 per-request leave one.
// The serving path's CPU shares the host with the steps where it happens: a request's at
// its arrival, a token's on its way to the client (which sees the token when it is done).
TEST(SimulatorTest, TheServingPathsCpuSharesTheHostWithTheSteps) {
  const CostModel cost = CostOf(Scaled(1));
  const Slo open{.ttft_seconds = 1e6, .tpot_seconds = 1e6, .attainment = 0.9};
  const Layout layout{.prefill_nodes = 1, .decode_nodes = 1};
  auto run = [&](int output, int cores, double idle_per_node, double per_request, double per_token) {
    Workload w;
    for (double t : {0.0, 100.0}) w.trace.push_back({.arrival_seconds = t, .prompt_tokens = 512, .output_tokens = output});
    const SimOptions o{.num_requests = 2, .warmup_fraction = 0, .min_span_ttfts = 0, .max_requests = 2,
                       .host_cores = cores, .host_idle_cores_per_node = idle_per_node,
                       .host_cpu_seconds_per_request = per_request, .host_cpu_seconds_per_output_token = per_token};
    const SimResult r = Simulate(layout, cost, w, open, w.TraceRate(), o);
    EXPECT_EQ(r.completed, 2);
    return r;
  };
  const double transfer = cost.TransferSeconds(512);
  const double alone = run(1, 1, 0, 0, 0).latency.ttft_p50;
  const double prefill = alone - transfer;
  const double c = prefill / 4;
  ASSERT_GT(prefill, 0);
  // One core: the arrival's CPU and the prefill share it (half each) until the arrival's is done.
  EXPECT_NEAR(run(1, 1, 0, c, 0).latency.ttft_p50, prefill + c + transfer, 1e-9);
  // Two cores: no one waits.
  EXPECT_NEAR(run(1, 2, 0, c, 0).latency.ttft_p50, alone, 1e-9);
  // The first token reaches the client after its share of the path.
  EXPECT_NEAR(run(1, 1, 0, 0, c).latency.ttft_p50, alone + c, 1e-9);
  // The nodes' idle CPU is taken from the host evenly: 2 − 2 × 0.25 = 1.5 cores, 0.75 each
  // while the arrival's CPU runs beside the prefill.
  EXPECT_NEAR(run(1, 2, 0.25, c, 0).latency.ttft_p50, prefill + c / 3 + transfer, 1e-9);
  // The host is never taken whole: a tenth of it stays with the jobs.
  EXPECT_NEAR(run(1, 2, 1.0, 0, 0).latency.ttft_p50, prefill / 0.2 + transfer, 1e-9);
  // One core is never idle from the KV's landing to the last token: the decode steps and every
  // token's path add up (a token's path runs beside the next step).
  const double e2e = run(10, 1, 0, 0, 0).e2e_p50;
  EXPECT_NEAR(run(10, 1, 0, 0, c).e2e_p50, e2e + 10 * c, 1e-9);
  // Without a host the path costs nothing.
  EXPECT_NEAR(run(10, 0, 0, c, c).e2e_p50, e2e, 1e-9);
}

// The decode node's own part of a token's path holds its engine: the next step starts when
// that part is done (the rest runs beside it). Cores to spare, so no one shares one.
TEST(SimulatorTest, TheDecodeEngineWaitsForItsNodesPartOfTheOutput) {
  const CostModel cost = CostOf(Scaled(1));
  const Slo open{.ttft_seconds = 1e6, .tpot_seconds = 1e6, .attainment = 0.9};
  const Layout layout{.prefill_nodes = 1, .decode_nodes = 1};
  auto e2e = [&](double per_token, double node_part) {
    Workload w;
    for (double t : {0.0, 100.0}) w.trace.push_back({.arrival_seconds = t, .prompt_tokens = 512, .output_tokens = 10});
    SimOptions o{.num_requests = 2, .warmup_fraction = 0, .min_span_ttfts = 0, .max_requests = 2, .host_cores = 64,
                 .host_cpu_seconds_per_output_token = per_token};
    o.host_node_cpu_seconds_per_output_token = node_part;
    const SimResult r = Simulate(layout, cost, w, open, w.TraceRate(), o);
    EXPECT_EQ(r.completed, 2);
    return r.e2e_p50;
  };
  const double c = 1e-3, alone = e2e(0, 0);
  EXPECT_NEAR(e2e(c, 0), alone + c, 1e-9);  // only the last token's path is on the way
  // The first token (it came with the KV) and each of the nine decode steps' tokens: the node's
  // part before the engine steps again; the last token's whole path before the client has it.
  EXPECT_NEAR(e2e(c, c), alone + 10 * c, 1e-9);
  EXPECT_NEAR(e2e(c, c / 2), alone + 9 * c / 2 + c, 1e-9);
  // The node's part is at most the whole path's.
  EXPECT_NEAR(e2e(c, 2 * c), alone + 10 * c, 1e-9);
}

// The decode node's part of a request's CPU moves from the arrival to the KV's landing, and
// holds the node's first step after it: with cores to spare the request's E2E grows by it,
// and a request already decoding there pauses while it runs. Colocated, nothing lands.
TEST(SimulatorTest, TheDecodeEngineWaitsForItsNodesPartOfTheRequest) {
  const CostModel cost = CostOf(Scaled(1));
  const Slo open{.ttft_seconds = 1e6, .tpot_seconds = 1e6, .attainment = 0.9};
  auto run = [&](const Layout& layout, const std::vector<double>& arrivals, double node_part) {
    Workload w;
    for (double t : arrivals) w.trace.push_back({.arrival_seconds = t, .prompt_tokens = 512, .output_tokens = 200});
    SimOptions o{.num_requests = static_cast<int>(arrivals.size()), .warmup_fraction = 0, .min_span_ttfts = 0,
                 .max_requests = static_cast<int>(arrivals.size()), .host_cores = 64,
                 .host_cpu_seconds_per_request = 0.01, .record_requests = true};
    o.host_node_cpu_seconds_per_request = node_part;
    return Simulate(layout, cost, w, open, w.TraceRate(), o);
  };
  const Layout disaggregated{.prefill_nodes = 1, .decode_nodes = 1};
  const double c = 2e-3;
  const SimResult base = run(disaggregated, {0.0, 100.0}, 0), held = run(disaggregated, {0.0, 100.0}, c);
  // The arrival's job (10 ms, beside the prefill on cores to spare) delays nothing; the node's
  // part, before the first token (which came with the KV) goes out and the first step, does.
  EXPECT_NEAR(held.latency.ttft_p50, base.latency.ttft_p50 + c, 1e-9);
  EXPECT_NEAR(held.e2e_p50, base.e2e_p50 + c, 1e-9);
  // A second request landing while the first decodes: the first's next step waits for the
  // part too (less what of it ran beside the step in progress; the later steps' boundaries
  // move with it, so not exactly c).
  const SimResult busy = run(disaggregated, {0.0, 0.05}, 0), busy_held = run(disaggregated, {0.0, 0.05}, c);
  const auto e2e = [](const SimResult& r, int i) { return r.requests[i].done - r.requests[i].arrival; };
  ASSERT_LT(busy.requests[1].first, busy.requests[0].done);  // it did land while the first decoded
  EXPECT_GT(e2e(busy_held, 0), e2e(busy, 0) + c / 4);
  EXPECT_LT(e2e(busy_held, 0), e2e(busy, 0) + 2 * c);
  // Colocated: no KV lands, the whole request's CPU stays at the arrival.
  const Layout colocated{.colocated_nodes = 1};
  EXPECT_NEAR(run(colocated, {0.0, 100.0}, c).e2e_p50, run(colocated, {0.0, 100.0}, 0).e2e_p50, 1e-9);
}

// EngineWork::wait_seconds: time an engine had a step to run and did not run it, sharing a
// core (its step's time beyond its work) or held by its node's part of the serving path.
TEST(SimulatorTest, TheEnginesWaitIsTimeTheyCouldHaveRun) {
  const CostModel cost = CostOf(Scaled(1));
  const Slo open{.ttft_seconds = 1e6, .tpot_seconds = 1e6, .attainment = 0.9};
  auto run = [&](const Layout& layout, const std::vector<double>& arrivals, int cores, double per_token,
                 double node_part) {
    Workload w;
    for (double t : arrivals) w.trace.push_back({.arrival_seconds = t, .prompt_tokens = 512, .output_tokens = 10});
    const int n = static_cast<int>(arrivals.size());
    SimOptions o{.num_requests = n, .warmup_fraction = 0, .min_span_ttfts = 0, .max_requests = n, .host_cores = cores,
                 .host_cpu_seconds_per_output_token = per_token};
    o.host_node_cpu_seconds_per_output_token = node_part;
    const SimResult r = Simulate(layout, cost, w, open, w.TraceRate(), o);
    EXPECT_EQ(r.completed, n);
    return r;
  };
  const Layout two_prefills{.prefill_nodes = 2, .decode_nodes = 1};
  // A core each: no one waits.
  const SimResult apart = run(two_prefills, {0.0, 0.0, 100.0}, 0, 0, 0);
  EXPECT_NEAR(apart.prefill_work.wait_seconds, 0, 1e-12);
  EXPECT_NEAR(apart.decode_work.wait_seconds, 0, 1e-12);
  // One core, the first two prompts at once on the two prefill nodes: each step takes twice
  // its work, so each waits one prefill (the third, alone, none).
  const double prefill = apart.prefill_work.seconds / 3;
  EXPECT_NEAR(run(two_prefills, {0.0, 0.0, 100.0}, 1, 0, 0).prefill_work.wait_seconds, 2 * prefill, 1e-9);
  // Cores to spare, the decode node's part of each token's path (c) before its next step:
  // a request's first token (it came with the KV) and each of its decode steps' but the last
  // hold its next step: nine holds before nine steps, for each of two requests apart.
  const double c = 1e-3;
  const Layout one_each{.prefill_nodes = 1, .decode_nodes = 1};
  const SimResult held = run(one_each, {0.0, 100.0}, 64, c, c);
  EXPECT_EQ(held.decode_work.steps, 18);
  EXPECT_NEAR(held.decode_work.wait_seconds, 18 * c, 1e-9);
  EXPECT_NEAR(held.prefill_work.wait_seconds, 0, 1e-12);
  EXPECT_NEAR(run(one_each, {0.0, 100.0}, 64, c, 0).decode_work.wait_seconds, 0, 1e-12);
}

// engine_speed scales every step (not the transfer); the work reported is at speed 1.
TEST(SimulatorTest, EngineSpeedScalesTheStepsAndTheWorkIsAsProfiled) {
  const CostModel cost = CostOf(Scaled(1));
  const Slo open{.ttft_seconds = 1e6, .tpot_seconds = 1e6, .attainment = 0.9};
  const Layout layout{.prefill_nodes = 1, .decode_nodes = 1};
  Workload w;
  for (double t : {0.0, 100.0}) w.trace.push_back({.arrival_seconds = t, .prompt_tokens = 512, .output_tokens = 1});
  auto run = [&](double speed) {
    const SimOptions o{.num_requests = 2, .warmup_fraction = 0, .min_span_ttfts = 0, .max_requests = 2,
                       .engine_speed = speed};
    return Simulate(layout, cost, w, open, w.TraceRate(), o);
  };
  const double transfer = cost.TransferSeconds(512);
  const SimResult full = run(1), half = run(0.5);
  EXPECT_NEAR(half.latency.ttft_p50 - transfer, 2 * (full.latency.ttft_p50 - transfer), 1e-9);
  EXPECT_NEAR(full.prefill_work.seconds, 2 * cost.PrefillSeconds(512), 1e-9);  // one prefill step each
  EXPECT_EQ(full.prefill_work.steps, 2);
  EXPECT_EQ(full.decode_work.steps, 0);  // one output token: the prefill's
  EXPECT_DOUBLE_EQ(half.prefill_work.seconds, full.prefill_work.seconds);
  EXPECT_DOUBLE_EQ(full.prefill_work.cpu_seconds, full.prefill_work.seconds);  // the CPU the steps took
  EXPECT_NEAR(half.prefill_work.cpu_seconds, 2 * full.prefill_work.seconds, 1e-9);
  // A per-step overhead adds to every step, and not to the work.
  SimOptions o{.num_requests = 2, .warmup_fraction = 0, .min_span_ttfts = 0, .max_requests = 2,
               .step_overhead_seconds = 0.003};
  const SimResult slower = Simulate(layout, cost, w, open, w.TraceRate(), o);
  EXPECT_NEAR(slower.latency.ttft_p50, full.latency.ttft_p50 + 0.003, 1e-9);
  EXPECT_DOUBLE_EQ(slower.prefill_work.seconds, full.prefill_work.seconds);
  EXPECT_NEAR(slower.prefill_work.cpu_seconds, full.prefill_work.seconds + 2 * 0.003, 1e-9);
}

TEST(PlanTest, RecommendsTheSmallestLayoutThatServesTheRate) {
  const CostModel cost = CostOf(Scaled(1));
  const Slo slo{.ttft_seconds = 0.5, .tpot_seconds = 0.02, .attainment = 0.9};
  StatusOr<Plan> plan = MakePlan(cost, Lognormal(20), slo, {.max_gpus = 8, .sim = {.num_requests = 400}}, 32768);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->candidates.size(), 28u + 8u);
  ASSERT_GE(plan->recommended, 0);
  const CandidateResult& best = plan->candidates[static_cast<size_t>(plan->recommended)];
  EXPECT_TRUE(best.simulated);
  EXPECT_GE(best.des.goodput, 20);
  for (const CandidateResult& c : plan->candidates) {
    if (c.simulated && c.des.goodput >= 20 && c.at_rate.attainment >= 0.9) {
      EXPECT_GE(c.screen.layout.Gpus(), best.screen.layout.Gpus()) << c.screen.layout.Name();
    }
  }
}

TEST(PlanTest, BadInputGetsAClearError) {
  const CostModel cost = CostOf(Scaled(1));
  const Slo slo{.ttft_seconds = 0.5, .tpot_seconds = 0.02, .attainment = 0.9};
  const PlanOptions options{.max_gpus = 4, .sim = {.num_requests = 200}};
  // Impossible SLOs: a TTFT under any prompt's prefill, a TPOT under the decode step.
  StatusOr<Plan> plan = MakePlan(cost, Lognormal(1), {.ttft_seconds = 1e-4, .tpot_seconds = 0.02}, options, 32768);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(plan.status().message().find("no layout meets the SLO at any rate"), std::string::npos);
  EXPECT_FALSE(MakePlan(cost, Lognormal(1), {.ttft_seconds = 1, .tpot_seconds = 1e-3}, options, 32768).ok());
  // Requests longer than a node's KV pool or the model's context.
  Workload huge = Lognormal(1);
  huge.prompt = {.kind = LengthKind::kFixed, .mean = 200000};
  plan = MakePlan(cost, huge, slo, options, 1 << 20);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("KV pool"), std::string::npos) << plan.status().ToString();
  EXPECT_FALSE(MakePlan(cost, Lognormal(1), slo, options, 1000).ok());  // max_model_len
  // A bad workload, SLO or budget.
  EXPECT_FALSE(MakePlan(cost, Lognormal(0), slo, options, 32768).ok());
  EXPECT_FALSE(MakePlan(cost, Lognormal(1), {.attainment = 0}, options, 32768).ok());
  EXPECT_FALSE(MakePlan(cost, Lognormal(1), slo, {.max_gpus = 0}, 32768).ok());
  // A rate no layout within the budget serves: a plan without a recommendation.
  plan = MakePlan(cost, Lognormal(10000), slo, options, 32768);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->recommended, -1);
}

}  // namespace
}  // namespace tandem::planner
