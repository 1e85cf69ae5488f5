// GrammarCache: TokenGrammars by spec string for one vocabulary, so requests
// with the same response_format share compiled grammars and mask caches.
// Bounded: least recently used grammars go first when there are more than
// max_grammars or their caches hold more than max_total_bytes. A grammar
// evicted while sequences use it lives on in their shared_ptrs.
// Thread rule: engine thread only.
#pragma once

#include <list>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "common/base/status.h"
#include "common/grammar/token_grammar.h"
#include "common/grammar/token_vocabulary.h"

namespace tandem::grammar {

struct GrammarCacheOptions {
  // Most grammars kept.
  int max_grammars = 64;
  // Most bytes of mask caches over all kept grammars (checked on each Get).
  size_t max_total_bytes = 512u << 20;
  // Per-grammar cache bound (see TokenGrammarOptions).
  TokenGrammarOptions token_grammar;

  Status Validate() const;
};

class GrammarCache {
 public:
  // REQUIRES: vocab != nullptr and options.Validate().ok().
  explicit GrammarCache(std::shared_ptr<const TokenVocabulary> vocab, GrammarCacheOptions options = {});

  // The TokenGrammar for `spec_json`, compiled on a miss; Grammar::Compile's errors.
  StatusOr<std::shared_ptr<TokenGrammar>> Get(std::string_view spec_json);

  int size() const { return static_cast<int>(entries_.size()); }
  // Bytes of the kept grammars' caches.
  size_t TotalBytes() const;
  const TokenVocabulary& vocab() const { return *vocab_; }

 private:
  struct Entry {
    std::string spec;
    std::shared_ptr<TokenGrammar> grammar;
  };
  void Evict();

  std::shared_ptr<const TokenVocabulary> vocab_;
  GrammarCacheOptions options_;
  std::list<Entry> entries_;  // most recently used first
  std::unordered_map<std::string_view, std::list<Entry>::iterator> index_;  // views into entries_' specs
};

}  // namespace tandem::grammar
