// Scheduler: continuous batching over a two-tier paged KV cache.
//
// Each Schedule() step: expire reservation leases, end due quarantines,
// register newly computed full blocks in the prefix cache, then fill a token
// budget in this order:
//   1. running sequences, oldest first by (priority class, arrival): a decode
//      token or the next prefill chunk. When blocks run out, the running
//      sequence last in that order is preempted: swapped to the host tier, or
//      recomputed when the host tier has no room (or with kRecompute); when it
//      is the one short of blocks itself, it gives way; the first one never
//      does (the blocks it lacks are held by reservations, held KV or the
//      quarantine, which all end on their own) and waits.
//   2. queued sequences, swapped or waiting, strictly by (priority class,
//      arrival): a preempted sequence keeps its arrival, so it comes back
//      before anything newer of its class. Head of line: when the first one
//      does not fit, nothing behind it goes. A sequence is taken only when the
//      device keeps one block per batch slot in use free afterwards (room for
//      the running sequences to grow); skipped in a step that had to preempt.
// Reservations (KV computed on another node) take prompt blocks whenever there
// is room, not in queue order (the remote prefill needs its target now); a
// completed one that a queued sequence precedes queues behind it at once, so
// reservations only borrow blocks while their KV is in flight.
// Progress: the first sequence in that order is never preempted while another
// runs, nothing later enters the batch before it, and it fits alone
// (AddRequest and Reserve refuse what cannot), so it finishes; then the next
// one is first. Preemption is never a reason to end a request.
// Reservations hold device blocks for KV computed elsewhere until
// CompleteReservation, Cancel, or the lease deadline (Clock). One that ends
// without CompleteReservation quarantines the blocks the other node writes for
// reservation_quarantine_ms (a one-sided write cannot be recalled).
// Held KV: a sequence with hold_kv_after_finish that finishes normally keeps
// its device blocks referenced (no batch slot) until ReleaseHeld or Cancel.
//
// Engine contract: call Schedule(), run the output's copies and forward, call
// AppendToken for every needs_logits entry, then Schedule() again. Tokens are
// counted as computed when scheduled.
// Thread rule: not thread-safe; engine thread only (other threads post events).
#pragma once

#include <deque>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "common/base/clock.h"
#include "common/base/status.h"
#include "common/kv_cache/kv_cache_manager.h"
#include "common/scheduler/scheduler_config.h"
#include "common/scheduler/scheduler_output.h"
#include "common/scheduler/sequence.h"

namespace tandem::scheduler {

// Blocks held for an incoming remote prefill.
struct Reservation {
  std::vector<BlockId> block_table;  // device blocks for the whole prompt
  int num_cached_tokens = 0;         // leading prompt tokens already present locally
  int first_block_to_fill = 0;       // blocks [first_block_to_fill, end) need remote data
  Nanos lease_deadline = 0;
  // Copies the engine must run before anything is written into block_table
  // (demotions of the blocks it reuses, promotions of host-tier prefix hits).
  std::vector<kv_cache::BlockCopy> copies;
};

class Scheduler {
 public:
  // REQUIRES: both configs valid and block sizes equal. `clock` outlives this.
  Scheduler(SchedulerConfig config, kv_cache::KvCacheConfig kv_config, const Clock& clock);

  // Queues a request. Errors (nothing kept): InvalidArgument for a malformed
  // request, one longer than max_model_len, or one whose prompt + max_tokens
  // can never fit the device tier; ResourceExhausted when the waiting queue is
  // full; AlreadyExists.
  Status AddRequest(SequenceParams params);
  // Holds device blocks for the whole prompt now, reusing cached prefix blocks,
  // for KV that another node will write; lease_ms <= 0 means the default.
  // Validated like AddRequest (same InvalidArgument cases); ResourceExhausted
  // (try again later) when the blocks (leaving the growth room of step 2) or a
  // batch slot are not there now. A reservation only borrows blocks for the
  // prompt's KV in flight; it does not wait behind queued work (the caller
  // would have nowhere to wait), CompleteReservation keeps the order.
  // The engine runs the returned copies before handing out the block ids.
  StatusOr<Reservation> Reserve(SequenceParams params, int64_t lease_ms);
  // The reserved KV has landed and the remote prefill sampled `first_token`:
  // the sequence joins the running batch, or, when a queued sequence comes
  // before it in (priority, arrival) order, the queue (it is preempted at once:
  // swapped, or recomputed from its cached prompt blocks). Returns the finish
  // reason if that token already ends it. NotFound / FailedPrecondition (not reserved).
  StatusOr<std::optional<FinishReason>> CompleteReservation(RequestId id, TokenId first_token);
  // Ends a request in any phase and frees all its blocks (a reservation's
  // remotely written ones after the quarantine); on a held sequence, releases
  // its blocks (no second finish record). NotFound if unknown.
  Status Cancel(RequestId id);
  // Drops the blocks a finished hold_kv_after_finish sequence still holds.
  // NotFound unless `id` is held.
  Status ReleaseHeld(RequestId id);
  // The device blocks held for a finished sequence (its whole block table), or nullptr.
  const std::vector<BlockId>* HeldBlocks(RequestId id) const;

  // One scheduling step (see the class comment).
  SchedulerOutput Schedule();
  // Records the token sampled for a needs_logits entry of the last step.
  // Returns the finish reason when the sequence ended (its blocks are then
  // released, full ones kept in the prefix cache). FailedPrecondition when the
  // sequence had no logits pending.
  StatusOr<std::optional<FinishReason>> AppendToken(RequestId id, TokenId token);

  // The live sequence with this id, or nullptr.
  const Sequence* Find(RequestId id) const;
  SchedulerCounters Counters() const;
  const kv_cache::KvCacheManager& kv() const { return kv_; }
  const SchedulerConfig& config() const { return config_; }

 private:
  struct StepState;
  Status Validate(const SequenceParams& params) const;
  Sequence* NewSequence(SequenceParams params);
  void ExpireLeases(SchedulerOutput* out);
  // Publishes the full blocks among the first `num_tokens` computed tokens.
  void RegisterComputedBlocks(Sequence* seq, int num_tokens);
  void ScheduleRunning(StepState* step, SchedulerOutput* out);
  // Step 2: resumes and admits queued sequences in order while they fit.
  void AdmitQueued(StepState* step, SchedulerOutput* out);
  // The queued (swapped or waiting) sequence that goes next, or nullptr.
  Sequence* NextQueued() const;
  // Swaps in / admits `seq` and schedules its next chunk; false (no change) when it does not fit.
  bool TryResume(Sequence* seq, StepState* step, SchedulerOutput* out);
  bool TryAdmit(Sequence* seq, StepState* step, SchedulerOutput* out);
  // Whether `blocks` more device blocks can be taken while one block per batch slot in use stays available.
  bool HasRoomFor(int blocks) const;
  // Tokens of `seq` to compute next within the step's budgets (a prefill chunk or 1).
  int NextChunk(const Sequence& seq, const StepState& step) const;
  // Allocates and emits the next chunk of `seq`; false when blocks are short.
  bool TrySchedule(Sequence* seq, StepState* step, SchedulerOutput* out);
  int AcquireCachedPrefix(Sequence* seq);
  // Moves running `seq` out of the batch: to the host tier, or back to waiting
  // (recompute). Appends what happened to `record`.
  void Preempt(Sequence* seq, std::vector<PreemptedSequence>* record);
  // Scheduling order: priority class, then arrival.
  static bool Before(const Sequence& a, const Sequence& b);
  void InsertRunning(Sequence* seq);
  // Running plus reserved: reserved sequences join the batch without admission.
  int NumBatchSlotsUsed() const { return static_cast<int>(running_.size() + reserved_.size()); }
  void InsertSorted(std::vector<Sequence*>* queue, Sequence* seq);
  void RemoveFrom(std::vector<Sequence*>* queue, Sequence* seq);
  std::optional<FinishReason> CheckStop(const Sequence& seq, TokenId token) const;
  // Gives back the device blocks of `seq` as its end requires: held, quarantined
  // in part (an abandoned reservation), or released.
  void ReleaseDeviceBlocks(Sequence* seq, FinishReason reason);
  // Ends `seq`. step_done: its last scheduled tokens are known to be computed
  // (AppendToken); otherwise they are not published to the prefix cache.
  void Finish(Sequence* seq, FinishReason reason, Status status, bool step_done);

  SchedulerConfig config_;
  kv_cache::KvCacheManager kv_;
  const Clock& clock_;
  std::unordered_map<RequestId, std::unique_ptr<Sequence>> seqs_;
  std::vector<Sequence*> waiting_[kNumPriorities];  // by arrival
  std::vector<Sequence*> running_;                  // by (priority, arrival)
  std::vector<Sequence*> swapped_;                  // by (priority, arrival)
  std::vector<Sequence*> reserved_;
  // Finished hold_kv_after_finish sequences: id -> device block table (one reference each).
  std::unordered_map<RequestId, std::vector<BlockId>> held_;
  std::vector<FinishedSequence> pending_finished_;
  std::vector<PreemptedSequence> pending_preempted_;  // outside Schedule (CompleteReservation)
  uint64_t next_arrival_ = 0;
  SchedulerCounters stats_;
};

}  // namespace tandem::scheduler
