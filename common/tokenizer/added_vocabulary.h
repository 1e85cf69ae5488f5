// Added tokens of tokenizer.json (`added_tokens`): matched in the input before
// normalization (normalized=false) or in normalized text (normalized=true),
// leftmost-longest, honoring lstrip/rstrip/single_word. Special tokens are
// matched whether or not special tokens are being added, as Hugging Face does.
// Immutable after FromJson; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/base/ids.h"
#include "common/base/status.h"

namespace tandem::tokenizer {

class Normalizer;

struct AddedToken {
  TokenId id = 0;
  std::string content;
  bool lstrip = false, rstrip = false, normalized = false, special = false, single_word = false;
};

// A piece of input: either plain text or one matched added token.
struct Segment {
  std::string_view text;
  std::optional<TokenId> token;  // set when `text` matched an added token
};

class AddedVocabulary {
 public:
  // `normalizer` normalizes the content of normalized=true tokens.
  static StatusOr<AddedVocabulary> FromJson(const nlohmann::json& added_tokens, const Normalizer& normalizer);

  // Splits `text` on tokens with normalized == `normalized_pass`.
  std::vector<Segment> Split(std::string_view text, bool normalized_pass) const;

  const AddedToken* Find(TokenId id) const;
  std::optional<TokenId> Find(std::string_view content) const;
  TokenId MaxId() const { return max_id_; }
  bool empty() const { return tokens_.empty(); }

 private:
  struct TrieNode {
    std::vector<std::pair<unsigned char, int>> children;  // sorted by byte
    int token = -1;                                       // index into tokens_
  };
  struct Trie {
    std::vector<TrieNode> nodes{TrieNode{}};
    void Insert(std::string_view key, int token);
    // Longest key starting at text[pos]: (token index, length) or (-1, 0).
    std::pair<int, size_t> LongestMatch(std::string_view text, size_t pos) const;
  };

  std::vector<AddedToken> tokens_;
  std::unordered_map<TokenId, int> by_id_;
  std::unordered_map<std::string, TokenId> by_content_;
  Trie raw_trie_, normalized_trie_;
  TokenId max_id_ = -1;
};

}  // namespace tandem::tokenizer
