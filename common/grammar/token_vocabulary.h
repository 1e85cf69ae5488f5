// TokenVocabulary: the bytes each token id adds to the output, which ids are
// control tokens, and the vocabulary-wide indexes the mask code walks (the
// byte trie and the open-string tables; built once, ~0.1 s for 128K tokens).
// Thread rule: immutable after Create; thread-safe to share.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/base/ids.h"
#include "common/base/status.h"
#include "common/grammar/string_token_tables.h"
#include "common/grammar/token_trie.h"

namespace tandem::tokenizer {
class Tokenizer;
}

namespace tandem::grammar {

class TokenVocabulary {
 public:
  // token_bytes[id]: the raw bytes token `id` adds to the text (byte-level BPE mapped back to
  // bytes); special[id]: a control token that is never grammar text. Tokens with no bytes are
  // treated as special (never allowed as text). REQUIRES: equal sizes.
  static std::shared_ptr<const TokenVocabulary> Create(std::vector<std::string> token_bytes,
                                                       std::vector<bool> special);
  // From our tokenizer: ids the tokenizer calls special, and ids at or past its size up to
  // `vocab_size` (the model's), are special. InvalidArgument if vocab_size < tokenizer size.
  static StatusOr<std::shared_ptr<const TokenVocabulary>> FromTokenizer(const tokenizer::Tokenizer& tokenizer,
                                                                        int vocab_size);

  int size() const { return static_cast<int>(token_bytes_.size()); }
  // REQUIRES: 0 <= id < size().
  const std::string& token_bytes(TokenId id) const { return token_bytes_[id]; }
  // False for special tokens and tokens without bytes.
  bool is_text(TokenId id) const { return is_text_[id]; }

  const TokenTrie& trie() const { return trie_; }
  const StringTokenTables& string_tables() const { return string_tables_; }

 private:
  TokenVocabulary(std::vector<std::string> token_bytes, std::vector<bool> is_text);

  std::vector<std::string> token_bytes_;
  std::vector<bool> is_text_;
  TokenTrie trie_;
  StringTokenTables string_tables_;
};

}  // namespace tandem::grammar
