#include "planner/sim_engine.h"

#include <algorithm>

#include "common/base/check.h"

namespace tandem::planner {

int SimEngine::NewSeq(int request, int prompt, int output) {
  int slot;
  if (!free_seq_slots_.empty()) {
    slot = free_seq_slots_.back();
    free_seq_slots_.pop_back();
  } else {
    slot = static_cast<int>(seqs_.size());
    seqs_.emplace_back();
  }
  seqs_[static_cast<size_t>(slot)] = {.request = request, .prompt = prompt, .tokens = prompt, .computed = 0,
                                      .output = output, .blocks = 0};
  if (static_cast<int>(by_request_.size()) <= request) by_request_.resize(static_cast<size_t>(request) + 1, -1);
  by_request_[static_cast<size_t>(request)] = slot;
  return slot;
}

void SimEngine::FreeSeq(int seq) {
  Seq& s = seqs_[static_cast<size_t>(seq)];
  free_blocks_ += s.blocks;
  s.blocks = 0;
  by_request_[static_cast<size_t>(s.request)] = -1;
  free_seq_slots_.push_back(seq);
}

template <typename List>
void SimEngine::InsertByArrival(List* list, int seq) {
  const int request = seqs_[static_cast<size_t>(seq)].request;
  auto it = std::lower_bound(list->begin(), list->end(), request,
                             [this](int a, int r) { return seqs_[static_cast<size_t>(a)].request < r; });
  list->insert(it, seq);
}

void SimEngine::Submit(int request, int prompt, int cached, int output) {
  const int seq = NewSeq(request, prompt, output);
  seqs_[static_cast<size_t>(seq)].computed = cached;
  queued_prompt_tokens_ += prompt - cached;
  InsertByArrival(&queued_, seq);
}

bool SimEngine::Reserve(int request, int prompt, int output) {
  const int blocks = BlocksFor(prompt);
  if (SlotsUsed() >= limits_.max_num_seqs || !HasRoomFor(blocks)) return false;
  const int seq = NewSeq(request, prompt, output);
  seqs_[static_cast<size_t>(seq)].blocks = blocks;
  free_blocks_ -= blocks;
  ++num_reserved_;
  return true;
}

bool SimEngine::Activate(int request) {
  const int seq = by_request_[static_cast<size_t>(request)];
  TANDEM_CHECK(seq >= 0) << "no reservation for request " << request;
  Seq& s = seqs_[static_cast<size_t>(seq)];
  --num_reserved_;
  s.computed = s.prompt;
  s.tokens = s.prompt + 1;  // the first token came with the KV
  if (s.output <= 1) {
    FreeSeq(seq);
    return true;
  }
  InsertByArrival(&running_, seq);
  return false;
}

void SimEngine::ReleaseHeld(int request) {
  const int seq = by_request_[static_cast<size_t>(request)];
  TANDEM_CHECK(seq >= 0) << "request " << request << " holds nothing";
  FreeSeq(seq);
}

int SimEngine::NextChunk(const Seq& s, int budget) const {
  int n = std::min(s.tokens - s.computed, budget);
  if (n > 1) n = std::min(n, limits_.max_prefill_chunk_tokens);
  return n;
}

void SimEngine::Schedule(int seq, int n, int* budget) {
  Seq& s = seqs_[static_cast<size_t>(seq)];
  const int needed = BlocksFor(s.computed + n) - s.blocks;
  if (needed > 0) {
    free_blocks_ -= needed;
    s.blocks += needed;
  }
  step_.push_back({seq, s.computed, n});
  *budget -= n;
}

void SimEngine::Preempt(int running_index) {
  const int seq = running_[static_cast<size_t>(running_index)];
  running_.erase(running_.begin() + running_index);
  Seq& s = seqs_[static_cast<size_t>(seq)];
  free_blocks_ += s.blocks;  // swapped out: the KV waits on the host
  s.blocks = 0;
  InsertByArrival(&queued_, seq);
}

// Returns whether a preemption happened (then nothing is admitted this step).
bool SimEngine::ScheduleRunning(int* budget) {
  bool preempted = false;
  for (int i = 0; i < static_cast<int>(running_.size()) && *budget > 0; ++i) {
    const int seq = running_[static_cast<size_t>(i)];
    const Seq& s = seqs_[static_cast<size_t>(seq)];
    const int n = NextChunk(s, *budget);
    if (n <= 0) continue;
    while (true) {
      if (BlocksFor(s.computed + n) - s.blocks <= free_blocks_) {
        Schedule(seq, n, budget);
        break;
      }
      const int last = static_cast<int>(running_.size()) - 1;
      if (last > i) {
        Preempt(last);
        preempted = true;
        continue;
      }
      if (i > 0) {
        Preempt(i);
        preempted = true;
        --i;
      }
      break;  // the oldest alone: it keeps its blocks and waits for some to come free
    }
  }
  return preempted;
}

void SimEngine::AdmitQueued(int* budget) {
  while (*budget > 0 && SlotsUsed() < limits_.max_num_seqs && !queued_.empty()) {
    const int seq = queued_.front();
    const Seq& s = seqs_[static_cast<size_t>(seq)];
    const int n = NextChunk(s, *budget);
    const int needed = BlocksFor(s.computed + n) - s.blocks;
    if (!HasRoomFor(needed)) return;  // head of line waits
    queued_.pop_front();
    InsertByArrival(&running_, seq);
    Schedule(seq, n, budget);
  }
}

std::optional<double> SimEngine::BeginStep() {
  TANDEM_CHECK(!busy_);
  step_.clear();
  int budget = limits_.max_num_batched_tokens;
  if (!ScheduleRunning(&budget)) AdmitQueued(&budget);
  if (step_.empty()) return std::nullopt;
  double batch = 0, kv_tokens = 0, prefill_tokens = 0, pairs = 0;
  for (const Scheduled& sc : step_) {
    const Seq& s = seqs_[static_cast<size_t>(sc.seq)];
    if (sc.n == 1 && sc.start >= s.prompt) {
      batch += 1;
      kv_tokens += sc.start + 1;
    } else {
      prefill_tokens += sc.n;
      pairs += AttentionPairs(sc.start, sc.n);
    }
  }
  busy_ = true;
  if (role_ == SimRole::kPrefill) return cost_.PrefillStepSeconds(prefill_tokens, pairs);
  return cost_.MixedStepSeconds(batch, kv_tokens, prefill_tokens, pairs);
}

StepOutcome SimEngine::EndStep() {
  TANDEM_CHECK(busy_);
  busy_ = false;
  StepOutcome out;
  for (const Scheduled& sc : step_) {
    Seq& s = seqs_[static_cast<size_t>(sc.seq)];
    if (sc.start < s.prompt) queued_prompt_tokens_ -= std::min(sc.n, s.prompt - sc.start);
    s.computed += sc.n;
    if (s.computed < s.tokens) continue;  // a chunk short of the prompt's end
    ++s.tokens;                           // sampled
    ++out.sampled;
    const int produced = s.tokens - s.prompt;
    if (produced == 1) out.first_tokens.push_back(s.request);
    if (produced < s.output) continue;
    out.finished.push_back(s.request);
    running_.erase(std::find(running_.begin(), running_.end(), sc.seq));
    // A prefill node holds the blocks for the transfer (hold_kv_after_finish) until ReleaseHeld.
    if (role_ != SimRole::kPrefill) FreeSeq(sc.seq);
    out.released = true;
  }
  return out;
}

}  // namespace tandem::planner
