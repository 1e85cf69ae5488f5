// RequestTable: the records a node keeps of the router's requests, keyed by
// request id, with what both roles share around them:
//   - epoch fencing: a request for an id that is already known is refused
//     unless its epoch is newer; a newer one waits until the node has ended the
//     older record (the caller ends it, then Erase runs the waiting retries);
//   - tombstones: a Cancel that found no record of its epoch makes the node
//     refuse that id at that epoch or older when it arrives (CancelTombstones);
//   - bounded retries: at most kMaxWaiting newer epochs wait behind one record.
// Entry is the role's record type (DecodeNode's request, PrefillNode's job);
// it must have an `Epoch epoch` member.
//
// Thread rule: not thread-safe; the role's mutex guards the table.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/base/clock.h"
#include "common/base/ids.h"
#include "common/base/status.h"
#include "common/node/cancel_tombstones.h"

namespace tandem::node {

template <typename Entry>
class RequestTable {
 public:
  static constexpr size_t kMaxWaiting = 4;

  using Map = std::map<uint64_t, Entry>;
  using iterator = typename Map::iterator;

  // What Admit decided.
  enum class Admission {
    kAdmitted,     // a new record exists now (`*entry` points at it)
    kRefused,      // `*refusal` says why (AlreadyExists, Cancelled, ResourceExhausted)
    kSuperseding,  // an older epoch holds the id: the caller must end it; `retry`
                   // runs once it is erased
  };

  // Admits (id, epoch): creates a record when the id is free and no cancel of
  // that epoch came first. `retry` is kept when an older epoch must end first.
  Admission Admit(uint64_t id, Epoch epoch, Nanos now, std::function<void()> retry, Entry** entry, Status* refusal) {
    if (tombstones_.Buried(id, epoch, now)) {
      *refusal = CancelledError("request " + std::to_string(id) + " epoch " + std::to_string(epoch) +
                                " was cancelled before it arrived");
      return Admission::kRefused;
    }
    auto it = entries_.find(id);
    if (it == entries_.end()) {
      Entry& e = entries_[id];
      e.epoch = epoch;
      *entry = &e;
      return Admission::kAdmitted;
    }
    Entry& old = it->second;
    if (epoch <= old.epoch) {
      *refusal = AlreadyExistsError("request " + std::to_string(id) + " epoch " + std::to_string(epoch) +
                                    " is not newer than " + std::to_string(old.epoch));
      return Admission::kRefused;
    }
    std::vector<std::function<void()>>& waiting = waiting_[id];
    if (waiting.size() >= kMaxWaiting) {
      *refusal = ResourceExhaustedError("too many superseding requests for " + std::to_string(id));
      return Admission::kRefused;
    }
    waiting.push_back(std::move(retry));
    *entry = &old;
    return Admission::kSuperseding;
  }

  // A Cancel of (id, epoch) arrived; epoch 0 means any epoch. Returns the record
  // it applies to, or nullptr (then a tombstone remembers it when the request
  // may still come).
  Entry* OnCancel(uint64_t id, Epoch epoch, Nanos now) {
    auto it = entries_.find(id);
    if (epoch != 0 && (it == entries_.end() || it->second.epoch < epoch)) tombstones_.Bury(id, epoch, now);
    if (it == entries_.end() || (epoch != 0 && it->second.epoch != epoch)) return nullptr;
    return &it->second;
  }

  // The record of `id` at `epoch`, or nullptr (unknown id, or another epoch).
  Entry* Find(uint64_t id, Epoch epoch) {
    auto it = entries_.find(id);
    return it == entries_.end() || it->second.epoch != epoch ? nullptr : &it->second;
  }
  Entry* Find(uint64_t id) {
    auto it = entries_.find(id);
    return it == entries_.end() ? nullptr : &it->second;
  }

  // Removes the record; returns the retries of newer epochs that waited for it
  // (the caller runs them after releasing its lock).
  std::vector<std::function<void()>> Erase(uint64_t id) {
    entries_.erase(id);
    std::vector<std::function<void()>> retries;
    if (auto w = waiting_.find(id); w != waiting_.end()) {
      retries = std::move(w->second);
      waiting_.erase(w);
    }
    return retries;
  }

  // The router connection is gone: the next router numbers its requests afresh.
  void ForgetCancels() { tombstones_.Clear(); }

  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  iterator begin() { return entries_.begin(); }
  iterator end() { return entries_.end(); }

 private:
  Map entries_;
  std::map<uint64_t, std::vector<std::function<void()>>> waiting_;
  CancelTombstones tombstones_;
};

}  // namespace tandem::node
