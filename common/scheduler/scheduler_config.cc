#include "common/scheduler/scheduler_config.h"

#include <fmt/format.h>

namespace tandem::scheduler {

Status SchedulerConfig::Validate() const {
  auto positive = [](const char* name, int64_t v) -> Status {
    if (v <= 0) return InvalidArgumentError(fmt::format("scheduler: {} must be > 0, got {}", name, v));
    return Status::Ok();
  };
  TANDEM_RETURN_IF_ERROR(positive("max_num_batched_tokens", max_num_batched_tokens));
  TANDEM_RETURN_IF_ERROR(positive("max_num_seqs", max_num_seqs));
  TANDEM_RETURN_IF_ERROR(positive("max_prefill_chunk_tokens", max_prefill_chunk_tokens));
  if (max_prompt_logits_tokens < 0) return InvalidArgumentError("scheduler: max_prompt_logits_tokens must be >= 0");
  TANDEM_RETURN_IF_ERROR(positive("max_model_len", max_model_len));
  TANDEM_RETURN_IF_ERROR(positive("max_waiting_requests", max_waiting_requests));
  TANDEM_RETURN_IF_ERROR(positive("default_lease_ms", default_lease_ms));
  if (reservation_quarantine_ms < 0) {
    return InvalidArgumentError("scheduler: reservation_quarantine_ms must be >= 0");
  }
  return Status::Ok();
}

}  // namespace tandem::scheduler
