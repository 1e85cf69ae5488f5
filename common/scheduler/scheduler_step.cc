// Scheduler::Schedule() and its phases: running sequences, then queued ones
// (swapped or waiting) in (priority, arrival) order.
#include <algorithm>
#include <span>

#include <fmt/format.h>

#include "common/base/check.h"
#include "common/scheduler/scheduler.h"

namespace tandem::scheduler {

using kv_cache::KvTier;

struct Scheduler::StepState {
  int budget = 0;          // tokens left this step
  int logits_budget = 0;   // prompt tokens that may still get a logits row this step (prompt logprobs)
  bool preempted = false;  // a preemption happened: admit and resume nothing
};

SchedulerOutput Scheduler::Schedule() {
  SchedulerOutput out;
  ++stats_.steps;
  ExpireLeases(&out);
  kv_.ReleaseQuarantine(clock_.NowNanos());
  // Everything scheduled last step has been computed now: publish full blocks.
  for (Sequence* seq : running_) RegisterComputedBlocks(seq, seq->num_computed_tokens);
  StepState step;
  step.budget = config_.max_num_batched_tokens;
  step.logits_budget = config_.max_prompt_logits_tokens;
  out.scheduled.reserve(running_.size() + 8);
  ScheduleRunning(&step, &out);
  // A step that had to preempt gives nothing back: what it freed goes to the growth of the running.
  if (!step.preempted) AdmitQueued(&step, &out);
  out.copies = kv_.TakeCopies();
  out.finished = std::move(pending_finished_);
  pending_finished_.clear();
  out.preempted.insert(out.preempted.begin(), pending_preempted_.begin(), pending_preempted_.end());
  pending_preempted_.clear();
  return out;
}

void Scheduler::ExpireLeases(SchedulerOutput* out) {
  const Nanos now = clock_.NowNanos();
  for (size_t i = 0; i < reserved_.size();) {
    Sequence* seq = reserved_[i];
    if (seq->lease_deadline > now) {
      ++i;
      continue;
    }
    ++stats_.lease_expiries;
    Finish(seq, FinishReason::kLeaseExpired,
           DeadlineExceededError(fmt::format("KV reservation lease of request {} expired", seq->params.id)),
           /*step_done=*/false);
  }
}

void Scheduler::RegisterComputedBlocks(Sequence* seq, int num_tokens) {
  const auto& cfg = kv_.config();
  if (!cfg.enable_prefix_caching) return;
  const int full = num_tokens / cfg.block_size;
  if (full <= seq->num_registered_blocks) return;
  if (static_cast<int>(seq->block_hashes.size()) < full) {
    kv_cache::ExtendBlockHashes(seq->params.tenant_salt, cfg.model_id, cfg.block_size,
                                std::span<const TokenId>(seq->tokens).first(static_cast<size_t>(full) * cfg.block_size),
                                &seq->block_hashes);
  }
  kv_.CacheBlocks(std::span<const kv_cache::BlockHash>(seq->block_hashes).first(static_cast<size_t>(full)),
                  seq->block_table, seq->num_registered_blocks);
  seq->num_registered_blocks = full;
}

int Scheduler::NextChunk(const Sequence& seq, const StepState& step) const {
  int n = std::min(seq.num_tokens() - seq.num_computed_tokens, step.budget);
  if (n > 1) n = std::min(n, config_.max_prefill_chunk_tokens);
  if (seq.NeedsPromptLogits()) n = std::min(n, step.logits_budget);
  return n;
}

bool Scheduler::TrySchedule(Sequence* seq, StepState* step, SchedulerOutput* out) {
  const int start = seq->num_computed_tokens;
  const int n = NextChunk(*seq, *step);
  if (n <= 0) return true;
  if (!kv_.AllocateSlots(start + n, &seq->block_table)) return false;
  ScheduledSequence s;
  s.id = seq->params.id;
  s.start_position = start;
  s.num_new_tokens = n;
  s.new_tokens = std::span<const TokenId>(seq->tokens).subspan(static_cast<size_t>(start), static_cast<size_t>(n));
  s.block_table = seq->block_table;
  s.needs_logits = start + n == seq->num_tokens();
  s.is_prefill = start < seq->num_prompt_tokens();
  s.all_logits = seq->NeedsPromptLogits();
  if (s.all_logits) step->logits_budget -= n;
  out->scheduled.push_back(s);
  out->num_batched_tokens += n;
  seq->num_computed_tokens += n;
  seq->last_scheduled_step = stats_.steps;
  seq->last_scheduled_tokens = n;
  step->budget -= n;
  return true;
}

void Scheduler::ScheduleRunning(StepState* step, SchedulerOutput* out) {
  for (int i = 0; i < static_cast<int>(running_.size()) && step->budget > 0; ++i) {
    Sequence* seq = running_[i];
    if (seq->num_computed_tokens >= seq->num_tokens()) continue;  // awaiting its sample
    while (!TrySchedule(seq, step, out)) {
      const int last = static_cast<int>(running_.size()) - 1;
      if (last > i) {  // the lowest-priority newest sequence gives way
        Preempt(running_[last], &out->preempted);
        step->preempted = true;
        continue;
      }
      if (i > 0) {  // it is the newest itself: it gives way to the older ones
        Preempt(seq, &out->preempted);
        step->preempted = true;
        --i;
      }
      // The oldest alone: the missing blocks are held by reservations, held KV or
      // the quarantine, which all end on their own; it keeps its blocks and waits.
      break;
    }
  }
}

void Scheduler::Preempt(Sequence* seq, std::vector<PreemptedSequence>* record) {
  RemoveFrom(&running_, seq);
  ++seq->num_preemptions;
  ++stats_.preemptions;
  PreemptionMode mode = config_.preemption_mode;
  if (mode == PreemptionMode::kSwap && kv_.SwapOut(&seq->block_table)) {
    seq->state = SequenceState::kSwapped;
    seq->num_registered_blocks = 0;  // host copies are private; re-register after swap-in
    InsertSorted(&swapped_, seq);
    ++stats_.swaps_out;
    ++stats_.preemptions_swap;
  } else {
    mode = PreemptionMode::kRecompute;
    kv_.Release(KvTier::kDevice, &seq->block_table);
    seq->num_computed_tokens = 0;
    seq->num_registered_blocks = 0;
    seq->state = SequenceState::kWaiting;
    InsertSorted(&waiting_[static_cast<int>(seq->params.priority)], seq);
    ++stats_.preemptions_recompute;
  }
  record->push_back({seq->params.id, mode});
}

Sequence* Scheduler::NextQueued() const {
  Sequence* next = nullptr;
  auto consider = [&next](Sequence* seq) {
    if (next == nullptr || Before(*seq, *next)) next = seq;
  };
  if (!swapped_.empty()) consider(swapped_.front());
  for (const auto& queue : waiting_) {
    if (!queue.empty()) consider(queue.front());
  }
  return next;
}

bool Scheduler::HasRoomFor(int blocks) const { return kv_.NumAvailableDeviceBlocks() - blocks >= NumBatchSlotsUsed(); }

void Scheduler::AdmitQueued(StepState* step, SchedulerOutput* out) {
  while (step->budget > 0 && NumBatchSlotsUsed() < config_.max_num_seqs) {
    Sequence* seq = NextQueued();
    if (seq == nullptr) return;
    const bool admitted = seq->state == SequenceState::kSwapped ? TryResume(seq, step, out) : TryAdmit(seq, step, out);
    if (!admitted) return;  // head of line waits: nothing overtakes it
  }
}

bool Scheduler::TryResume(Sequence* seq, StepState* step, SchedulerOutput* out) {
  const int n = NextChunk(*seq, *step);
  const int needed =
      std::max<int>(kv_.BlocksForTokens(seq->num_computed_tokens + n), static_cast<int>(seq->block_table.size()));
  if (!HasRoomFor(needed)) return false;
  TANDEM_CHECK(kv_.SwapIn(&seq->block_table));
  RemoveFrom(&swapped_, seq);
  seq->state = SequenceState::kRunning;
  InsertRunning(seq);
  ++stats_.swaps_in;
  TANDEM_CHECK(TrySchedule(seq, step, out)) << "blocks counted for swap-in vanished";
  return true;
}

int Scheduler::AcquireCachedPrefix(Sequence* seq) {
  const auto& cfg = kv_.config();
  if (!cfg.enable_prefix_caching || seq->NeedsPromptLogits()) return 0;
  // Leave at least one token to compute: its logits give the next token.
  const int max_blocks = (seq->num_tokens() - 1) / cfg.block_size;
  // Hash only as far as the chain hits (plus the first miss): a new prompt costs
  // one hash here; the rest are hashed as its chunks are computed.
  auto& hashes = seq->block_hashes;
  while (static_cast<int>(hashes.size()) < max_blocks) {
    if (!hashes.empty() && kv_.MatchPrefix(std::span(&hashes.back(), 1)) == 0) break;
    kv_cache::ExtendBlockHashes(seq->params.tenant_salt, cfg.model_id, cfg.block_size,
                                std::span<const TokenId>(seq->tokens).first((hashes.size() + 1) * cfg.block_size),
                                &hashes);
  }
  int hit = kv_.AcquirePrefix(seq->block_hashes, max_blocks, &seq->block_table);
  seq->num_computed_tokens = hit * cfg.block_size;
  seq->num_registered_blocks = hit;
  return hit;
}

bool Scheduler::TryAdmit(Sequence* seq, StepState* step, SchedulerOutput* out) {
  const int hit_tokens = AcquireCachedPrefix(seq) * kv_.config().block_size;
  const int n = NextChunk(*seq, *step);
  const int needed = kv_.BlocksForTokens(seq->num_computed_tokens + n) - static_cast<int>(seq->block_table.size());
  if (!HasRoomFor(needed) || !TrySchedule(seq, step, out)) {
    // Give the prefix back so it can be evicted meanwhile.
    kv_.Release(KvTier::kDevice, &seq->block_table);
    seq->num_computed_tokens = 0;
    seq->num_registered_blocks = 0;
    return false;
  }
  RemoveFrom(&waiting_[static_cast<int>(seq->params.priority)], seq);
  seq->state = SequenceState::kRunning;
  InsertRunning(seq);
  stats_.prefix_query_tokens += seq->num_tokens();
  stats_.prefix_hit_tokens += hit_tokens;
  if (!seq->admitted_once) {
    seq->admitted_once = true;
    seq->num_cached_prompt_tokens = std::min(hit_tokens, seq->num_prompt_tokens());
  }
  return true;
}

}  // namespace tandem::scheduler
