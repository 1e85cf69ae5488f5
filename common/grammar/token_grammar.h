// TokenGrammar: a Grammar bound to one vocabulary, with the caches that make
// a token mask cheap: full masks by parse state (filled by a pruned walk of
// the vocabulary trie), and for open strings the shared per-vocabulary string
// tables plus, per state, the few tokens that close the string validly.
// Thread rule: engine thread only (the caches are unsynchronized).
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "common/grammar/byte_stepper.h"
#include "common/grammar/grammar.h"
#include "common/grammar/mask_lru.h"
#include "common/grammar/token_mask.h"
#include "common/grammar/token_vocabulary.h"

namespace tandem::grammar {

struct TokenGrammarOptions {
  // Most bytes of cached masks and token lists for this grammar (least recently used go first).
  // A 128K vocabulary's mask is 16 KiB; the default holds ~4000 of them.
  size_t max_cache_bytes = 64u << 20;
};

class TokenGrammar {
 public:
  static std::shared_ptr<TokenGrammar> Create(std::shared_ptr<const Grammar> grammar,
                                              std::shared_ptr<const TokenVocabulary> vocab,
                                              TokenGrammarOptions options = {});

  const Grammar& grammar() const { return *grammar_; }
  const TokenVocabulary& vocab() const { return *vocab_; }

  // Writes every word of `mask` (size MaskWords(vocab().size())): the text tokens whose bytes,
  // fed from `state`, keep the output a prefix of a valid document. Special tokens are clear.
  void FillTextMask(const ParseState& state, std::span<uint32_t> mask);

  // Bytes held by the caches.
  size_t CacheBytes() const { return cache_.bytes(); }

 private:
  TokenGrammar(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenVocabulary> vocab,
               TokenGrammarOptions options);

  void WalkTrie(const ParseState& state, std::span<uint32_t> mask);
  // Tokens of the trie subtree under `node`, whose first depth(node) bytes led to `state` (an open
  // string): the string DFA runs the rest, the stepper only what follows a closing quote.
  void WalkOpenStringSubtree(int node, const ParseState& state, const OpenString& open, std::span<uint32_t> mask);
  void FillOpenStringMask(const ParseState& state, const OpenString& open, std::span<uint32_t> mask);
  const std::vector<uint32_t>& InsideMask(uint8_t step, int max_chars);
  const std::vector<uint32_t>& ClosingTokens(const ParseState& state, const OpenString& open);

  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const TokenVocabulary> vocab_;
  MaskLru cache_;
  std::vector<ParseState> walk_states_;  // per trie depth, reused across walks
};

}  // namespace tandem::grammar
