#include "router/stop_matcher.h"

#include <algorithm>

#include "common/base/check.h"

namespace tandem::router {

StopMatcher::StopMatcher(std::vector<std::string> stop_strings, bool include_in_output)
    : stop_strings_(std::move(stop_strings)), include_in_output_(include_in_output) {
  for (const std::string& s : stop_strings_) {
    TANDEM_CHECK(!s.empty()) << "empty stop string";
    max_stop_bytes_ = std::max(max_stop_bytes_, s.size());
  }
}

void StopMatcher::Emitted(std::string_view text) {
  context_.append(text);
  const size_t keep = max_stop_bytes_ > 0 ? max_stop_bytes_ - 1 : 0;
  if (context_.size() > keep) context_.erase(0, context_.size() - keep);
}

StopMatcher::Output StopMatcher::Add(std::string_view text, bool can_stop) {
  Output out;
  if (stopped_) {
    out.stopped = true;
    return out;
  }
  pending_.append(text);
  if (!can_stop) unstoppable_ = pending_.size();
  // The window holds the emitted context too: with include_in_output a match may
  // begin in text already sent. A match must end after everything that could not stop.
  const std::string window = context_ + pending_;
  const size_t base = context_.size();
  const size_t min_end = base + unstoppable_ + 1;
  size_t best_start = std::string::npos, best_end = std::string::npos;
  for (const std::string& stop : can_stop ? stop_strings_ : std::vector<std::string>{}) {
    const size_t from = min_end >= stop.size() ? min_end - stop.size() : 0;
    const size_t start = window.find(stop, from);
    if (start == std::string::npos) continue;
    const size_t end = start + stop.size();
    if (end < best_end || (end == best_end && start < best_start)) {
      best_start = start;
      best_end = end;
    }
  }
  if (best_end != std::string::npos) {
    const size_t cut = include_in_output_ ? best_end : std::max(best_start, base);
    out.text = window.substr(base, cut - base);
    out.stopped = true;
    stopped_ = true;
    pending_.clear();
    unstoppable_ = 0;
    return out;
  }
  // Hold back the pending part of the longest tail that is a proper prefix of a
  // stop string (nothing when the stop string is kept in the output anyway).
  size_t longest = 0;
  if (!include_in_output_) {
    for (const std::string& stop : stop_strings_) {
      const size_t max_len = std::min(stop.size() - 1, window.size());
      for (size_t len = max_len; len > longest; --len) {
        if (std::string_view(window).substr(window.size() - len) == std::string_view(stop).substr(0, len)) {
          longest = len;
          break;
        }
      }
    }
  }
  const size_t hold = std::min(longest, pending_.size());
  out.text = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  unstoppable_ -= std::min(unstoppable_, out.text.size());
  Emitted(out.text);
  return out;
}

std::string StopMatcher::Finish() {
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace tandem::router
