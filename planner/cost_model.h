// CostModel: the planner's times, every one from a profile. A decode step is
// the profile's DecodeFit (a + b·batch + c·kv_tokens). A prefill step is
// PrefillFit, fitted here to the profile's prefill grid:
//   seconds ≈ per_step·steps + per_token·tokens + per_attention·pairs
// where `pairs` is the attention work of the tokens computed (a chunk of n new
// tokens after s computed ones attends to n·s + n(n+1)/2 positions; a whole
// prompt of P tokens, however chunked, to P(P+1)/2). It is the a + b·tokens +
// c·tokens² form with the square taken per prompt, where attention's cost is, so
// batched prompts and chunked ones are priced alike (docs/planner.md, "The
// prefill model"). A handoff is the TransferFit of the chosen path; KV room is
// the engine's blocks. Thread rule: immutable after Build; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "common/base/status.h"
#include "planner/profile.h"

namespace tandem::planner {

struct PrefillFit {
  double per_step_seconds = 0;
  double per_token_seconds = 0;
  double per_attention_seconds = 0;  // per (query, key) position pair
  double r2 = 0;
  double max_relative_error = 0;
  double mean_relative_error = 0;
  int num_points = 0;
  std::string terms;  // which terms the points could tell apart ("steps, tokens, attention")

  // Steps of `steps` engine steps computing `tokens` tokens with `pairs` attention pairs.
  double Seconds(double steps, double tokens, double pairs) const {
    return per_step_seconds * steps + per_token_seconds * tokens + per_attention_seconds * pairs;
  }
};

// Fits PrefillFit to `points` (relative error, non-negative). With too few or
// degenerate points it drops the attention term, then the per-step term (named
// in `terms`). InvalidArgument when there is no point to fit.
StatusOr<PrefillFit> FitPrefill(const std::vector<PrefillPoint>& points);

// Attention pairs of `n` new tokens after `start` computed ones.
inline double AttentionPairs(double start, double n) { return n * start + n * (n + 1) / 2; }

// The engine limits a simulated node runs with (a profile's EngineSettings).
struct NodeLimits {
  int block_size = 16;
  int num_device_blocks = 0;
  int max_num_batched_tokens = 0;
  int max_num_seqs = 0;
  int max_prefill_chunk_tokens = 0;
};

class CostModel {
 public:
  // From the profile of the prefill nodes, of the decode (and colocated) nodes
  // (often the same file) and the transfer path named `transfer_path` (in the
  // prefill profile; empty: "ucx" when measured, else the first path).
  // InvalidArgument: no prefill point, profiles of different models or KV layouts,
  // a path that is not in the profile (the message lists those that are).
  static StatusOr<CostModel> Build(const Profile& prefill, const Profile& decode, const std::string& transfer_path);

  // One prefill node step computing `tokens` tokens of prompts with `pairs` attention pairs.
  double PrefillStepSeconds(double tokens, double pairs) const { return prefill_.Seconds(1, tokens, pairs); }
  // A whole prompt of `tokens` uncached tokens computed alone on a prefill node, in chunks.
  double PrefillSeconds(int tokens) const;
  // One decode-only step of `batch` sequences attending to `kv_tokens` in all.
  double DecodeStepSeconds(double batch, double kv_tokens) const { return decode_.StepSeconds(batch, kv_tokens); }
  // A colocated step: the decode step plus the prefill chunks' token and attention cost
  // (their per-step cost is the decode step's own); a prefill-only step when batch is 0.
  double MixedStepSeconds(double batch, double kv_tokens, double prefill_tokens, double pairs) const;
  // Moving the KV of `tokens` prompt tokens from a prefill to a decode node.
  double TransferSeconds(int tokens) const;

  const PrefillFit& prefill_fit() const { return prefill_; }
  const DecodeFit& decode_fit() const { return decode_; }
  const TransferPath& transfer_path() const { return transfer_; }
  const NodeLimits& prefill_limits() const { return prefill_limits_; }
  const NodeLimits& decode_limits() const { return decode_limits_; }
  int num_layers() const { return num_layers_; }
  int64_t bytes_per_token() const { return bytes_per_token_; }

 private:
  PrefillFit prefill_;
  DecodeFit decode_;
  TransferPath transfer_;
  NodeLimits prefill_limits_;
  NodeLimits decode_limits_;
  int num_layers_ = 0;
  int64_t bytes_per_token_ = 0;
};

NodeLimits LimitsOf(const Profile& profile);

}  // namespace tandem::planner
