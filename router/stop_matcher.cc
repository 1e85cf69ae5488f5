#include "router/stop_matcher.h"

#include <algorithm>

#include "common/base/check.h"

namespace tandem::router {

StopMatcher::StopMatcher(std::vector<std::string> stop_strings) : stop_strings_(std::move(stop_strings)) {
  for (const std::string& s : stop_strings_) TANDEM_CHECK(!s.empty()) << "empty stop string";
}

StopMatcher::Output StopMatcher::Add(std::string_view text) {
  Output out;
  if (stopped_) {
    out.stopped = true;
    return out;
  }
  pending_.append(text);
  // Earliest full match wins; no match can start in text already emitted,
  // because every possible start was held back.
  size_t first = std::string::npos;
  for (const std::string& stop : stop_strings_) {
    first = std::min(first, pending_.find(stop));
  }
  if (first != std::string::npos) {
    out.text = pending_.substr(0, first);
    out.stopped = true;
    stopped_ = true;
    pending_.clear();
    return out;
  }
  // Hold back the longest tail that is a proper prefix of some stop string.
  size_t hold = 0;
  for (const std::string& stop : stop_strings_) {
    const size_t max_len = std::min(stop.size() - 1, pending_.size());
    for (size_t len = max_len; len > hold; --len) {
      if (std::string_view(pending_).substr(pending_.size() - len) == std::string_view(stop).substr(0, len)) {
        hold = len;
        break;
      }
    }
  }
  out.text = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string StopMatcher::Finish() {
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace tandem::router
