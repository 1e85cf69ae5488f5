// StopMatcher: finds stop strings in streamed text across token boundaries.
//
// Text goes in piece by piece; what comes out is safe to send: the text before
// the first stop string (never the stop string itself), minus any tail that
// could still turn out to be the start of a stop string (held back until the
// next piece decides). Thread rule: one owner at a time.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tandem::router {

class StopMatcher {
 public:
  // REQUIRES: no empty stop string.
  explicit StopMatcher(std::vector<std::string> stop_strings);

  struct Output {
    std::string text;      // safe to emit now
    bool stopped = false;  // a stop string matched; nothing more is accepted
  };
  // Appends a piece of (valid UTF-8) text.
  Output Add(std::string_view text);
  // End of stream: releases the held-back tail (no match is possible any more).
  std::string Finish();

  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stop_strings_;
  std::string pending_;  // held-back tail; shorter than the longest stop string
  bool stopped_ = false;
};

}  // namespace tandem::router
