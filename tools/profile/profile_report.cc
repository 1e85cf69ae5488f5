#include "tools/profile/profile_report.h"

#include <cstdio>
#include <string>
#include <vector>

namespace tandem::tools {
namespace {

void PrintCapped(const std::vector<std::string>& lines, const char* what) {
  for (const std::string& line : lines) std::printf("  %s %s\n", what, line.c_str());
}

}  // namespace

void PrintHeader(const planner::Profile& p) {
  std::printf("tandem-profile %s (commit %s)%s\n", p.version.c_str(), p.commit.c_str(), p.quick ? ", quick" : "");
  std::printf("device: %s #%d, %s (%d compute units, %.1f GB)\n", p.device.backend.c_str(), p.device.ordinal,
              p.device.name.c_str(), p.device.compute_units, p.device.memory_bytes / 1e9);
  std::printf("model: %s (%s; %d layers, hidden %d, %d/%d heads of %d, FFN %d, vocab %d), KV %s\n", p.model.id.c_str(),
              p.model.architecture.c_str(), p.model.num_layers, p.model.hidden_size, p.model.num_heads,
              p.model.num_kv_heads, p.model.head_dim, p.model.intermediate_size, p.model.vocab_size,
              p.model.kv_dtype.c_str());
  std::printf("engine: block %d, %d device + %d host blocks, %d batched tokens, %d seqs, chunk %d, max_model_len %d\n",
              p.engine.block_size, p.engine.num_device_blocks, p.engine.num_host_blocks,
              p.engine.max_num_batched_tokens, p.engine.max_num_seqs, p.engine.max_prefill_chunk_tokens,
              p.engine.max_model_len);
  std::printf("KV capacity: %lld tokens on the device, %lld on the host tier, %lld bytes per token\n\n",
              static_cast<long long>(p.kv_capacity.device_tokens), static_cast<long long>(p.kv_capacity.host_tokens),
              static_cast<long long>(p.kv_capacity.bytes_per_token));
}

void PrintPrefill(const planner::PrefillProfile& prefill) {
  std::printf("prefill (median of %d rounds over the grid; max_tokens 1)\n", prefill.repetitions);
  std::printf("| requests | prompt tokens | steps | ms | spread | prompt tokens/s |\n|---|---|---|---|---|---|\n");
  for (const planner::PrefillPoint& x : prefill.points) {
    std::printf("| %d | %d | %d | %.3f | %.0f %% | %.0f |\n", x.requests, x.prompt_tokens, x.steps, x.seconds * 1e3,
                100 * x.spread, x.requests * x.prompt_tokens / x.seconds);
  }
  PrintCapped(prefill.capped, "capped:");
  std::printf("\n");
}

void PrintDecode(const planner::DecodeProfile& decode) {
  std::printf("decode (median of %d steps, then of %d rounds over the grid)\n", decode.timed_steps, decode.repetitions);
  std::printf("| batch | context | KV tokens | step ms | spread | fit ms | error |\n|---|---|---|---|---|---|---|\n");
  for (const planner::DecodePoint& x : decode.points) {
    const double fit = decode.fit.StepSeconds(x.batch, x.kv_tokens);
    std::printf("| %d | %d | %.0f | %.4f | %.0f %% | %.4f | %+.1f %% |\n", x.batch, x.context_tokens, x.kv_tokens,
                x.step_seconds * 1e3, 100 * x.spread, fit * 1e3, 100 * (fit - x.step_seconds) / x.step_seconds);
  }
  const planner::DecodeFit& f = decode.fit;
  std::printf(
      "fit: step = %.4f ms + %.4f ms × batch + %.3g ms × kv_tokens  (R² %.4f, max relative error %.1f %%, "
      "mean %.1f %%)\n",
      f.intercept_seconds * 1e3, f.per_sequence_seconds * 1e3, f.per_kv_token_seconds * 1e3, f.r2,
      100 * f.max_relative_error, 100 * f.mean_relative_error);
  PrintCapped(decode.capped, "capped:");
  std::printf("\n");
}

void PrintSpread(const planner::Profile& profile) {
  const planner::ProfileSpread spread = planner::MeasurementSpread(profile);
  if (spread.points == 0) return;
  std::printf("the rounds agreed within %.0f %% (%s; median over %d points %.0f %%)\n", 100 * spread.max,
              spread.where.c_str(), spread.points, 100 * spread.median);
  const std::string warning = planner::NoisyProfileWarning(profile);
  if (!warning.empty()) std::printf("warning: %s\n", warning.c_str());
  std::printf("\n");
}

void PrintTransfer(const planner::TransferProfile& transfer) {
  for (const planner::TransferPath& path : transfer.paths) {
    std::printf("KV transfer: %s%s%s, %s (%s)\n", path.transport.c_str(), path.options.empty() ? "" : " over ",
                path.options.c_str(), path.memory.c_str(), path.note.c_str());
    std::printf("| blocks | runs | bytes | ms | fit ms |\n|---|---|---|---|---|\n");
    for (const planner::TransferPoint& x : path.points) {
      std::printf("| %d | %d | %lld | %.4f | %.4f |\n", x.blocks, x.runs, static_cast<long long>(x.bytes),
                  x.seconds * 1e3, path.fit.Seconds(x.runs, static_cast<double>(x.bytes)) * 1e3);
    }
    const planner::TransferFit& f = path.fit;
    std::printf(
        "fit: %.4f ms + %.4f ms × runs + bytes / %.3f GB/s  (R² %.4f, max relative error %.1f %%, mean %.1f %%)\n\n",
        f.fixed_seconds * 1e3, f.per_run_seconds * 1e3, f.bytes_per_second / 1e9, f.r2, 100 * f.max_relative_error,
        100 * f.mean_relative_error);
  }
  PrintCapped(transfer.left_out, "left out:");
}

}  // namespace tandem::tools
