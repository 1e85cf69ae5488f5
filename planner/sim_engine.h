// SimEngine: one simulated node's engine for the planner's discrete-event
// simulation, mirroring common/scheduler's policy step for step: a token budget
// per step (max_num_batched_tokens), running sequences first in arrival order
// (a decode takes one token, a prompt a chunk of at most max_prefill_chunk_tokens),
// then queued ones (swapped, waiting) in arrival order while a batch slot
// (max_num_seqs, reservations included) and KV blocks are left — a new one only
// while a block per batch slot stays free, head of line blocking; a sequence
// that needs a block when none is free preempts the newest running one (swap:
// its blocks free, it resumes first). Swap copies and the host tier are not
// timed. A step's time is the CostModel's; tokens appear at the step's end.
// Thread rule: single-threaded (the simulator's loop).
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "planner/cost_model.h"

namespace tandem::planner {

enum class SimRole { kPrefill, kDecode, kColocated };

// What one finished step produced.
struct StepOutcome {
  std::vector<int> first_tokens;  // requests whose prompt completed (their first token)
  std::vector<int> finished;      // requests that produced their last token
  int sampled = 0;                // tokens sampled (one per sequence that completed its tokens)
  bool released = false;          // blocks or slots came free
};

class SimEngine {
 public:
  SimEngine(SimRole role, const NodeLimits& limits, const CostModel& cost) : role_(role), limits_(limits), cost_(cost) {
    free_blocks_ = limits.num_device_blocks;
  }

  // A prompt to compute (prefill, colocated): `cached` of its `prompt` tokens are
  // a prefix-cache hit; it stops after `output` tokens (1 on a prefill node,
  // whose blocks stay held until ReleaseHeld).
  void Submit(int request, int prompt, int cached, int output);
  // Decode: a reservation of a slot and the prompt's blocks, as the router's Reserve;
  // false when the scheduler has no room (no slot, or blocks below the watermark).
  bool Reserve(int request, int prompt, int output);
  // Decode: the reserved request's KV landed with its first token; it joins the batch.
  // Returns true when it is already finished (one output token).
  bool Activate(int request);
  // Prefill: frees the blocks a finished prompt held for its transfer.
  void ReleaseHeld(int request);

  // Composes the next step; its duration, or nullopt when nothing can run now.
  std::optional<double> BeginStep();
  // Applies the step begun last.
  StepOutcome EndStep();

  bool busy() const { return busy_; }
  // Placement's view (router/cluster/placement.cc): free blocks, load, queued prompt tokens.
  int64_t free_blocks() const { return free_blocks_; }
  int load() const { return static_cast<int>(running_.size() + queued_.size()) + num_reserved_; }
  int64_t queued_prompt_tokens() const { return queued_prompt_tokens_; }

 private:
  struct Seq {
    int request = 0;
    int prompt = 0;
    int tokens = 0;    // prompt + sampled so far
    int computed = 0;  // tokens whose KV is computed
    int output = 0;    // tokens to produce
    int blocks = 0;    // device blocks held
  };
  struct Scheduled {
    int seq;
    int start;
    int n;
  };
  int BlocksFor(int tokens) const { return (tokens + limits_.block_size - 1) / limits_.block_size; }
  int SlotsUsed() const { return static_cast<int>(running_.size()) + num_reserved_; }
  bool HasRoomFor(int blocks) const { return free_blocks_ - blocks >= SlotsUsed(); }
  int NextChunk(const Seq& s, int budget) const;
  bool ScheduleRunning(int* budget);
  void AdmitQueued(int* budget);
  void Schedule(int seq, int n, int* budget);
  void Preempt(int running_index);
  int NewSeq(int request, int prompt, int output);
  template <typename List>
  void InsertByArrival(List* list, int seq);
  void FreeSeq(int seq);

  SimRole role_;
  NodeLimits limits_;
  const CostModel& cost_;
  int64_t free_blocks_ = 0;
  int num_reserved_ = 0;
  int64_t queued_prompt_tokens_ = 0;
  bool busy_ = false;
  std::vector<Seq> seqs_;              // by slot; free slots are reused
  std::vector<int> free_seq_slots_;
  std::vector<int> by_request_;        // request -> seq slot (-1: none here)
  std::vector<int> running_;           // seq slots in arrival (request) order
  std::deque<int> queued_;             // waiting and swapped, in arrival order
  std::vector<Scheduled> step_;
};

}  // namespace tandem::planner
