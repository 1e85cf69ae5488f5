#include "common/base/log_limiter.h"

namespace tandem {

LogLimiter::LogLimiter(const Clock& clock, int64_t interval_ms, size_t max_keys)
    : clock_(clock), interval_(MsToNanos(interval_ms)), max_keys_(max_keys) {}

bool LogLimiter::Allow(std::string_view key, int64_t* suppressed) {
  const Nanos now = clock_.NowNanos();
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(std::string(key));
  if (it != entries_.end()) {
    Entry& e = it->second;
    if (now - e.logged_at < interval_) {
      ++e.suppressed;
      return false;
    }
    *suppressed = e.suppressed;
    e = Entry{now, 0};
    return true;
  }
  if (entries_.size() >= max_keys_) {
    for (auto old = entries_.begin(); old != entries_.end();) {
      old = now - old->second.logged_at >= interval_ ? entries_.erase(old) : std::next(old);
    }
  }
  if (entries_.size() < max_keys_) entries_.emplace(std::string(key), Entry{now, 0});
  *suppressed = 0;
  return true;
}

std::string SuppressedNote(int64_t suppressed) {
  if (suppressed <= 0) return "";
  return " (" + std::to_string(suppressed) + " more since the last report)";
}

}  // namespace tandem
