// FakeEngine: a stand-in for the engine loop and model runner, for scheduler
// tests. It executes the step's block copies on a CpuKvTierStorage, and plays a
// "model" whose KV at position p is a rolling hash of (tenant salt, tokens[0..p])
// written into every layer's K and V slot. Before computing, it checks that every
// cached position of every scheduled sequence holds exactly the value it should,
// so a wrong prefix hit, a lost demotion or a bad swap shows up as a mismatch.
// The sampled token is a function of the last position's value ("greedy").
// Thread rule: single-threaded test helper.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <memory>
#include <vector>

#include "common/base/status.h"
#include "common/kv_cache/kv_tier_storage.h"
#include "common/scheduler/scheduler.h"

namespace tandem::scheduler::testing {

inline constexpr int kFakeVocab = 64;

class FakeEngine {
 public:
  // Storage sized from the scheduler's KV config. REQUIRES: sched outlives this.
  explicit FakeEngine(Scheduler* sched);

  // Schedule, copy, verify cached KV, write new KV, sample and append.
  // Appends the step's finished sequences to finished(). Errors on any mismatch.
  // `out` gets the step's output after the tokens are appended: the spans of a
  // sequence that finished may dangle then (use scheduled_blocks()).
  Status Step(SchedulerOutput* out = nullptr);
  // Scheduler::Reserve, then runs the reservation's copies at once (as the engine must).
  StatusOr<Reservation> Reserve(SequenceParams params, int64_t lease_ms);
  // Plays the remote prefill of a reservation: verifies the locally cached
  // prefix, writes the rest of the prompt's KV, then CompleteReservation.
  Status LandReservation(RequestId id, const Reservation& reservation);

  // Checks that device `table` holds the KV of `tokens` (tenant `salt`) at every position.
  Status VerifyBlocks(const std::string& salt, std::span<const TokenId> tokens, std::span<const BlockId> table) const;

  // Generated tokens per request, recorded as they are sampled.
  const std::map<RequestId, std::vector<TokenId>>& generated() const { return generated_; }
  const std::vector<FinishedSequence>& finished() const { return finished_; }
  uint64_t num_verified_positions() const { return num_verified_; }
  // Device blocks in the block tables of the last Step()'s scheduled sequences,
  // read while the scheduler's spans are valid (before any token is appended).
  const std::set<BlockId>& scheduled_blocks() const { return scheduled_; }

  // The expected KV value after `token` at any position, chained from `prev`.
  static uint64_t Mix(uint64_t prev, TokenId token);
  static uint64_t Seed(const std::string& salt);
  static TokenId SampleFrom(uint64_t value) { return static_cast<TokenId>((value >> 17) % kFakeVocab); }

 private:
  uint64_t ReadSlot(BlockId block, int slot, int layer, int kv) const;
  void WriteSlot(BlockId block, int slot, uint64_t value);
  // Walks positions [0, end): verifies those below `verify_end`, writes the rest.
  StatusOr<uint64_t> VerifyAndWrite(const Sequence& seq, std::span<const BlockId> table, int verify_end, int end);
  Status Append(RequestId id, TokenId token);

  Scheduler* sched_;
  std::unique_ptr<kv_cache::CpuKvTierStorage> storage_;
  std::map<RequestId, std::vector<TokenId>> generated_;
  std::vector<FinishedSequence> finished_;
  uint64_t num_verified_ = 0;
  std::set<BlockId> scheduled_;
};

}  // namespace tandem::scheduler::testing
