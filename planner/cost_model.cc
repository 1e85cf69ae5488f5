#include "planner/cost_model.h"

#include <algorithm>
#include <cmath>

#include "planner/linear_fit.h"

namespace tandem::planner {

StatusOr<PrefillFit> FitPrefill(const std::vector<PrefillPoint>& points) {
  if (points.empty()) return InvalidArgumentError("profile: prefill has no points to fit a prefill model to");
  std::vector<double> y;
  std::vector<std::vector<double>> full;
  for (const PrefillPoint& p : points) {
    const double tokens = double{1} * p.prompt_tokens * p.requests;
    const double pairs = p.requests * AttentionPairs(0, p.prompt_tokens);
    full.push_back({static_cast<double>(p.steps), tokens, pairs});
    y.push_back(p.seconds);
  }
  // Terms the points can tell apart, most first: all three, then without the
  // attention term, then tokens alone (a single point).
  const std::vector<std::vector<int>> term_sets = {{0, 1, 2}, {0, 1}, {1}};
  const char* names[] = {"steps", "tokens", "attention"};
  Status last = Status::Ok();
  for (const std::vector<int>& terms : term_sets) {
    std::vector<std::vector<double>> rows;
    for (const auto& r : full) {
      std::vector<double> row;
      for (int t : terms) row.push_back(r[static_cast<size_t>(t)]);
      rows.push_back(std::move(row));
    }
    StatusOr<LinearFit> fit = FitLeastSquares(rows, y, {.weighting = FitWeighting::kRelative, .non_negative = true});
    if (!fit.ok()) {
      last = fit.status();
      continue;
    }
    PrefillFit out;
    double* coefficient[] = {&out.per_step_seconds, &out.per_token_seconds, &out.per_attention_seconds};
    for (size_t i = 0; i < terms.size(); ++i) {
      *coefficient[terms[i]] = fit->coefficients[i];
      out.terms += (i ? ", " : "") + std::string(names[terms[i]]);
    }
    out.r2 = fit->r2;
    out.max_relative_error = fit->max_relative_error;
    out.mean_relative_error = fit->mean_relative_error;
    out.num_points = fit->num_points;
    if (out.per_token_seconds <= 0 && out.per_attention_seconds <= 0) {
      last = InvalidArgumentError("prefill time does not grow with tokens");
      continue;
    }
    return out;
  }
  return InvalidArgumentError("profile: no prefill model fits its prefill points: " + last.message());
}

NodeLimits LimitsOf(const Profile& profile) {
  const EngineSettings& e = profile.engine;
  return {.block_size = e.block_size,
          .num_device_blocks = e.num_device_blocks,
          .max_num_batched_tokens = e.max_num_batched_tokens,
          .max_num_seqs = e.max_num_seqs,
          .max_prefill_chunk_tokens = e.max_prefill_chunk_tokens};
}

StatusOr<CostModel> CostModel::Build(const Profile& prefill, const Profile& decode, const std::string& transfer_path) {
  const ModelInfo& a = prefill.model;
  const ModelInfo& b = decode.model;
  if (a.architecture != b.architecture || a.num_layers != b.num_layers || a.hidden_size != b.hidden_size ||
      a.num_kv_heads != b.num_kv_heads || a.head_dim != b.head_dim) {
    return InvalidArgumentError("the prefill and decode profiles are of different models ('" + a.id + "', '" + b.id +
                                "')");
  }
  if (prefill.engine.block_size != decode.engine.block_size ||
      prefill.kv_capacity.bytes_per_token != decode.kv_capacity.bytes_per_token) {
    return InvalidArgumentError("the prefill and decode profiles have different KV layouts (block size, bytes per token)");
  }
  CostModel m;
  TANDEM_ASSIGN_OR_RETURN(m.prefill_, FitPrefill(prefill.prefill.points));
  m.decode_ = decode.decode.fit;
  if (m.decode_.StepSeconds(1, 1) <= 0) return InvalidArgumentError("profile: the decode fit is zero");
  const std::vector<TransferPath>& paths = prefill.transfer.paths;
  const TransferPath* chosen = nullptr;
  std::string names;
  for (const TransferPath& p : paths) {
    names += (names.empty() ? "" : ", ") + p.transport;
    if (p.transport == transfer_path) chosen = &p;
  }
  if (transfer_path.empty()) {
    for (const TransferPath& p : paths) {
      if (p.transport == "ucx") chosen = &p;
    }
    if (chosen == nullptr && !paths.empty()) chosen = &paths.front();
    if (chosen == nullptr) return InvalidArgumentError("profile: no KV transfer path was measured");
  }
  if (chosen == nullptr) {
    return InvalidArgumentError("transfer path '" + transfer_path + "' is not in the prefill profile (it has: " +
                                (names.empty() ? "none" : names) + ")");
  }
  if (!(chosen->fit.bytes_per_second > 0)) {
    return InvalidArgumentError("profile: transfer path '" + chosen->transport + "' has no bandwidth");
  }
  m.transfer_ = *chosen;
  m.prefill_limits_ = LimitsOf(prefill);
  m.decode_limits_ = LimitsOf(decode);
  m.num_layers_ = prefill.model.num_layers;
  m.bytes_per_token_ = prefill.kv_capacity.bytes_per_token;
  return m;
}

double CostModel::PrefillSeconds(int tokens) const {
  const int chunk = std::max(1, std::min(prefill_limits_.max_prefill_chunk_tokens, prefill_limits_.max_num_batched_tokens));
  const double steps = std::ceil(static_cast<double>(tokens) / chunk);
  return prefill_.Seconds(steps, tokens, AttentionPairs(0, tokens));
}

double CostModel::MixedStepSeconds(double batch, double kv_tokens, double prefill_tokens, double pairs) const {
  if (batch <= 0) return prefill_.Seconds(prefill_tokens > 0 ? 1 : 0, prefill_tokens, pairs);
  return decode_.StepSeconds(batch, kv_tokens) + prefill_.Seconds(0, prefill_tokens, pairs);
}

double CostModel::TransferSeconds(int tokens) const {
  const int bs = prefill_limits_.block_size;
  const double blocks = std::ceil(static_cast<double>(tokens) / bs);
  // One write per layer: the reserved blocks of a request are taken as one run.
  return transfer_.fit.Seconds(num_layers_, blocks * bs * static_cast<double>(bytes_per_token_));
}

}  // namespace tandem::planner
