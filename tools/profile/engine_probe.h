// EngineProbe: measures one engine the way a node runs it — requests submitted,
// Engine::StepOnce driven on this thread, every step's wall time taken around
// StepOnce (on CUDA a step ends with the sampled tokens copied back, so the
// wall time covers the GPU's work). Prompts are random tokens under a tenant
// salt of their own, so no prefix cache hit shortens a measurement.
// Grid points that the model's context, the KV pool or the scheduler's limits
// cannot hold are left out and listed in the result's `capped`.
// Thread rule: the calling thread drives the engine; the engine must not be Start()ed.
#pragma once

#include <random>
#include <set>
#include <vector>

#include "common/engine/engine.h"
#include "planner/profile.h"
#include "tools/profile/profile_options.h"

namespace tandem::tools {

class EngineProbe {
 public:
  // REQUIRES: `engine` idle, not started, outlives this.
  EngineProbe(engine::Engine& engine, const ProfileOptions& options);

  // Both grids are measured in rounds, each walking every point once (a drift of the host's
  // speed shows as each point's spread instead of bending the grid); a point is the median
  // over the rounds.
  // Prefill time against prompt tokens and requests submitted together (after a warm-up round).
  StatusOr<planner::PrefillProfile> MeasurePrefill();
  // Decode step time against batch and KV tokens, with the fitted cost model.
  StatusOr<planner::DecodeProfile> MeasureDecode();

  // Tokens the device pool holds, and how many of them one sequence of `tokens` takes (whole blocks).
  int64_t PoolTokens() const;
  int64_t BlockTokens(int64_t tokens) const;

 private:
  // The shape of the last step the engine ran (its step observer).
  struct StepShape {
    int batch = 0;
    int64_t kv_tokens = 0;
    bool decode_only = false;
  };

  // Submits `count` requests of `prompt_tokens` random tokens, each generating `max_tokens`.
  std::vector<RequestId> Submit(int count, int prompt_tokens, int max_tokens);
  // One engine step; returns its wall seconds. A request the engine refused or
  // aborted is an error naming it.
  StatusOr<double> Step(std::vector<engine::EngineOutput>* outputs);
  // Steps until each of `ids` has its first token; `seconds` and `steps` (may be null) count them.
  Status StepUntilFirstTokens(const std::vector<RequestId>& ids, double* seconds, int* steps);
  // Cancels what is left of `ids` and steps until every one of them has ended.
  Status Finish(const std::vector<RequestId>& ids);
  // One prefill run of `requests` × `prompt_tokens`: seconds and steps.
  StatusOr<planner::PrefillPoint> PrefillOnce(int prompt_tokens, int requests);
  StatusOr<planner::DecodePoint> DecodePoint(int batch, int context_tokens);
  // Tokens each request of a decode point generates at most: every timed and
  // warm-up step, after the steps its batch's prefill may take.
  int DecodeMaxTokens(int batch, int context_tokens) const;

  engine::Engine& engine_;
  const ProfileOptions options_;
  std::mt19937 rng_;
  RequestId next_id_ = 1;
  StepShape last_step_;
  std::set<RequestId> live_;       // submitted, not yet ended
  std::set<RequestId> cancelled_;  // cancelled by Finish: their Cancelled end is expected
};

}  // namespace tandem::tools
