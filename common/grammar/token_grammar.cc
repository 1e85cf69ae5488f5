#include "common/grammar/token_grammar.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "common/base/check.h"
#include "common/grammar/string_dfa.h"

namespace tandem::grammar {
namespace {

// Cache key tags: a full mask by state, an inside mask by (step, max chars), closing tokens by state.
constexpr char kFullMaskTag = 'M';
constexpr char kInsideTag = 'I';
constexpr char kClosingTag = 'C';

}  // namespace

std::shared_ptr<TokenGrammar> TokenGrammar::Create(std::shared_ptr<const Grammar> grammar,
                                                   std::shared_ptr<const TokenVocabulary> vocab,
                                                   TokenGrammarOptions options) {
  TANDEM_CHECK(grammar != nullptr && vocab != nullptr) << "TokenGrammar needs a grammar and a vocabulary";
  return std::shared_ptr<TokenGrammar>(new TokenGrammar(std::move(grammar), std::move(vocab), options));
}

TokenGrammar::TokenGrammar(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenVocabulary> vocab,
                           TokenGrammarOptions options)
    : grammar_(std::move(grammar)),
      vocab_(std::move(vocab)),
      cache_(options.max_cache_bytes),
      walk_states_(vocab_->trie().max_depth() + 1) {}

void TokenGrammar::FillTextMask(const ParseState& state, std::span<uint32_t> mask) {
  TANDEM_CHECK(mask.size() == static_cast<size_t>(MaskWords(vocab_->size())))
      << "mask has " << mask.size() << " words, vocabulary needs " << MaskWords(vocab_->size());
  OpenString open;
  if (GetOpenString(*grammar_, state, &open)) {
    FillOpenStringMask(state, open, mask);
    return;
  }
  std::string key = kFullMaskTag + state.Key();
  if (const std::vector<uint32_t>* cached = cache_.Find(key)) {
    std::memcpy(mask.data(), cached->data(), mask.size_bytes());
    return;
  }
  WalkTrie(state, mask);
  cache_.Insert(std::move(key), std::vector<uint32_t>(mask.begin(), mask.end()));
}

void TokenGrammar::WalkTrie(const ParseState& state, std::span<uint32_t> mask) {
  std::fill(mask.begin(), mask.end(), 0u);
  const TokenTrie& trie = vocab_->trie();
  walk_states_[0] = state;
  for (int i = 0; i < trie.num_nodes();) {
    const int d = trie.depth(i);
    ParseState& next = walk_states_[d];
    Advance(*grammar_, walk_states_[d - 1], trie.byte(i), &next);
    if (next.empty()) {
      i = trie.subtree_end(i);
      continue;
    }
    OpenString open;
    if (GetOpenString(*grammar_, next, &open)) {  // a string just opened: its subtree runs on the string DFA
      WalkOpenStringSubtree(i, next, open, mask);
      i = trie.subtree_end(i);
      continue;
    }
    for (TokenId t : trie.tokens(i)) SetMaskBit(mask, t);
    ++i;
  }
}

void TokenGrammar::WalkOpenStringSubtree(int node, const ParseState& state, const OpenString& open,
                                         std::span<uint32_t> mask) {
  const TokenTrie& trie = vocab_->trie();
  const size_t depth = static_cast<size_t>(trie.depth(node));
  ParseState closed, x, y;
  for (TokenId t : trie.subtree_tokens(node)) {
    const std::string& bytes = vocab_->token_bytes(t);
    uint8_t step = open.step;
    int count = open.count;
    bool ok = true;
    size_t pos = depth;
    for (; pos < bytes.size(); ++pos) {
      bool starts_char = false;
      step = StringByte(step, static_cast<uint8_t>(bytes[pos]), &starts_char);
      if (step == kStrReject || step == kStrClose) break;
      count += starts_char ? 1 : 0;
      if (open.max_length >= 0 && count > open.max_length) {
        ok = false;
        break;
      }
    }
    if (ok && pos < bytes.size()) {  // closed (or rejected) at pos: the rest goes through the stepper
      ok = step == kStrClose && count >= open.min_length;
      if (ok) {
        SetOpenStringCount(state, open.min_length, &closed);
        Advance(*grammar_, closed, '"', &x);
        for (size_t k = pos + 1; k < bytes.size() && !x.empty(); ++k) {
          Advance(*grammar_, x, static_cast<uint8_t>(bytes[k]), &y);
          std::swap(x, y);
        }
        ok = !x.empty();
      }
    }
    if (ok) SetMaskBit(mask, t);
  }
}

void TokenGrammar::FillOpenStringMask(const ParseState& state, const OpenString& open, std::span<uint32_t> mask) {
  const StringStepTable& table = vocab_->string_tables().table(open.step);
  const int max_chars = open.max_length < 0 ? table.max_chars() : std::min(open.max_length - open.count,
                                                                              table.max_chars());
  if (max_chars >= table.max_chars()) {
    std::memcpy(mask.data(), table.inside_mask.data(), mask.size_bytes());
  } else {
    const std::vector<uint32_t>& inside = InsideMask(open.step, max_chars);
    std::memcpy(mask.data(), inside.data(), mask.size_bytes());
  }
  // Closing tokens: pairs (token, code points before the quote); the length bounds decide.
  const std::vector<uint32_t>& closing = ClosingTokens(state, open);
  for (size_t i = 0; i < closing.size(); i += 2) {
    const int chars = open.count + static_cast<int>(closing[i + 1]);
    if (chars >= open.min_length && (open.max_length < 0 || chars <= open.max_length)) {
      SetMaskBit(mask, static_cast<TokenId>(closing[i]));
    }
  }
}

const std::vector<uint32_t>& TokenGrammar::InsideMask(uint8_t step, int max_chars) {
  std::string key(1, kInsideTag);
  key.push_back(static_cast<char>(step));
  key.append(reinterpret_cast<const char*>(&max_chars), sizeof(max_chars));
  if (const std::vector<uint32_t>* cached = cache_.Find(key)) return *cached;
  const StringStepTable& table = vocab_->string_tables().table(step);
  std::vector<uint32_t> mask(MaskWords(vocab_->size()), 0u);
  const int end = table.chars_offsets[std::max(max_chars, -1) + 1];
  for (int i = 0; i < end; ++i) SetMaskBit(mask, table.inside_by_chars[i]);
  return cache_.Insert(std::move(key), std::move(mask));
}

const std::vector<uint32_t>& TokenGrammar::ClosingTokens(const ParseState& state, const OpenString& open) {
  // What follows the quote does not depend on the string's count: key on the step (which tokens
  // can close) and the state with the count set aside.
  ParseState closed;
  SetOpenStringCount(state, open.min_length, &closed);
  std::string key = kClosingTag + closed.Key();
  key.push_back(static_cast<char>(open.step));
  if (const std::vector<uint32_t>* cached = cache_.Find(key)) return *cached;
  std::vector<uint32_t> closing;
  ParseState after_quote;
  Advance(*grammar_, closed, '"', &after_quote);
  if (!after_quote.empty()) {
    std::unordered_map<std::string_view, bool> rest_allowed;  // many tokens share a rest ("," "}" ...)
    ParseState x, y;
    for (const StringStepTable::Exit& exit : vocab_->string_tables().table(open.step).exits) {
      const std::string_view rest = std::string_view(vocab_->token_bytes(exit.token)).substr(exit.quote_pos + 1);
      auto [it, inserted] = rest_allowed.try_emplace(rest, false);
      if (inserted) {
        x = after_quote;
        bool ok = true;
        for (size_t i = 0; i < rest.size() && ok; ++i) {
          Advance(*grammar_, x, static_cast<uint8_t>(rest[i]), &y);
          std::swap(x, y);
          ok = !x.empty();
        }
        it->second = ok;
      }
      if (it->second) {
        closing.push_back(static_cast<uint32_t>(exit.token));
        closing.push_back(exit.chars_before);
      }
    }
  }
  return cache_.Insert(std::move(key), std::move(closing));
}

}  // namespace tandem::grammar
