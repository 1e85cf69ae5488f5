// Scheduler: requests, reservations, tokens, finishing. The step itself is in scheduler_step.cc.
#include "common/scheduler/scheduler.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "common/base/check.h"

namespace tandem::scheduler {

std::string_view FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kLeaseExpired: return "lease_expired";
    case FinishReason::kRejected: return "rejected";
    case FinishReason::kAborted: return "aborted";
  }
  return "unknown";
}

Scheduler::Scheduler(SchedulerConfig config, kv_cache::KvCacheConfig kv_config, const Clock& clock)
    : config_(config), kv_(std::move(kv_config)), clock_(clock) {
  TANDEM_CHECK_OK(config_.Validate());
  running_.reserve(static_cast<size_t>(config_.max_num_seqs) * 2);
}

Status Scheduler::Validate(const SequenceParams& p) const {
  if (seqs_.count(p.id) != 0 || held_.count(p.id) != 0) {
    return AlreadyExistsError(fmt::format("request {} already exists", p.id));
  }
  if (p.prompt_tokens.empty()) return InvalidArgumentError("empty prompt");
  if (p.prompt_logits && config_.max_prompt_logits_tokens == 0) {
    return InvalidArgumentError("prompt logprobs are off on this node (max_prompt_logits_tokens 0)");
  }
  if (p.max_tokens <= 0) {
    return InvalidArgumentError(fmt::format("max_tokens must be >= 1, got {}", p.max_tokens));
  }
  int64_t total = static_cast<int64_t>(p.prompt_tokens.size()) + p.max_tokens;
  if (total > config_.max_model_len) {
    return InvalidArgumentError(
        fmt::format("context_length_exceeded: {} prompt tokens + {} max_tokens > max_model_len {}",
                    p.prompt_tokens.size(), p.max_tokens, config_.max_model_len));
  }
  // The last generated token is never fed back, so total - 1 tokens need KV.
  const int blocks = kv_.BlocksForTokens(static_cast<int>(total - 1));
  const int pool = kv_.config().num_device_blocks;
  if (blocks > pool) {
    return InvalidArgumentError(
        fmt::format("{} prompt tokens + {} max_tokens need {} KV blocks of {} tokens, but the KV pool holds {} blocks "
                    "({} tokens): the request can never fit; lower max_tokens or shorten the prompt",
                    p.prompt_tokens.size(), p.max_tokens, blocks, kv_.config().block_size, pool,
                    static_cast<int64_t>(pool) * kv_.config().block_size));
  }
  return Status::Ok();
}

Sequence* Scheduler::NewSequence(SequenceParams params) {
  auto seq = std::make_unique<Sequence>();
  seq->tokens = params.prompt_tokens;
  seq->params = std::move(params);
  seq->arrival = next_arrival_++;
  Sequence* raw = seq.get();
  seqs_.emplace(raw->params.id, std::move(seq));
  return raw;
}

Status Scheduler::AddRequest(SequenceParams params) {
  Status st = Validate(params);
  if (st.ok() && static_cast<int>(waiting_[0].size() + waiting_[1].size()) >= config_.max_waiting_requests) {
    st = ResourceExhaustedError(fmt::format("waiting queue full ({} requests)", config_.max_waiting_requests));
  }
  if (!st.ok()) {
    ++stats_.rejected;
    return st;
  }
  Sequence* seq = NewSequence(std::move(params));
  waiting_[static_cast<int>(seq->params.priority)].push_back(seq);
  return Status::Ok();
}

StatusOr<Reservation> Scheduler::Reserve(SequenceParams params, int64_t lease_ms) {
  Status st = Validate(params);
  if (st.ok() && NumBatchSlotsUsed() >= config_.max_num_seqs) {
    st = ResourceExhaustedError("no batch slot for a reservation");
  }
  if (!st.ok()) {
    ++stats_.rejected;
    return st;
  }
  kv_.ReleaseQuarantine(clock_.NowNanos());
  Sequence* seq = NewSequence(std::move(params));
  const int prompt_len = seq->num_prompt_tokens();
  kv_cache::ExtendBlockHashes(seq->params.tenant_salt, kv_.config().model_id, kv_.config().block_size, seq->tokens,
                              &seq->block_hashes);
  // Every full prompt block may hit: the first token comes from the remote prefill.
  int hit = kv_.AcquirePrefix(seq->block_hashes, prompt_len / kv_.config().block_size, &seq->block_table);
  stats_.prefix_query_tokens += prompt_len;
  stats_.prefix_hit_tokens += static_cast<int64_t>(hit) * kv_.config().block_size;
  const int needed = kv_.BlocksForTokens(prompt_len) - static_cast<int>(seq->block_table.size());
  if (!HasRoomFor(needed) || !kv_.AllocateSlots(prompt_len, &seq->block_table)) {
    kv_.Release(kv_cache::KvTier::kDevice, &seq->block_table);
    seqs_.erase(seq->params.id);
    ++stats_.rejected;
    return ResourceExhaustedError(fmt::format("not enough free KV blocks to reserve {} tokens", prompt_len));
  }
  seq->num_cached_prompt_tokens = hit * kv_.config().block_size;
  seq->num_registered_blocks = hit;
  seq->first_remote_block = hit;
  seq->admitted_once = true;
  seq->state = SequenceState::kReserved;
  seq->lease_deadline = clock_.NowNanos() + MsToNanos(lease_ms > 0 ? lease_ms : config_.default_lease_ms);
  reserved_.push_back(seq);
  ++stats_.reservations_total;
  Reservation r;
  r.block_table = seq->block_table;
  r.num_cached_tokens = seq->num_cached_prompt_tokens;
  r.first_block_to_fill = hit;
  r.lease_deadline = seq->lease_deadline;
  r.copies = kv_.TakeCopies();
  return r;
}

StatusOr<std::optional<FinishReason>> Scheduler::CompleteReservation(RequestId id, TokenId first_token) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return NotFoundError(fmt::format("no request {}", id));
  Sequence* seq = it->second.get();
  if (seq->state != SequenceState::kReserved) {
    return FailedPreconditionError(fmt::format("request {} is not reserved", id));
  }
  RemoveFrom(&reserved_, seq);
  seq->num_computed_tokens = seq->num_prompt_tokens();
  seq->state = SequenceState::kRunning;
  InsertRunning(seq);
  seq->tokens.push_back(first_token);
  std::optional<FinishReason> reason = CheckStop(*seq, first_token);
  if (reason) {
    Finish(seq, *reason, Status::Ok(), /*step_done=*/true);
  } else if (const Sequence* next = NextQueued(); next != nullptr && Before(*next, *seq)) {
    // Older work waits for the batch: this one queues behind it, its prompt KV
    // swapped out or left in the prefix cache.
    RegisterComputedBlocks(seq, seq->num_computed_tokens);
    Preempt(seq, &pending_preempted_);
  }
  return reason;
}

Status Scheduler::Cancel(RequestId id) {
  if (ReleaseHeld(id).ok()) return Status::Ok();
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return NotFoundError(fmt::format("no request {}", id));
  ++stats_.cancelled;
  Finish(it->second.get(), FinishReason::kCancelled, CancelledError("cancelled"), /*step_done=*/false);
  return Status::Ok();
}

Status Scheduler::ReleaseHeld(RequestId id) {
  auto it = held_.find(id);
  if (it == held_.end()) return NotFoundError(fmt::format("request {} holds no KV", id));
  kv_.Release(kv_cache::KvTier::kDevice, &it->second);
  held_.erase(it);
  return Status::Ok();
}

const std::vector<BlockId>* Scheduler::HeldBlocks(RequestId id) const {
  auto it = held_.find(id);
  return it == held_.end() ? nullptr : &it->second;
}

StatusOr<std::optional<FinishReason>> Scheduler::AppendToken(RequestId id, TokenId token) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return NotFoundError(fmt::format("no request {}", id));
  Sequence* seq = it->second.get();
  if (seq->state != SequenceState::kRunning || seq->num_computed_tokens != seq->num_tokens()) {
    return FailedPreconditionError(fmt::format("request {} has no logits pending", id));
  }
  seq->tokens.push_back(token);
  std::optional<FinishReason> reason = CheckStop(*seq, token);
  if (reason) Finish(seq, *reason, Status::Ok(), /*step_done=*/true);
  return reason;
}

std::optional<FinishReason> Scheduler::CheckStop(const Sequence& seq, TokenId token) const {
  const auto& stops = seq.params.stop_token_ids;
  if (std::find(stops.begin(), stops.end(), token) != stops.end()) return FinishReason::kStop;
  if (seq.num_generated_tokens() >= seq.params.max_tokens || seq.num_tokens() >= config_.max_model_len) {
    return FinishReason::kLength;
  }
  return std::nullopt;
}

void Scheduler::Finish(Sequence* seq, FinishReason reason, Status status, bool step_done) {
  switch (seq->state) {
    case SequenceState::kWaiting: RemoveFrom(&waiting_[static_cast<int>(seq->params.priority)], seq); break;
    case SequenceState::kRunning: RemoveFrom(&running_, seq); break;
    case SequenceState::kSwapped: RemoveFrom(&swapped_, seq); break;
    case SequenceState::kReserved: RemoveFrom(&reserved_, seq); break;
  }
  if (seq->state == SequenceState::kSwapped) {
    kv_.Release(kv_cache::KvTier::kHost, &seq->block_table);
  } else {
    // A reservation's uncomputed blocks must not be registered: they hold no data.
    if (seq->state == SequenceState::kRunning) {
      int computed = seq->num_computed_tokens;
      if (!step_done && seq->last_scheduled_step == stats_.steps) computed -= seq->last_scheduled_tokens;
      RegisterComputedBlocks(seq, computed);
    }
    ReleaseDeviceBlocks(seq, reason);
  }
  if (reason == FinishReason::kStop || reason == FinishReason::kLength) ++stats_.finished;
  FinishedSequence f;
  f.id = seq->params.id;
  f.reason = reason;
  f.status = std::move(status);
  f.num_prompt_tokens = seq->num_prompt_tokens();
  f.num_generated_tokens = seq->num_generated_tokens();
  f.num_cached_prompt_tokens = seq->num_cached_prompt_tokens;
  pending_finished_.push_back(std::move(f));
  seqs_.erase(seq->params.id);
}

void Scheduler::ReleaseDeviceBlocks(Sequence* seq, FinishReason reason) {
  const bool normal = reason == FinishReason::kStop || reason == FinishReason::kLength;
  if (normal && seq->params.hold_kv_after_finish) {
    held_.emplace(seq->params.id, std::move(seq->block_table));
    seq->block_table.clear();
    return;
  }
  if (seq->state == SequenceState::kReserved && config_.reservation_quarantine_ms > 0) {
    // Cached prefix blocks were never written remotely; the rest may still be.
    std::vector<BlockId> remote(seq->block_table.begin() + seq->first_remote_block, seq->block_table.end());
    seq->block_table.resize(static_cast<size_t>(seq->first_remote_block));
    kv_.Quarantine(&remote, clock_.NowNanos() + MsToNanos(config_.reservation_quarantine_ms));
  }
  kv_.Release(kv_cache::KvTier::kDevice, &seq->block_table);
}

const Sequence* Scheduler::Find(RequestId id) const {
  auto it = seqs_.find(id);
  return it == seqs_.end() ? nullptr : it->second.get();
}

SchedulerCounters Scheduler::Counters() const {
  SchedulerCounters c = stats_;
  c.kv = kv_.Counters();
  c.num_waiting = static_cast<int64_t>(waiting_[0].size() + waiting_[1].size());
  c.num_running = static_cast<int64_t>(running_.size());
  c.num_swapped = static_cast<int64_t>(swapped_.size());
  c.reservations_active = static_cast<int64_t>(reserved_.size());
  c.num_held = static_cast<int64_t>(held_.size());
  c.num_quarantined_blocks = kv_.NumQuarantined();
  return c;
}

bool Scheduler::Before(const Sequence& a, const Sequence& b) {
  return a.params.priority != b.params.priority ? a.params.priority < b.params.priority : a.arrival < b.arrival;
}

void Scheduler::InsertSorted(std::vector<Sequence*>* queue, Sequence* seq) {
  auto before = [](const Sequence* a, const Sequence* b) { return Before(*a, *b); };
  queue->insert(std::upper_bound(queue->begin(), queue->end(), seq, before), seq);
}

void Scheduler::InsertRunning(Sequence* seq) { InsertSorted(&running_, seq); }

void Scheduler::RemoveFrom(std::vector<Sequence*>* queue, Sequence* seq) {
  auto it = std::find(queue->begin(), queue->end(), seq);
  TANDEM_CHECK(it != queue->end()) << "sequence " << seq->params.id << " missing from its queue";
  queue->erase(it);
}

}  // namespace tandem::scheduler
