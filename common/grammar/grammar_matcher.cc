#include "common/grammar/grammar_matcher.h"

#include <algorithm>

#include "common/base/check.h"

namespace tandem::grammar {

GrammarMatcher::GrammarMatcher(std::shared_ptr<TokenGrammar> grammar, std::vector<TokenId> end_tokens)
    : grammar_(std::move(grammar)), end_tokens_(std::move(end_tokens)) {
  TANDEM_CHECK(grammar_ != nullptr) << "GrammarMatcher needs a TokenGrammar";
  state_ = InitialState(grammar_->grammar());
}

bool GrammarMatcher::IsEndToken(TokenId token) const {
  return std::find(end_tokens_.begin(), end_tokens_.end(), token) != end_tokens_.end();
}

bool GrammarMatcher::IsComplete() const { return CanEnd(grammar_->grammar(), state_); }

void GrammarMatcher::FillNextTokenMask(std::span<uint32_t> mask) {
  if (terminated_) {
    TANDEM_CHECK(mask.size() == static_cast<size_t>(MaskWords(grammar_->vocab().size()))) << "mask size";
    std::fill(mask.begin(), mask.end(), 0u);
    return;
  }
  grammar_->FillTextMask(state_, mask);
  const bool complete = IsComplete();
  const int vocab_size = grammar_->vocab().size();
  for (TokenId t : end_tokens_) {
    if (t < 0 || t >= vocab_size) continue;
    if (complete) {
      SetMaskBit(mask, t);
    } else {
      ClearMaskBit(mask, t);
    }
  }
}

Status GrammarMatcher::AcceptToken(TokenId token) {
  if (terminated_) return InvalidArgumentError("grammar: token after the end of the document");
  const TokenVocabulary& vocab = grammar_->vocab();
  if (token < 0 || token >= vocab.size()) {
    return InvalidArgumentError("grammar: token id " + std::to_string(token) + " outside the vocabulary");
  }
  if (IsEndToken(token)) {
    if (!IsComplete()) return InvalidArgumentError("grammar: end token before the document is complete");
    terminated_ = true;
    return Status::Ok();
  }
  if (!vocab.is_text(token)) {
    return InvalidArgumentError("grammar: special token " + std::to_string(token) + " is not document text");
  }
  const Grammar& g = grammar_->grammar();
  const ParseState* from = &state_;
  int k = 0;
  for (char c : vocab.token_bytes(token)) {  // text tokens have at least one byte
    Advance(g, *from, static_cast<uint8_t>(c), &scratch_[k]);
    if (scratch_[k].empty()) {
      return InvalidArgumentError("grammar: token " + std::to_string(token) + " does not fit the format here");
    }
    from = &scratch_[k];
    k ^= 1;
  }
  std::swap(state_, scratch_[k ^ 1]);
  return Status::Ok();
}

}  // namespace tandem::grammar
