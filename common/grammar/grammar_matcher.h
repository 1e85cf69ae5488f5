// GrammarMatcher: one sequence's position in its grammar, at token level. Each
// decode step: FillNextTokenMask, sample under the mask, AcceptToken.
// Thread rule: engine thread only (it uses its TokenGrammar's caches).
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "common/base/ids.h"
#include "common/base/status.h"
#include "common/grammar/byte_stepper.h"
#include "common/grammar/token_grammar.h"
#include "common/grammar/token_mask.h"

namespace tandem::grammar {

class GrammarMatcher {
 public:
  // end_tokens: the ids that end generation (the model's eos ids + the request's
  // stop_token_ids); they are allowed exactly when the output is a complete document, and are
  // never taken as text even if they have bytes.
  GrammarMatcher(std::shared_ptr<TokenGrammar> grammar, std::vector<TokenId> end_tokens);

  // Writes every word of `mask` (size MaskWords(vocab size)): the text tokens that keep the
  // output a prefix of some valid document, plus the end tokens iff the output already is a
  // complete valid document. All clear once terminated.
  void FillNextTokenMask(std::span<uint32_t> mask);
  // Advances by `token`. InvalidArgument, matcher unchanged, if the mask would not allow it.
  // After an end token the matcher is terminated (every later token refused).
  Status AcceptToken(TokenId token);

  bool IsComplete() const;  // the output so far is a complete valid document
  bool IsTerminated() const { return terminated_; }
  const ParseState& state() const { return state_; }

 private:
  bool IsEndToken(TokenId token) const;

  std::shared_ptr<TokenGrammar> grammar_;
  std::vector<TokenId> end_tokens_;
  ParseState state_;
  ParseState scratch_[2];
  bool terminated_ = false;
};

}  // namespace tandem::grammar
