// ByteMatcher: a document parsed byte by byte against a Grammar, with no
// vocabulary. Tests and the brute-force mask check use it; GrammarMatcher is
// the token-level matcher the engine uses.
// Thread rule: one owner; the Grammar is shared and immutable.
#pragma once

#include <memory>
#include <string_view>

#include "common/grammar/byte_stepper.h"
#include "common/grammar/grammar.h"

namespace tandem::grammar {

class ByteMatcher {
 public:
  explicit ByteMatcher(std::shared_ptr<const Grammar> grammar);

  // Feeds all of `bytes`: true and advanced if they keep the output a prefix of a valid
  // document; false and unchanged otherwise.
  bool Accept(std::string_view bytes);
  // The bytes so far form a complete document.
  bool IsComplete() const;
  const ParseState& state() const { return state_; }

 private:
  std::shared_ptr<const Grammar> grammar_;
  ParseState state_;
  ParseState scratch_[2];
};

}  // namespace tandem::grammar
