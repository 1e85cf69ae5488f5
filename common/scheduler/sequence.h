// Sequence: one request's state inside the scheduler (tokens, KV block table,
// progress). Created by Scheduler::AddRequest/Reserve, destroyed when it ends.
// Thread rule: owned by the Scheduler; engine thread only.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/base/clock.h"
#include "common/base/ids.h"
#include "common/kv_cache/block_hash.h"

namespace tandem::scheduler {

// Scheduling class; lower value goes first. FCFS within a class.
enum class Priority : uint8_t { kInteractive = 0, kBatch = 1 };
inline constexpr int kNumPriorities = 2;

enum class SequenceState : uint8_t {
  kWaiting,   // queued for (re)admission; holds no blocks
  kRunning,   // in the batch; device blocks
  kSwapped,   // preempted to the host tier; host blocks
  kReserved,  // device blocks held for KV computed on another node, under a lease
};

// Why a request ended: the one vocabulary from the scheduler through the engine to the node
// protocol (node::FinishReasonToProto). The last two are set by the engine, never by the scheduler.
enum class FinishReason : uint8_t {
  kStop,          // sampled a stop token
  kLength,        // max_tokens generated or max_model_len reached
  kCancelled,     // Cancel()
  kLeaseExpired,  // reservation lease ran out before the KV landed
  kRejected,      // refused at admission (see the status)
  kAborted,       // a failed step or sampling ended it (see the status)
};
std::string_view FinishReasonName(FinishReason reason);

// What a request brings.
struct SequenceParams {
  RequestId id = 0;
  std::string tenant_salt;             // prefix-cache isolation; derived by the router
  std::vector<TokenId> prompt_tokens;  // at least one
  int max_tokens = 16;                 // generated tokens at most, >= 1
  Priority priority = Priority::kInteractive;
  std::vector<TokenId> stop_token_ids;  // sampling one of these finishes the request
  // On a normal finish (stop or length) keep the device blocks referenced until
  // Scheduler::ReleaseHeld or Cancel: someone still reads the KV (a prefill node
  // sending it to decode). Full blocks still enter the prefix cache.
  bool hold_kv_after_finish = false;
  // Every prompt position's logits are wanted (prompt logprobs): the prompt is computed
  // whole (no prefix-cache hits) in chunks whose logits rows fit the step's
  // SchedulerConfig::max_prompt_logits_tokens.
  bool prompt_logits = false;
};

struct Sequence {
  SequenceParams params;
  std::vector<TokenId> tokens;  // prompt, then generated tokens
  // Leading tokens whose KV is (or is being, this step) in the cache.
  int num_computed_tokens = 0;
  // Device blocks (running, reserved) or host blocks (swapped); empty while waiting.
  std::vector<BlockId> block_table;
  // Hashes of the full blocks of `tokens` computed so far (a prefix of them).
  std::vector<kv_cache::BlockHash> block_hashes;
  // Leading blocks of block_table registered in the prefix cache.
  int num_registered_blocks = 0;
  // Prompt tokens served from the prefix cache at first admission (usage.cached_tokens).
  int num_cached_prompt_tokens = 0;
  int num_preemptions = 0;
  uint64_t arrival = 0;  // FCFS order
  SequenceState state = SequenceState::kWaiting;
  bool admitted_once = false;
  Nanos lease_deadline = 0;  // kReserved only
  // kReserved only: blocks of block_table from here on are written by another node.
  int first_remote_block = 0;
  // The step (Scheduler counter) that last scheduled tokens of this sequence, and how many.
  // Until the next step or an AppendToken they may not be computed yet.
  int64_t last_scheduled_step = -1;
  int last_scheduled_tokens = 0;

  int num_prompt_tokens() const { return static_cast<int>(params.prompt_tokens.size()); }
  int num_generated_tokens() const { return static_cast<int>(tokens.size()) - num_prompt_tokens(); }
  // The next chunk needs a logits row per token (its prompt logprobs are not out yet).
  bool NeedsPromptLogits() const { return params.prompt_logits && num_generated_tokens() == 0; }
  int num_tokens() const { return static_cast<int>(tokens.size()); }
};

}  // namespace tandem::scheduler
