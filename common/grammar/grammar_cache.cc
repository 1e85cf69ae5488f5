#include "common/grammar/grammar_cache.h"

#include "common/base/check.h"

namespace tandem::grammar {

Status GrammarCacheOptions::Validate() const {
  if (max_grammars < 1) return InvalidArgumentError("grammar cache: max_grammars must be at least 1");
  if (token_grammar.max_cache_bytes == 0) return InvalidArgumentError("grammar cache: max_cache_bytes must be > 0");
  return Status::Ok();
}

GrammarCache::GrammarCache(std::shared_ptr<const TokenVocabulary> vocab, GrammarCacheOptions options)
    : vocab_(std::move(vocab)), options_(options) {
  TANDEM_CHECK(vocab_ != nullptr) << "GrammarCache needs a vocabulary";
  const Status valid = options_.Validate();
  TANDEM_CHECK(valid.ok()) << valid.ToString();
}

StatusOr<std::shared_ptr<TokenGrammar>> GrammarCache::Get(std::string_view spec_json) {
  if (auto it = index_.find(spec_json); it != index_.end()) {
    entries_.splice(entries_.begin(), entries_, it->second);
    Evict();
    return entries_.front().grammar;
  }
  TANDEM_ASSIGN_OR_RETURN(std::shared_ptr<const Grammar> grammar, Grammar::Compile(spec_json));
  entries_.push_front(Entry{std::string(spec_json), TokenGrammar::Create(std::move(grammar), vocab_,
                                                                          options_.token_grammar)});
  index_.emplace(entries_.front().spec, entries_.begin());
  Evict();
  return entries_.front().grammar;
}

size_t GrammarCache::TotalBytes() const {
  size_t total = 0;
  for (const Entry& e : entries_) total += e.grammar->CacheBytes();
  return total;
}

void GrammarCache::Evict() {
  while (entries_.size() > 1 &&
         (static_cast<int>(entries_.size()) > options_.max_grammars || TotalBytes() > options_.max_total_bytes)) {
    index_.erase(entries_.back().spec);
    entries_.pop_back();
  }
}

}  // namespace tandem::grammar
