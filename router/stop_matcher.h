// StopMatcher: finds stop strings in streamed text across token boundaries.
//
// Text goes in piece by piece; what comes out is safe to send. The first stop
// string to complete (the match that ends first; of two ending together, the
// longer) ends the output: before it, or with it when include_in_output (vLLM's
// include_stop_str_in_output). Without include_in_output a tail that could
// still turn out to be the start of a stop string is held back until the next
// piece decides; with it nothing needs holding back. No match may end in a
// piece added with can_stop false (min_tokens not reached yet), but one that
// starts there and completes later does (vLLM's rule; it holds back the same).
// Thread rule: one owner at a time.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tandem::router {

class StopMatcher {
 public:
  // REQUIRES: no empty stop string.
  explicit StopMatcher(std::vector<std::string> stop_strings, bool include_in_output = false);

  struct Output {
    std::string text;      // safe to emit now
    bool stopped = false;  // a stop string matched; nothing more is accepted
  };
  // Appends a piece of (valid UTF-8) text.
  Output Add(std::string_view text, bool can_stop = true);
  // End of stream: releases the held-back tail (no match is possible any more).
  std::string Finish();

  bool stopped() const { return stopped_; }

 private:
  // Appends emitted text to the search context (the last max_stop_bytes_ - 1 bytes).
  void Emitted(std::string_view text);

  std::vector<std::string> stop_strings_;
  bool include_in_output_;
  size_t max_stop_bytes_ = 0;
  std::string context_;     // tail of the emitted text: a match may start in it
  std::string pending_;     // held-back text; shorter than the longest stop string
  size_t unstoppable_ = 0;  // leading bytes of pending_ added with can_stop false
  bool stopped_ = false;
};

}  // namespace tandem::router
