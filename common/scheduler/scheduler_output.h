// What one Scheduler::Schedule() step hands the engine, and the counters.
//
// The engine runs `copies` (in order) on its KvTierStorage, then builds one
// forward batch from `scheduled`: for each entry, compute KV for
// new_tokens at positions [start_position, start_position + num_new_tokens),
// writing slot t into block_table[t / block_size]; produce logits for the last
// token when needs_logits, sample, and call Scheduler::AppendToken.
// Spans point into the scheduler's sequences and stay valid until the next
// call that changes the scheduler (AddRequest, Cancel, AppendToken, Schedule, ...).
// Thread rule: plain values.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/base/ids.h"
#include "common/base/status.h"
#include "common/kv_cache/kv_cache_manager.h"
#include "common/kv_cache/kv_tier_storage.h"
#include "common/scheduler/scheduler_config.h"
#include "common/scheduler/sequence.h"

namespace tandem::scheduler {

struct ScheduledSequence {
  RequestId id = 0;
  int start_position = 0;                // tokens already in the cache = position of new_tokens[0]
  int num_new_tokens = 0;                // tokens to compute this step (1 for a decode)
  std::span<const TokenId> new_tokens;   // [num_new_tokens]
  std::span<const BlockId> block_table;  // device blocks covering start_position + num_new_tokens
  bool needs_logits = false;             // last prefill chunk or a decode: sample one token
  bool is_prefill = false;               // start_position < prompt length (includes recompute)
  bool all_logits = false;               // a logits row for every new token (prompt logprobs)
};

struct FinishedSequence {
  RequestId id = 0;
  FinishReason reason = FinishReason::kStop;
  Status status;  // why, for kCancelled and kLeaseExpired
  int num_prompt_tokens = 0;
  int num_generated_tokens = 0;
  int num_cached_prompt_tokens = 0;  // usage.prompt_tokens_details.cached_tokens
};

struct PreemptedSequence {
  RequestId id = 0;
  PreemptionMode mode = PreemptionMode::kSwap;  // what actually happened
};

struct SchedulerOutput {
  std::vector<kv_cache::BlockCopy> copies;  // run these first, in order
  std::vector<ScheduledSequence> scheduled;
  std::vector<FinishedSequence> finished;    // ended since the previous step
  std::vector<PreemptedSequence> preempted;  // this step
  int num_batched_tokens = 0;
};

struct SchedulerCounters {
  kv_cache::KvCacheCounters kv;
  int64_t num_waiting = 0;
  int64_t num_running = 0;
  int64_t num_swapped = 0;
  int64_t num_held = 0;                // finished sequences whose KV is held (hold_kv_after_finish)
  int64_t num_quarantined_blocks = 0;  // device blocks of abandoned reservations, not yet reusable
  int64_t prefix_query_tokens = 0;     // prompt tokens looked up at admission
  int64_t prefix_hit_tokens = 0;       // of those, served from the cache
  int64_t preemptions = 0;
  int64_t preemptions_swap = 0;
  int64_t preemptions_recompute = 0;
  int64_t swaps_out = 0;  // sequences swapped to host
  int64_t swaps_in = 0;   // sequences swapped back
  int64_t reservations_active = 0;
  int64_t reservations_total = 0;
  int64_t lease_expiries = 0;
  int64_t rejected = 0;  // AddRequest/Reserve refusals
  int64_t cancelled = 0;
  int64_t finished = 0;  // stop or length
  int64_t steps = 0;
};

}  // namespace tandem::scheduler
