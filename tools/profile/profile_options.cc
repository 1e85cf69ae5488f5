#include "tools/profile/profile_options.h"

#include <algorithm>

namespace tandem::tools {

void ProfileOptions::Bind(config::ConfigBinder& b) {
  b.Field("output", output, "JSON profile to write");
  b.Field("seed", seed, "seed of the random prompt tokens");
  b.Field("log_level", log_level, "engine log level on stderr (trace, debug, info, warn, error)");
  b.Field("prefill.min_tokens", prefill_min_tokens, "shortest prompt of the prefill grid (tokens)");
  b.Field("prefill.max_tokens", prefill_max_tokens,
          "longest prompt of the prefill grid (tokens; capped by context and KV)");
  b.Field("prefill.max_requests", prefill_max_requests, "most prompts submitted together in the prefill grid");
  b.Field("prefill.repetitions", prefill_repetitions,
          "timed rounds over the prefill grid (median per point; a warm-up round first)");
  b.Field("decode.max_batch", decode_max_batch, "largest decode batch (also capped by scheduler.max_num_seqs)");
  b.Field("decode.min_context", decode_min_context, "shortest context of the decode grid (tokens)");
  b.Field("decode.max_context", decode_max_context, "longest context of the decode grid (tokens)");
  b.Field("decode.max_kv_tokens", decode_max_kv_tokens,
          "leave out decode points above this many KV tokens (0: the pool)");
  b.Field("decode.steps", decode_steps, "decode steps timed per point (median)");
  b.Field("decode.warmup_steps", decode_warmup_steps, "untimed decode steps before them");
  b.Field("decode.repetitions", decode_repetitions, "rounds over the decode grid (median per point)");
  b.Field("transfer.transports", transfer_transports, "KV transfer paths to measure: local, ucx, cuda_ipc (a CUDA build; GPU memory), nccl (named as left out)");
  b.Field("transfer.max_blocks", transfer_max_blocks, "largest request of the transfer grid (KV blocks)");
  b.Field("transfer.repetitions", transfer_repetitions, "timed sessions per transfer point (median)");
}

Status ProfileOptions::Validate() const {
  if (output.empty()) return InvalidArgumentError("output is required");
  if (prefill_min_tokens < 1 || prefill_max_tokens < prefill_min_tokens) {
    return InvalidArgumentError("prefill.min_tokens must be >= 1 and <= prefill.max_tokens");
  }
  if (prefill_max_requests < 1) return InvalidArgumentError("prefill.max_requests must be >= 1");
  if (prefill_repetitions < 1) return InvalidArgumentError("prefill.repetitions must be >= 1");
  if (decode_max_batch < 1) return InvalidArgumentError("decode.max_batch must be >= 1");
  if (decode_min_context < 1 || decode_max_context < decode_min_context) {
    return InvalidArgumentError("decode.min_context must be >= 1 and <= decode.max_context");
  }
  if (decode_max_kv_tokens < 0) return InvalidArgumentError("decode.max_kv_tokens must be >= 0");
  if (decode_steps < 1 || decode_warmup_steps < 0) {
    return InvalidArgumentError("decode.steps must be >= 1 and decode.warmup_steps >= 0");
  }
  if (decode_repetitions < 1) return InvalidArgumentError("decode.repetitions must be >= 1");
  for (const std::string& t : transfer_transports) {
    if (t != "local" && t != "ucx" && t != "cuda_ipc" && t != "nccl") {
      return InvalidArgumentError("transfer.transports: unknown transport '" + t + "' (local, ucx, cuda_ipc, nccl)");
    }
  }
  if (transfer_max_blocks < 16) return InvalidArgumentError("transfer.max_blocks must be >= 16 (three sizes to fit)");
  if (transfer_repetitions < 1) return InvalidArgumentError("transfer.repetitions must be >= 1");
  return Status::Ok();
}

void ProfileOptions::ApplyQuick() {
  if (!quick) return;
  prefill_min_tokens = std::min(prefill_min_tokens, 16);
  prefill_max_tokens = std::min(prefill_max_tokens, 512);
  prefill_max_requests = std::min(prefill_max_requests, 4);
  prefill_repetitions = std::min(prefill_repetitions, 3);
  decode_max_batch = std::min(decode_max_batch, 16);
  decode_min_context = std::min(decode_min_context, 32);
  decode_max_context = std::min(decode_max_context, 512);
  decode_steps = std::min(decode_steps, 4);
  decode_warmup_steps = std::min(decode_warmup_steps, 1);
  decode_repetitions = std::min(decode_repetitions, 2);
  transfer_max_blocks = std::min(transfer_max_blocks, 64);
  transfer_repetitions = std::min(transfer_repetitions, 3);
}

}  // namespace tandem::tools
