#include "tools/plan/plan_report.h"

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace tandem::tools {
namespace {

std::string Format(const char* format, double v) {
  if (!std::isfinite(v)) return "inf";
  char text[64];
  std::snprintf(text, sizeof(text), format, v);
  return text;
}

std::string Ms(double seconds) {
  if (!std::isfinite(seconds)) return "inf";
  return Format(seconds < 0.01 ? "%.2f" : seconds < 1 ? "%.1f" : "%.0f", seconds * 1e3);
}

std::string Pad(const std::string& s, size_t width, bool right) {
  if (s.size() >= width) return s;
  const std::string fill(width - s.size(), ' ');
  return right ? fill + s : s + fill;
}

}  // namespace

std::string FormatCostModel(const planner::CostModel& cost) {
  const planner::PrefillFit& p = cost.prefill_fit();
  const planner::DecodeFit& d = cost.decode_fit();
  const planner::TransferPath& t = cost.transfer_path();
  std::string out;
  out += "prefill step: " + Format("%.4g", p.per_step_seconds * 1e3) + " ms/step + " +
         Format("%.4g", p.per_token_seconds * 1e3) + " ms/token + " + Format("%.4g", p.per_attention_seconds * 1e3) +
         " ms/attention pair (terms: " + p.terms + "; " + std::to_string(p.num_points) + " points, R² " +
         Format("%.3f", p.r2) + ", max error " + Format("%.1f", p.max_relative_error * 100) + " %, mean " +
         Format("%.1f", p.mean_relative_error * 100) + " %)\n";
  out += "decode step:  " + Format("%.4g", d.intercept_seconds * 1e3) + " ms + " +
         Format("%.4g", d.per_sequence_seconds * 1e3) + " ms/sequence + " +
         Format("%.4g", d.per_kv_token_seconds * 1e3) + " ms/KV token (R² " + Format("%.3f", d.r2) + ", max error " +
         Format("%.1f", d.max_relative_error * 100) + " %)\n";
  out += "KV transfer:  " + t.transport + (t.options.empty() ? "" : " (" + t.options + ")") + ": " +
         Format("%.4g", t.fit.fixed_seconds * 1e3) + " ms + " + Format("%.4g", t.fit.per_run_seconds * 1e3) +
         " ms/run + bytes / " + Format("%.3g", t.fit.bytes_per_second / 1e9) + " GB/s (R² " +
         Format("%.3f", t.fit.r2) + ", max error " + Format("%.1f", t.fit.max_relative_error * 100) + " %)\n";
  const planner::NodeLimits& l = cost.decode_limits();
  out += "decode node:  " + std::to_string(int64_t{l.num_device_blocks} * l.block_size) + " KV tokens, " +
         std::to_string(l.max_num_seqs) + " sequences, " + std::to_string(l.max_num_batched_tokens) +
         " tokens per step, chunks of " + std::to_string(l.max_prefill_chunk_tokens) + "\n";
  return out;
}

std::string FormatPlanTable(const planner::Plan& plan) {
  const std::vector<std::string> header = {"",         "layout",   "GPUs",     "goodput r/s", "tok/s/GPU", "TTFT p50",
                                           "TTFT p90", "TPOT p50", "TPOT p90", "binding",     "headroom"};
  std::vector<std::vector<std::string>> rows = {header};
  for (size_t i = 0; i < plan.candidates.size(); ++i) {
    const planner::CandidateResult& c = plan.candidates[i];
    const planner::LatencySummary& l = c.Latency();
    const double goodput = c.Goodput();
    rows.push_back({static_cast<int>(i) == plan.recommended ? ">" : "", c.screen.layout.Name(),
                    std::to_string(c.screen.layout.Gpus()), (c.simulated ? "" : "~") + Format("%.2f", goodput),
                    Format("%.1f", plan.TokensPerGpu(c)), Ms(l.ttft_p50), Ms(l.ttft_p90), Ms(l.tpot_p50),
                    Ms(l.tpot_p90), planner::ConstraintName(c.screen.binding),
                    Format("%+.0f%%", (goodput / plan.rate - 1) * 100)});
  }
  std::vector<size_t> width(header.size(), 0);
  for (const auto& row : rows) {
    for (size_t k = 0; k < row.size(); ++k) width[k] = std::max(width[k], row[k].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t k = 0; k < row.size(); ++k) {
      const bool right = k >= 2 && k != 9;
      line += Pad(row[k], width[k], right) + (k + 1 < row.size() ? "  " : "");
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  out += "(latencies in ms at " + Format("%.3g", plan.rate) +
         " req/s; goodput: the simulation's, ~ the screen's estimate; binding: the screen's)\n";
  return out;
}

}  // namespace tandem::tools
