// The planner's first stage: a closed-form screen of one layout.
//
// Prefill (xPyD): each prefill node is an M/G/1 queue fed λ/x (the router spreads
// prompts by least queued tokens, so evenly on average); its service time is a
// prompt's PrefillSeconds, whose mean and second moment come from the length
// distribution; the Pollaczek–Khinchine formula gives the mean wait. The KV
// handoff is a second M/G/1 queue per prefill node (one sender), its service the
// path's TransferSeconds. TTFT = prefill wait + prefill + transfer wait + transfer;
// its quantiles take the prefill wait as 0 with probability 1 − ρ and exponential
// otherwise (exact for M/M/1, the usual heavy-traffic shape).
//
// Decode: each decode node is fed λ/y; Little's law gives the running batch
// B = (λ/y)·E[O − 1]·τ(B) with τ(B) = a + b·B + c·B·k̄ the DecodeFit step at the
// mean context k̄ (token-weighted), solved in closed form. TPOT = τ(B). Slots and
// KV hold the running batch plus the requests reserved while they prefill
// (λ/y · mean TTFT, each with its prompt's blocks).
//
// Colocated (N nodes, λ/N each): prompt chunks ride in the decode steps. The
// prefill work (token and attention cost, PrefillFit without its per-step term)
// takes a share f = (λ/N)·E[work] of the node's time, so steps stretch to
// τ(B)/(1 − f) = TPOT; a prompt takes ⌈U / chunk⌉ steps of that batch plus its
// work, the service time of an M/G/1 prefill queue as above; no transfer.
//
// Thread rule: free functions over values.
#pragma once

#include <vector>

#include "planner/cost_model.h"
#include "planner/layout.h"
#include "planner/workload.h"

namespace tandem::planner {

// Mean wait in an M/G/1 queue (Pollaczek–Khinchine): λ·E[S²] / (2(1 − ρ)), ρ = λ·E[S].
// +inf when ρ ≥ 1.
double MG1WaitSeconds(double arrival_rate, double mean_service, double second_moment_service);

// The p-quantile of W + X where W is 0 with probability 1 − rho and exponential of
// mean mean_wait / rho otherwise, and X takes each value of `samples` equally likely.
double WaitPlusServiceQuantile(double p, double rho, double mean_wait, const std::vector<double>& samples);

// The workload's lengths reduced to what the screen needs (quantile grids, means).
struct WorkloadStats {
  std::vector<int> prompt_grid;     // prompt tokens at quantile midpoints
  std::vector<int> uncached_grid;   // the same prompts' uncached tokens
  double mean_prompt = 0;
  double mean_decode_steps = 0;     // E[output − 1]: steps a request spends decoding
  double mean_decode_context = 0;   // k̄: token-weighted mean context while decoding
  double max_sequence_tokens = 0;   // largest prompt + output on the grids
};
WorkloadStats ComputeWorkloadStats(const Workload& workload, int block_size);

struct ScreenResult {
  Layout layout;
  double max_rate = 0;                       // req/s the layout sustains within the SLO
  Constraint binding = Constraint::kNone;    // what stops it there
  LatencySummary at_rate;                    // at the requested rate (+inf where unstable)
  bool meets_slo_at_rate = false;
  double prefill_utilization = 0;            // at the requested rate
  double transfer_utilization = 0;
  double decode_batch = 0;                   // running sequences per decode node
  double decode_kv_fraction = 0;             // of device_tokens held
};

// Screens `layout` at `rate` (req/s) against `slo`.
ScreenResult ScreenLayout(const Layout& layout, const CostModel& cost, const WorkloadStats& stats, const Slo& slo,
                          double rate);

}  // namespace tandem::planner
