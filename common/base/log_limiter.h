// LogLimiter: keeps a message that recurs (a peer refused again and again) from
// flooding the log. Per key (e.g. the peer and the reason), the first occurrence
// is logged, then at most one per interval, which reports how many occurrences
// were not logged since the last one that was (SuppressedNote).
// Memory is bounded: at most max_keys keys are tracked; when full, keys whose
// interval has passed are forgotten (with their counts), and a key that still finds no room is
// logged untracked (never lost).
// Thread rule: thread-safe (one mutex).
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "common/base/clock.h"

namespace tandem {

// How often a recurring refusal is logged again, by default.
inline constexpr int64_t kRefusalLogIntervalMs = 10'000;

class LogLimiter {
 public:
  explicit LogLimiter(const Clock& clock = Clock::Real(), int64_t interval_ms = kRefusalLogIntervalMs,
                      size_t max_keys = 1024);

  // True when the occurrence of `key` now is to be logged; then *suppressed is the
  // number of occurrences of `key` that were not logged since the last one that was.
  bool Allow(std::string_view key, int64_t* suppressed);

 private:
  struct Entry {
    Nanos logged_at = 0;
    int64_t suppressed = 0;
  };

  const Clock& clock_;
  const Nanos interval_;
  const size_t max_keys_;
  std::mutex mu_;
  std::unordered_map<std::string, Entry> entries_;  // guarded by mu_
};

// " (N more since the last report)" for suppressed > 0, else "": appended to a limited message.
std::string SuppressedNote(int64_t suppressed);

}  // namespace tandem
