#include "common/grammar/byte_matcher.h"

namespace tandem::grammar {

ByteMatcher::ByteMatcher(std::shared_ptr<const Grammar> grammar)
    : grammar_(std::move(grammar)), state_(InitialState(*grammar_)) {}

bool ByteMatcher::Accept(std::string_view bytes) {
  const ParseState* from = &state_;
  int k = 0;
  for (char c : bytes) {
    Advance(*grammar_, *from, static_cast<uint8_t>(c), &scratch_[k]);
    if (scratch_[k].empty()) return false;
    from = &scratch_[k];
    k ^= 1;
  }
  if (from != &state_) state_ = *from;
  return true;
}

bool ByteMatcher::IsComplete() const { return CanEnd(*grammar_, state_); }

}  // namespace tandem::grammar
