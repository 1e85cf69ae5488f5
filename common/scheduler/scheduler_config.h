// SchedulerConfig: the continuous-batching policy knobs of one engine.
// Thread rule: plain value type.
#pragma once

#include <cstdint>

#include "common/base/status.h"

namespace tandem::scheduler {

enum class PreemptionMode : uint8_t {
  kSwap,       // copy the victim's blocks to the host tier; recompute when it has no room
  kRecompute,  // drop the victim's blocks; its tokens are prefilled again on resume
};

struct SchedulerConfig {
  // Tokens computed per step across all sequences (decodes count 1 each). Bounds
  // step latency; raise for throughput on large GPUs (8192 is a good H200 default).
  int max_num_batched_tokens = 8192;
  // Running plus reserved sequences at most, so a step never has more. Bounds the
  // decode batch and the CUDA-graph bucket sizes.
  int max_num_seqs = 256;
  // Longest prefill chunk of one sequence per step; long prompts are split into
  // chunks of this size and mixed with decodes. Lower = smoother inter-token latency.
  int max_prefill_chunk_tokens = 2048;
  // Prompt tokens per step whose logits rows are kept for prompt logprobs (echo with
  // logprobs); each costs a row of vocab floats in the logits buffer (128K vocab: 512 KB).
  // 0 refuses requests for prompt logprobs.
  int max_prompt_logits_tokens = 64;
  // Longest sequence (prompt + generated) accepted; normally the model's context length.
  int max_model_len = 32768;
  // Requests allowed to wait at once; more are rejected (backpressure).
  int max_waiting_requests = 4096;
  // What preemption does with a victim's KV. A preempted request is never
  // ended for it: it comes back before newer work of its class.
  PreemptionMode preemption_mode = PreemptionMode::kSwap;
  // Lease of a remote-KV reservation when the caller passes none, in milliseconds.
  int64_t default_lease_ms = 10'000;
  // A reservation that ends without CompleteReservation (Cancel, lease expiry)
  // keeps the blocks another node may still write out of reuse this long, in
  // milliseconds: one-sided writes cannot be recalled. Must be at least the
  // sender's drain timeout plus the control-plane latency. 0 = free at once.
  int64_t reservation_quarantine_ms = 3'000;

  Status Validate() const;
};

}  // namespace tandem::scheduler
