// A Hugging Face tokenizer loaded from tokenizer.json: added tokens ->
// normalizer -> pre-tokenizer -> BPE model -> post-processor on encode, and the
// decoder chain on decode, matching the `tokenizers` library id for id.
// Supports byte-level BPE (GPT-2, Llama 3, Qwen2/3, DeepSeek) and
// SentencePiece-style BPE with byte fallback (Llama 2, Mistral, Gemma).
//
// Thread rule: immutable after load; every method is thread-safe.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/base/ids.h"
#include "common/base/status.h"
#include "common/tokenizer/added_vocabulary.h"
#include "common/tokenizer/bpe_model.h"
#include "common/tokenizer/decoder.h"
#include "common/tokenizer/normalizer.h"
#include "common/tokenizer/post_processor.h"
#include "common/tokenizer/pre_tokenizer.h"

namespace tandem::tokenizer {

// Inputs larger than this are rejected by Encode (InvalidArgument).
inline constexpr size_t kMaxEncodeBytes = 64u << 20;
// tokenizer.json files larger than this are rejected.
inline constexpr size_t kMaxTokenizerJsonBytes = 512u << 20;

class Tokenizer {
 public:
  // NotFound if the file cannot be read; InvalidArgument for malformed JSON or
  // an unsupported component (the message names it).
  static StatusOr<std::unique_ptr<Tokenizer>> FromFile(const std::string& tokenizer_json_path);
  static StatusOr<std::unique_ptr<Tokenizer>> FromJson(std::string_view json_text);

  // `text` must be valid UTF-8 and at most kMaxEncodeBytes (else InvalidArgument).
  // Special-token text in the input always maps to its id; add_special_tokens
  // only controls the post-processor (e.g. the leading bos).
  StatusOr<std::vector<TokenId>> Encode(std::string_view text, bool add_special_tokens) const;

  // Ids outside the vocabulary are skipped (as Hugging Face does). The result
  // is valid UTF-8; invalid byte sequences become U+FFFD.
  StatusOr<std::string> Decode(std::span<const TokenId> ids, bool skip_special_tokens) const;

  // One token's text as raw bytes, through the decoder chain but not made valid
  // UTF-8 (a byte-level token may hold part of a character); a special token gives
  // its content; "" for an id outside the vocabulary.
  std::string TokenBytes(TokenId id) const;

  int VocabSize() const;  // largest id + 1, including added tokens
  std::optional<TokenId> TokenToId(std::string_view token) const;
  std::optional<std::string> IdToToken(TokenId id) const;
  bool IsSpecial(TokenId id) const;
  // True for ids listed in tokenizer.json's added_tokens (special or not).
  bool IsAdded(TokenId id) const { return added_.Find(id) != nullptr; }
  // True for <0xXX> byte tokens of a tokenizer whose decoder has ByteFallback:
  // text ending in such a run may still change, so streams hold it back.
  bool IsByteFallbackPiece(TokenId id) const;

 private:
  Tokenizer() = default;
  Status EncodePlain(std::string_view segment, bool at_text_start, std::vector<TokenId>* ids) const;

  AddedVocabulary added_;
  Normalizer normalizer_;
  PreTokenizer pre_tokenizer_;
  BpeModel model_;
  PostProcessor post_processor_;
  Decoder decoder_;
};

}  // namespace tandem::tokenizer
