// The planner's second stage: an iteration-level discrete-event simulation of
// one layout. Requests arrive as a Poisson process of the given rate (or as the
// trace's timestamps, scaled to it) with lengths drawn from the workload by a
// seeded SimRandom: the same inputs give the same result, bit for bit. The
// router mirrors router/cluster/placement.cc: a request's decode node is the one
// with the most (free blocks) / (1 + load) among those with room for its
// reservation (the real router places, is refused, and waits in its room queue;
// here the refusal is foreseen), lower id on ties; a request no decode node has
// room for waits at the router, in order; its prefill node is the one with the fewest queued prompt
// tokens. Each node is a SimEngine (the scheduler's policy); a prefill node's
// finished prompt holds its blocks while its KV moves, one transfer at a time per
// prefill node; the first token reaches the client when the KV has landed, then
// the decode node's continuous batch produces the rest. Colocated nodes take the
// request whole (placement as for decode). Nodes that share a host's cores slow
// each other, and the serving path's own CPU takes its share of them where it
// happens: at a request's arrival, and for every token on its way to the client,
// who sees the token when that is done; the decode node's own parts of it (when a KV
// lands, a step's output) hold that node's next step (SimOptions::host_cores, host_*).
// Thread rule: free functions.
#pragma once

#include <cstdint>
#include <vector>

#include "planner/cost_model.h"
#include "planner/layout.h"
#include "planner/workload.h"

namespace tandem::planner {

struct SimOptions {
  uint64_t seed = 1;
  // Requests per simulation; the first warmup_fraction of them are not measured
  // (the system starts empty).
  int num_requests = 1000;
  double warmup_fraction = 0.1;
  // At least this many TTFT bounds of arrivals are simulated (more requests at high
  // rates): a finite burst is absorbed by any layout, an overload shows only once
  // its backlog outgrows the bound. Up to max_requests.
  double min_span_ttfts = 30;
  int max_requests = 200000;
  // > 0: every node of the layout computes on one host of this many cores (a CPU
  // cluster on one machine), which the jobs running on it share — the nodes' steps and
  // the serving path's pieces below: while k run at once each proceeds at
  // min(1, cores / k) of its own speed (processor sharing; one core per engine, as the
  // CPU backend computes on one thread). 0: each node is its own device (GPUs), and
  // the serving path costs nothing.
  int host_cores = 0;
  // With host_cores: the host's CPU outside the engines' steps — the serving path
  // (router, RPCs, KV transfer, poll threads; in a validation, the load generator too).
  // host_idle_cores_per_node × nodes is taken from the host always (cores = host_cores
  // less that, never less than a tenth of the host); host_cpu_seconds_per_request is a
  // job at each request's arrival; host_cpu_seconds_per_output_token × the tokens a
  // decode step sampled is a job beside the node's next step, the tokens reaching the
  // client (TTFT, the last one E2E) when it is done. Measured from the processes' CPU
  // counters (process_cpu_seconds_total less tandem_engine_cpu_seconds_total) over runs
  // of two output lengths (tandem-validate).
  double host_idle_cores_per_node = 0;
  double host_cpu_seconds_per_request = 0;
  double host_cpu_seconds_per_output_token = 0;
  // Of host_cpu_seconds_per_output_token, the decode node's own part (its output handed to
  // the router), which the node's next step waits for: the threads a step's output wakes
  // run on the engine's core before it does again. (A 1P1D run at 14 req/s on a host of
  // two cores showed the decode engine thread waiting for a core 0.11 ms a step —
  // /proc/<tid>/schedstat — while its node's other threads ran 0.10 ms a step.)
  double host_node_cpu_seconds_per_output_token = 0;
  // Of host_cpu_seconds_per_request, the decode node's own part (the reservation, the KV's
  // landing), which a disaggregated request's decode node does when its KV has landed and
  // its engine waits for, as for the tokens above; the rest is the job at the arrival.
  double host_node_cpu_seconds_per_request = 0;
  // The engines' speed against their profile: every step takes its profiled time / this
  // (1: as profiled). A what-if for slower or faster hosts; tandem-validate sets it to
  // what a run's engine threads measured (SimResult's work against their CPU time).
  double engine_speed = 1;
  // Engine time every step costs beyond its profiled time, seconds at speed 1: on a node,
  // handing the step's outputs on (tandem-validate measures it; the profile times the
  // step alone).
  double step_overhead_seconds = 0;
  // Fill SimResult::requests (every request's times; a validation compares them one by one).
  bool record_requests = false;
};

// Engine steps simulated and their profiled times summed (speed 1, no overhead).
struct EngineWork {
  double seconds = 0;
  int64_t steps = 0;
  // The steps' CPU time as simulated: (profiled time + step_overhead_seconds) / engine_speed.
  double cpu_seconds = 0;
  // How long the engines had a step to run but did not run it: a step's time beyond its
  // work at engine_speed while it shared the host's cores, and a decode engine's wait for
  // its node's part of the serving path before its next step (as a thread's run-queue
  // wait, tandem_engine_runqueue_wait_seconds_total). 0 without a host.
  double wait_seconds = 0;
};

// One simulated request's times, seconds from the first arrival; first / done < 0: never.
struct SimRequestTimes {
  double arrival = 0;
  double first = -1;
  double done = -1;
};

struct SimResult {
  double rate = 0;          // req/s simulated
  int measured = 0;         // requests measured
  int completed = 0;        // of them, finished before the simulation ended
  double attainment = 0;    // fraction of the measured meeting the SLO
  LatencySummary latency;   // over the measured (unfinished ones as +inf)
  double e2e_p50 = 0;
  double e2e_p90 = 0;
  double e2e_mean = 0;      // over the completed
  double output_tokens_per_second = 0;  // of the measured, from the first's arrival to the last finish
  int64_t steps = 0;        // engine steps simulated, all nodes
  EngineWork prefill_work;  // of the prefill nodes
  EngineWork decode_work;   // of the decode and colocated nodes
  std::vector<SimRequestTimes> requests;  // with SimOptions::record_requests, in arrival order
};

SimResult Simulate(const Layout& layout, const CostModel& cost, const Workload& workload, const Slo& slo, double rate,
                   const SimOptions& options);

struct GoodputResult {
  double goodput = 0;     // the highest rate (req/s) found with attainment ≥ slo.attainment; 0: none
  SimResult at_goodput;   // the simulation at that rate
  int simulations = 0;
};

// Binary search on the rate (the same seed at every rate: common random numbers)
// for the highest rate whose attainment meets slo.attainment, to within
// `relative_precision`. `hint` (> 0) is where to start, e.g. the screen's rate.
GoodputResult FindMaxGoodput(const Layout& layout, const CostModel& cost, const Workload& workload, const Slo& slo,
                             double hint, const SimOptions& options, double relative_precision = 0.02);

}  // namespace tandem::planner
