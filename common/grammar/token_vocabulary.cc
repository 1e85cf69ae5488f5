#include "common/grammar/token_vocabulary.h"

#include "common/base/check.h"
#include "common/tokenizer/tokenizer.h"

namespace tandem::grammar {

TokenVocabulary::TokenVocabulary(std::vector<std::string> token_bytes, std::vector<bool> is_text)
    : token_bytes_(std::move(token_bytes)),
      is_text_(std::move(is_text)),
      trie_(token_bytes_, is_text_),
      string_tables_(trie_, static_cast<int>(token_bytes_.size())) {}

std::shared_ptr<const TokenVocabulary> TokenVocabulary::Create(std::vector<std::string> token_bytes,
                                                               std::vector<bool> special) {
  TANDEM_CHECK(token_bytes.size() == special.size())
      << "token_bytes (" << token_bytes.size() << ") and special (" << special.size() << ") differ in size";
  std::vector<bool> is_text(token_bytes.size());
  for (size_t id = 0; id < token_bytes.size(); ++id) is_text[id] = !special[id] && !token_bytes[id].empty();
  return std::shared_ptr<const TokenVocabulary>(new TokenVocabulary(std::move(token_bytes), std::move(is_text)));
}

StatusOr<std::shared_ptr<const TokenVocabulary>> TokenVocabulary::FromTokenizer(
    const tokenizer::Tokenizer& tokenizer, int vocab_size) {
  const int tokenizer_size = tokenizer.VocabSize();
  if (vocab_size < tokenizer_size) {
    return InvalidArgumentError("vocab_size " + std::to_string(vocab_size) + " is smaller than the tokenizer's " +
                                std::to_string(tokenizer_size));
  }
  std::vector<std::string> token_bytes(vocab_size);
  std::vector<bool> special(vocab_size, true);
  for (TokenId id = 0; id < tokenizer_size; ++id) {
    special[id] = tokenizer.IsSpecial(id);
    if (!special[id]) token_bytes[id] = tokenizer.TokenBytes(id);
  }
  return Create(std::move(token_bytes), std::move(special));
}

}  // namespace tandem::grammar
