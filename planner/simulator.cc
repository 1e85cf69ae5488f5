#include "planner/simulator.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <queue>
#include <utility>
#include <vector>

#include "planner/sim_engine.h"

namespace tandem::planner {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int64_t kMaxSteps = 50'000'000;  // a runaway simulation stops here (its unfinished requests miss)

struct Req {
  double arrival = 0;
  int prompt = 0;
  int uncached = 0;
  int output = 0;
  int decode = -1;
  int prefill = -1;
  double first = -1;
  double done = -1;
};

enum class EventType { kArrival, kStepEnd, kTransferEnd, kPathEnd };

struct Event {
  double time;
  uint64_t order;  // ties in time: first pushed first
  EventType type;
  int node;     // kPathEnd: the path job
  int request;
  int generation;  // kStepEnd, kPathEnd: the job's (a rescheduled job's earlier end is stale)
};

// A job sharing the host's cores, a node's step or a piece of the serving path: the work
// left (seconds at full speed) as of `since`.
struct RunningJob {
  bool running = false;
  double work_left = 0;
  double since = 0;
  int generation = 0;
};

// The serving path's CPU for some tokens on their way to the client (the decode node's
// output, the router's stream, the client), or for a request's arrival; the tokens reach
// the client when it ends.
struct PathJob {
  RunningJob job;
  std::vector<int> firsts;  // requests whose first token this carries
  std::vector<int> dones;   // requests whose last token this carries
  // The decode node's own part of the work, which its engine's next step waits for
  // (SimOptions::host_node_cpu_seconds_per_*): the engine, and the rest of the work, to do
  // after this before the tokens reach the client.
  int engine = -1;
  double rest_seconds = 0;
};

struct Later {
  bool operator()(const Event& a, const Event& b) const { return a.time != b.time ? a.time > b.time : a.order > b.order; }
};

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(std::ceil(p * static_cast<double>(v.size())));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

class Simulation {
 public:
  Simulation(const Layout& layout, const CostModel& cost, const Workload& workload, const Slo& slo, double rate,
             const SimOptions& options)
      : layout_(layout), cost_(cost), workload_(workload), slo_(slo), rate_(rate), options_(options) {}

  SimResult Run();

 private:
  void MakeRequests();
  void MakeNodes();
  void Push(double time, EventType type, int node, int request, int generation = 0) {
    events_.push({time, next_order_++, type, node, request, generation});
  }
  bool Place(int r);
  void PlacePending();
  void Kick(int node);
  // Processor sharing of a host's cores among the running jobs (steps and the serving
  // path's): the share of a core each gets, and moving every running job's end after the
  // number running changed. A step's work is in profiled seconds (run at engine_speed),
  // the path's in CPU seconds.
  double Share() const { return running_jobs_ > host_cores_ ? host_cores_ / running_jobs_ : 1.0; }
  double StepSpeed() const { return options_.engine_speed * Share(); }
  void StartJob(int index, bool step, double work);
  void EndJob(RunningJob* job);
  void ChargeRunningJobs();
  // False when no share changed (the ends pushed stand).
  bool RescheduleRunningJobs(int before);
  void PushJobEnd(int index, const RunningJob& job, bool step);
  // Tokens (and a request's arrival) through the serving path: `firsts` and `dones`
  // reach the client after `cpu_seconds` of the host's CPU (at once without a host).
  // `engine` >= 0: a decode engine whose node does `node_seconds` of the work first (its
  // own part: a step's output, a landed KV); the engine's next step waits for that part.
  void Deliver(double cpu_seconds, std::vector<int> firsts, std::vector<int> dones, int engine = -1,
               double node_seconds = 0);
  void ReachClient(const std::vector<int>& firsts, const std::vector<int>& dones);
  void OnPathEnd(int job);
  void StartTransfer(int prefill);
  void OnStepEnd(int node);
  void OnTransferEnd(int prefill, int r);
  // The decode node's part of a request's serving-path CPU, done when its KV has landed
  // (SimOptions::host_node_cpu_seconds_per_request; none colocated: no KV lands).
  double DecodeNodesPartOfRequest() const {
    return layout_.colocated()
               ? 0
               : std::min(options_.host_node_cpu_seconds_per_request, options_.host_cpu_seconds_per_request);
  }
  SimResult Measure() const;
  // Decode-capable engines: [first_decode_, engines_.size()).
  int first_decode_ = 0;

  const Layout& layout_;
  const CostModel& cost_;
  const Workload& workload_;
  const Slo& slo_;
  double rate_;
  SimOptions options_;
  std::vector<Req> reqs_;
  std::vector<SimEngine> engines_;
  std::vector<RunningJob> steps_in_progress_;  // per engine
  std::vector<int> handing_on_;                // per engine: its node's parts of the serving path it waits for
  // Per engine: when its step began and its work (seconds at full speed); since when it
  // has waited for its node's handing on (< 0: not waiting). For EngineWork::wait_seconds.
  std::vector<double> step_began_, step_cpu_, handing_on_since_;
  std::vector<PathJob> path_jobs_;
  std::vector<int> free_path_jobs_;
  int running_jobs_ = 0;
  // The cores the jobs share (SimOptions::host_*); unbounded without a host.
  double host_cores_ = std::numeric_limits<double>::infinity();
  std::vector<std::deque<int>> transfers_;  // per prefill node
  std::vector<bool> transferring_;
  std::deque<int> pending_;  // requests no decode node had room for, in order
  std::priority_queue<Event, std::vector<Event>, Later> events_;
  uint64_t next_order_ = 0;
  double now_ = 0;
  int64_t steps_ = 0;
  EngineWork prefill_work_, decode_work_;
};

void Simulation::MakeRequests() {
  SimRandom rng(options_.seed);
  const int block_size = cost_.decode_limits().block_size;
  const double for_span = std::ceil(rate_ * options_.min_span_ttfts * slo_.ttft_seconds);
  const int count = static_cast<int>(std::min<double>(std::max<double>(options_.num_requests, for_span),
                                                      std::max(options_.max_requests, options_.num_requests)));
  if (!workload_.trace.empty()) {
    const size_t n = std::min(workload_.trace.size(), static_cast<size_t>(count));
    const double scale = workload_.TraceRate() / rate_;
    const double t0 = workload_.trace.front().arrival_seconds;
    for (size_t i = 0; i < n; ++i) {
      const TraceRequest& t = workload_.trace[i];
      reqs_.push_back({.arrival = (t.arrival_seconds - t0) * scale, .prompt = t.prompt_tokens,
                       .uncached = UncachedPromptTokens(t.prompt_tokens, workload_.prefix_hit_rate, block_size),
                       .output = t.output_tokens});
    }
    return;
  }
  double t = 0;
  for (int i = 0; i < count; ++i) {
    t += rng.Exponential() / rate_;
    Req r;
    r.arrival = t;
    r.prompt = workload_.prompt.Sample(rng);
    r.output = workload_.output.Sample(rng);
    r.uncached = UncachedPromptTokens(r.prompt, workload_.prefix_hit_rate, block_size);
    reqs_.push_back(r);
  }
}

void Simulation::MakeNodes() {
  if (layout_.colocated()) {
    for (int i = 0; i < layout_.colocated_nodes; ++i) {
      engines_.emplace_back(SimRole::kColocated, cost_.decode_limits(), cost_);
    }
    return;
  }
  for (int i = 0; i < layout_.prefill_nodes; ++i) engines_.emplace_back(SimRole::kPrefill, cost_.prefill_limits(), cost_);
  first_decode_ = layout_.prefill_nodes;
  for (int i = 0; i < layout_.decode_nodes; ++i) engines_.emplace_back(SimRole::kDecode, cost_.decode_limits(), cost_);
  transfers_.resize(static_cast<size_t>(layout_.prefill_nodes));
  transferring_.resize(static_cast<size_t>(layout_.prefill_nodes), false);
}

// placement.cc's PickDecode score, best first (ties: lower id), then PickPrefill.
bool Simulation::Place(int r) {
  Req& req = reqs_[static_cast<size_t>(r)];
  std::vector<std::pair<double, int>> order;
  for (int n = first_decode_; n < static_cast<int>(engines_.size()); ++n) {
    const SimEngine& e = engines_[static_cast<size_t>(n)];
    order.push_back({-static_cast<double>(std::max<int64_t>(e.free_blocks(), 0)) / (1 + e.load()), n});
  }
  std::sort(order.begin(), order.end());
  if (layout_.colocated()) {
    const int node = order.front().second;
    engines_[static_cast<size_t>(node)].Submit(r, req.prompt, req.prompt - req.uncached, req.output);
    req.decode = node;
    Kick(node);
    return true;
  }
  for (const auto& [score, node] : order) {
    if (!engines_[static_cast<size_t>(node)].Reserve(r, req.prompt, req.output)) continue;
    req.decode = node;
    int best = 0;
    for (int p = 1; p < layout_.prefill_nodes; ++p) {
      if (engines_[static_cast<size_t>(p)].queued_prompt_tokens() <
          engines_[static_cast<size_t>(best)].queued_prompt_tokens()) {
        best = p;
      }
    }
    req.prefill = best;
    engines_[static_cast<size_t>(best)].Submit(r, req.prompt, req.prompt - req.uncached, 1);
    Kick(best);
    return true;
  }
  return false;
}

void Simulation::PlacePending() {
  while (!pending_.empty() && Place(pending_.front())) pending_.pop_front();
}

void Simulation::Kick(int node) {
  SimEngine& e = engines_[static_cast<size_t>(node)];
  if (e.busy() || handing_on_[static_cast<size_t>(node)]) return;
  if (std::optional<double> seconds = e.BeginStep()) {
    ++steps_;
    EngineWork& work = node < first_decode_ ? prefill_work_ : decode_work_;
    work.seconds += *seconds;
    ++work.steps;
    const size_t n = static_cast<size_t>(node);
    if (handing_on_since_[n] >= 0) work.wait_seconds += now_ - std::exchange(handing_on_since_[n], -1.0);
    step_began_[n] = now_;
    step_cpu_[n] = (*seconds + options_.step_overhead_seconds) / options_.engine_speed;
    work.cpu_seconds += step_cpu_[n];
    StartJob(node, /*step=*/true, *seconds + options_.step_overhead_seconds);
  }
}

// A job starting or ending may change every running job's share: charge them up to now,
// then (after the change) reschedule them all.
void Simulation::StartJob(int index, bool step, double work) {
  ChargeRunningJobs();
  RunningJob& job = step ? steps_in_progress_[static_cast<size_t>(index)] : path_jobs_[static_cast<size_t>(index)].job;
  job = {.running = true, .work_left = work, .since = now_, .generation = job.generation + 1};
  ++running_jobs_;
  if (!RescheduleRunningJobs(running_jobs_ - 1)) PushJobEnd(index, job, step);
}

void Simulation::EndJob(RunningJob* job) {
  ChargeRunningJobs();
  job->running = false;
  --running_jobs_;
  RescheduleRunningJobs(running_jobs_ + 1);
}

void Simulation::ChargeRunningJobs() {
  const double share = Share();
  auto charge = [&](RunningJob& job, double speed) {
    if (!job.running) return;
    job.work_left = std::max(0.0, job.work_left - (now_ - job.since) * speed);
    job.since = now_;
  };
  for (RunningJob& step : steps_in_progress_) charge(step, options_.engine_speed * share);
  for (PathJob& path : path_jobs_) charge(path.job, share);
}

void Simulation::PushJobEnd(int index, const RunningJob& job, bool step) {
  const double speed = step ? StepSpeed() : Share();
  Push(now_ + job.work_left / speed, step ? EventType::kStepEnd : EventType::kPathEnd, index, -1, job.generation);
}

bool Simulation::RescheduleRunningJobs(int before) {
  // No more jobs than cores before and after (or no host): every share was and is 1.
  if (std::max(before, running_jobs_) <= host_cores_) return false;
  for (size_t n = 0; n < steps_in_progress_.size(); ++n) {
    RunningJob& step = steps_in_progress_[n];
    if (!step.running) continue;
    ++step.generation;
    PushJobEnd(static_cast<int>(n), step, /*step=*/true);
  }
  for (size_t n = 0; n < path_jobs_.size(); ++n) {
    RunningJob& path = path_jobs_[n].job;
    if (!path.running) continue;
    ++path.generation;
    PushJobEnd(static_cast<int>(n), path, /*step=*/false);
  }
  return true;
}

void Simulation::Deliver(double cpu_seconds, std::vector<int> firsts, std::vector<int> dones, int engine,
                         double node_seconds) {
  if (options_.host_cores <= 0 || cpu_seconds <= 0) {
    ReachClient(firsts, dones);
    return;
  }
  double rest = 0;
  if (engine >= 0 && node_seconds > 0) {
    rest = std::max(0.0, cpu_seconds - node_seconds);
    cpu_seconds -= rest;
    if (handing_on_[static_cast<size_t>(engine)]++ == 0) handing_on_since_[static_cast<size_t>(engine)] = now_;
  } else {
    engine = -1;
  }
  int index;
  if (!free_path_jobs_.empty()) {
    index = free_path_jobs_.back();
    free_path_jobs_.pop_back();
  } else {
    index = static_cast<int>(path_jobs_.size());
    path_jobs_.emplace_back();
  }
  PathJob& path = path_jobs_[static_cast<size_t>(index)];
  path.firsts = std::move(firsts);
  path.dones = std::move(dones);
  path.engine = engine;
  path.rest_seconds = rest;
  StartJob(index, /*step=*/false, cpu_seconds);
}

void Simulation::ReachClient(const std::vector<int>& firsts, const std::vector<int>& dones) {
  for (int r : firsts) reqs_[static_cast<size_t>(r)].first = now_;
  for (int r : dones) reqs_[static_cast<size_t>(r)].done = now_;
}

void Simulation::OnPathEnd(int index) {
  PathJob& path = path_jobs_[static_cast<size_t>(index)];
  EndJob(&path.job);
  std::vector<int> firsts = std::move(path.firsts), dones = std::move(path.dones);
  const int engine = std::exchange(path.engine, -1);
  const double rest = path.rest_seconds;
  free_path_jobs_.push_back(index);  // `path` may move below
  if (engine >= 0) {
    --handing_on_[static_cast<size_t>(engine)];
    Kick(engine);
    if (handing_on_[static_cast<size_t>(engine)] == 0) handing_on_since_[static_cast<size_t>(engine)] = -1;
    Deliver(rest, std::move(firsts), std::move(dones));
  } else {
    ReachClient(firsts, dones);
  }
}

void Simulation::StartTransfer(int prefill) {
  std::deque<int>& queue = transfers_[static_cast<size_t>(prefill)];
  if (transferring_[static_cast<size_t>(prefill)] || queue.empty()) return;
  const int r = queue.front();
  queue.pop_front();
  transferring_[static_cast<size_t>(prefill)] = true;
  Push(now_ + cost_.TransferSeconds(reqs_[static_cast<size_t>(r)].uncached), EventType::kTransferEnd, prefill, r);
}

void Simulation::OnStepEnd(int node) {
  EndJob(&steps_in_progress_[static_cast<size_t>(node)]);
  const size_t n = static_cast<size_t>(node);
  (node < first_decode_ ? prefill_work_ : decode_work_).wait_seconds += std::max(0.0, now_ - step_began_[n] - step_cpu_[n]);
  if (handing_on_since_[n] >= 0) handing_on_since_[n] = now_;  // waiting from here, not while it computed
  StepOutcome out = engines_[static_cast<size_t>(node)].EndStep();
  const bool prefill_node = node < first_decode_;
  if (prefill_node) {
    for (int r : out.first_tokens) {
      transfers_[static_cast<size_t>(node)].push_back(r);
      StartTransfer(node);
    }
  }
  if (!prefill_node && out.sampled > 0) {
    Deliver(options_.host_cpu_seconds_per_output_token * out.sampled, std::move(out.first_tokens),
            std::move(out.finished), node, options_.host_node_cpu_seconds_per_output_token * out.sampled);
  }
  Kick(node);
  if (!prefill_node && out.released) PlacePending();
}

void Simulation::OnTransferEnd(int prefill, int r) {
  transferring_[static_cast<size_t>(prefill)] = false;
  Req& req = reqs_[static_cast<size_t>(r)];
  engines_[static_cast<size_t>(prefill)].ReleaseHeld(r);
  Kick(prefill);
  const bool done = engines_[static_cast<size_t>(req.decode)].Activate(r);
  const double node_request = DecodeNodesPartOfRequest();
  Deliver(options_.host_cpu_seconds_per_output_token + node_request, {r}, done ? std::vector<int>{r} : std::vector<int>{},
          req.decode, node_request + options_.host_node_cpu_seconds_per_output_token);
  if (done) PlacePending();
  Kick(req.decode);
  StartTransfer(prefill);
}

SimResult Simulation::Run() {
  MakeRequests();
  MakeNodes();
  steps_in_progress_.resize(engines_.size());
  handing_on_.assign(engines_.size(), 0);
  step_began_.assign(engines_.size(), 0);
  step_cpu_.assign(engines_.size(), 0);
  handing_on_since_.assign(engines_.size(), -1);
  if (options_.host_cores > 0) {
    host_cores_ = std::max(0.1 * options_.host_cores,
                           options_.host_cores - options_.host_idle_cores_per_node * static_cast<double>(engines_.size()));
  }
  for (int r = 0; r < static_cast<int>(reqs_.size()); ++r) Push(reqs_[static_cast<size_t>(r)].arrival, EventType::kArrival, -1, r);
  // Past this time an unfinished request cannot meet the SLO any more.
  int max_output = 1;
  for (const Req& r : reqs_) max_output = std::max(max_output, r.output);
  const double end = reqs_.back().arrival + slo_.ttft_seconds + slo_.tpot_seconds * (max_output - 1) + 1e-9;
  while (!events_.empty() && steps_ < kMaxSteps) {
    const Event e = events_.top();
    if (e.time > end) break;
    events_.pop();
    now_ = e.time;
    switch (e.type) {
      case EventType::kArrival:
        Deliver(options_.host_cpu_seconds_per_request - DecodeNodesPartOfRequest(), {}, {});
        if (!pending_.empty() || !Place(e.request)) pending_.push_back(e.request);
        break;
      case EventType::kStepEnd:
        if (e.generation == steps_in_progress_[static_cast<size_t>(e.node)].generation) OnStepEnd(e.node);
        break;
      case EventType::kTransferEnd: OnTransferEnd(e.node, e.request); break;
      case EventType::kPathEnd:
        if (e.generation == path_jobs_[static_cast<size_t>(e.node)].job.generation) OnPathEnd(e.node);
        break;
    }
  }
  return Measure();
}

SimResult Simulation::Measure() const {
  SimResult out;
  out.rate = rate_;
  out.steps = steps_;
  out.prefill_work = prefill_work_;
  out.decode_work = decode_work_;
  if (options_.record_requests) {
    for (const Req& r : reqs_) out.requests.push_back({.arrival = r.arrival, .first = r.first, .done = r.done});
  }
  const size_t first = static_cast<size_t>(std::floor(options_.warmup_fraction * static_cast<double>(reqs_.size())));
  std::vector<double> ttft, tpot, e2e;
  double e2e_sum = 0;
  double last_done = 0;
  int64_t output_tokens = 0;
  int met = 0;
  for (size_t i = first; i < reqs_.size(); ++i) {
    const Req& r = reqs_[i];
    ++out.measured;
    const double t = r.first >= 0 ? r.first - r.arrival : kInf;
    double p = kInf;
    if (r.done >= 0) p = r.output > 1 ? (r.done - r.first) / (r.output - 1) : 0;
    ttft.push_back(t);
    tpot.push_back(p);
    e2e.push_back(r.done >= 0 ? r.done - r.arrival : kInf);
    if (r.done >= 0) {
      ++out.completed;
      e2e_sum += r.done - r.arrival;
      output_tokens += r.output;
      last_done = std::max(last_done, r.done);
    }
    if (t <= slo_.ttft_seconds && p <= slo_.tpot_seconds) ++met;
  }
  if (out.measured == 0) return out;
  out.attainment = static_cast<double>(met) / out.measured;
  out.latency = {.ttft_p50 = Percentile(ttft, 0.5),
                 .ttft_p90 = Percentile(ttft, 0.9),
                 .tpot_p50 = Percentile(tpot, 0.5),
                 .tpot_p90 = Percentile(tpot, 0.9)};
  out.e2e_p50 = Percentile(e2e, 0.5);
  out.e2e_p90 = Percentile(e2e, 0.9);
  out.e2e_mean = out.completed > 0 ? e2e_sum / out.completed : kInf;
  const double span = last_done - reqs_[first].arrival;
  out.output_tokens_per_second = span > 0 ? static_cast<double>(output_tokens) / span : 0;
  return out;
}

}  // namespace

SimResult Simulate(const Layout& layout, const CostModel& cost, const Workload& workload, const Slo& slo, double rate,
                   const SimOptions& options) {
  Simulation sim(layout, cost, workload, slo, rate, options);
  return sim.Run();
}

GoodputResult FindMaxGoodput(const Layout& layout, const CostModel& cost, const Workload& workload, const Slo& slo,
                             double hint, const SimOptions& options, double relative_precision) {
  GoodputResult out;
  SimResult last;
  auto meets = [&](double rate) {
    ++out.simulations;
    last = Simulate(layout, cost, workload, slo, rate, options);
    return last.attainment >= slo.attainment;
  };
  double lo = 0, hi = hint > 0 && std::isfinite(hint) ? hint : 1.0;
  SimResult at_lo;
  if (meets(hi)) {
    // Up until it fails.
    lo = hi;
    at_lo = last;
    for (int i = 0; i < 12; ++i) {
      hi = lo * 2;
      if (!meets(hi)) break;
      lo = hi;
      at_lo = last;
    }
    if (lo == hi) return {.goodput = lo, .at_goodput = at_lo, .simulations = out.simulations};
  } else {
    // Down until it holds (a light load that still misses: no goodput).
    for (int i = 0; i < 12 && lo == 0; ++i) {
      const double rate = hi / 2;
      if (meets(rate)) {
        lo = rate;
        at_lo = last;
      } else {
        hi = rate;
      }
    }
    if (lo == 0) return out;
  }
  while ((hi - lo) > relative_precision * lo && out.simulations < 40) {
    const double mid = (lo + hi) / 2;
    if (meets(mid)) {
      lo = mid;
      at_lo = last;
    } else {
      hi = mid;
    }
  }
  out.goodput = lo;
  out.at_goodput = at_lo;
  return out;
}

}  // namespace tandem::planner
