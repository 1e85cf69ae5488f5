#include "common/tokenizer/added_vocabulary.h"

#include <algorithm>

#include "common/tokenizer/normalizer.h"
#include "common/tokenizer/unicode_util.h"

namespace tandem::tokenizer {
namespace {

constexpr size_t kMaxAddedTokens = 1u << 20;
constexpr size_t kMaxAddedTokenBytes = 4096;

bool IsWordChar(char32_t c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
         (c >= 0x80 && !IsUnicodeWhitespace(c));
}

// Start of the code point that ends just before `pos`.
size_t PrevCharStart(std::string_view text, size_t pos) {
  size_t p = pos - 1;
  while (p > 0 && (static_cast<unsigned char>(text[p]) & 0xC0) == 0x80) --p;
  return p;
}

}  // namespace

void AddedVocabulary::Trie::Insert(std::string_view key, int token) {
  int node = 0;
  for (char ch : key) {
    const auto c = static_cast<unsigned char>(ch);
    auto& kids = nodes[node].children;
    auto it = std::lower_bound(kids.begin(), kids.end(), std::make_pair(c, -1));
    if (it != kids.end() && it->first == c) {
      node = it->second;
      continue;
    }
    const int next = static_cast<int>(nodes.size());
    kids.insert(it, {c, next});
    nodes.emplace_back();
    node = next;
  }
  nodes[node].token = token;
}

std::pair<int, size_t> AddedVocabulary::Trie::LongestMatch(std::string_view text, size_t pos) const {
  std::pair<int, size_t> best{-1, 0};
  int node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    const auto& kids = nodes[node].children;
    auto it = std::lower_bound(kids.begin(), kids.end(), std::make_pair(c, -1));
    if (it == kids.end() || it->first != c) break;
    node = it->second;
    if (nodes[node].token >= 0) best = {nodes[node].token, i + 1 - pos};
  }
  return best;
}

StatusOr<AddedVocabulary> AddedVocabulary::FromJson(const nlohmann::json& added_tokens, const Normalizer& normalizer) {
  AddedVocabulary v;
  if (added_tokens.is_null()) return v;
  if (!added_tokens.is_array()) return InvalidArgumentError("'added_tokens' must be an array");
  if (added_tokens.size() > kMaxAddedTokens) return InvalidArgumentError("too many added tokens");
  for (const auto& t : added_tokens) {
    if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() || !t.contains("content") ||
        !t["content"].is_string()) {
      return InvalidArgumentError("an added token needs an integer 'id' and a string 'content'");
    }
    AddedToken tok;
    const int64_t id = t["id"].get<int64_t>();
    if (id < 0 || id >= (1 << 24)) return InvalidArgumentError("added token id out of range");
    tok.id = static_cast<TokenId>(id);
    tok.content = t["content"].get<std::string>();
    if (tok.content.empty() || tok.content.size() > kMaxAddedTokenBytes || !IsValidUtf8(tok.content)) {
      return InvalidArgumentError("added token " + std::to_string(id) + " has bad content");
    }
    auto flag = [&t](const char* key, bool def) {
      return t.contains(key) && t[key].is_boolean() ? t[key].get<bool>() : def;
    };
    tok.lstrip = flag("lstrip", false);
    tok.rstrip = flag("rstrip", false);
    tok.special = flag("special", false);
    tok.normalized = flag("normalized", !tok.special);
    tok.single_word = flag("single_word", false);
    const int index = static_cast<int>(v.tokens_.size());
    if (tok.normalized) {
      TANDEM_ASSIGN_OR_RETURN(std::string key, normalizer.Normalize(tok.content));
      if (!key.empty()) v.normalized_trie_.Insert(key, index);
    } else {
      v.raw_trie_.Insert(tok.content, index);
    }
    v.by_id_[tok.id] = index;
    v.by_content_[tok.content] = tok.id;
    v.max_id_ = std::max(v.max_id_, tok.id);
    v.tokens_.push_back(std::move(tok));
  }
  return v;
}

std::vector<Segment> AddedVocabulary::Split(std::string_view text, bool normalized_pass) const {
  const Trie& trie = normalized_pass ? normalized_trie_ : raw_trie_;
  std::vector<Segment> out;
  if (trie.nodes[0].children.empty()) {
    if (!text.empty()) out.push_back({text, std::nullopt});
    return out;
  }
  size_t plain_begin = 0;  // start of the pending plain text
  size_t pos = 0;
  while (pos < text.size()) {
    const auto [index, len] = trie.LongestMatch(text, pos);
    if (index < 0) {
      ++pos;
      continue;
    }
    const AddedToken& tok = tokens_[index];
    size_t begin = pos, end = pos + len;
    if (tok.single_word) {
      size_t after = end;
      const bool word_before = begin > 0 && IsWordChar([&] {
                                 size_t p = PrevCharStart(text, begin);
                                 return NextCodePoint(text, &p);
                               }());
      const bool word_after = end < text.size() && IsWordChar(NextCodePoint(text, &after));
      if (word_before || word_after) {
        ++pos;
        continue;
      }
    }
    if (tok.lstrip) {
      while (begin > plain_begin) {
        const size_t p0 = PrevCharStart(text, begin);
        size_t p = p0;
        if (!IsUnicodeWhitespace(NextCodePoint(text, &p))) break;
        begin = p0;
      }
    }
    if (tok.rstrip) {
      while (end < text.size()) {
        size_t p = end;
        if (!IsUnicodeWhitespace(NextCodePoint(text, &p))) break;
        end = p;
      }
    }
    if (begin > plain_begin) out.push_back({text.substr(plain_begin, begin - plain_begin), std::nullopt});
    out.push_back({text.substr(begin, end - begin), tok.id});
    pos = plain_begin = end;
  }
  if (plain_begin < text.size()) out.push_back({text.substr(plain_begin), std::nullopt});
  return out;
}

const AddedToken* AddedVocabulary::Find(TokenId id) const {
  const auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

std::optional<TokenId> AddedVocabulary::Find(std::string_view content) const {
  const auto it = by_content_.find(std::string(content));
  if (it == by_content_.end()) return std::nullopt;
  return it->second;
}

}  // namespace tandem::tokenizer
