#include "common/tokenizer/tokenizer.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "common/base/json_depth.h"
#include "common/tokenizer/unicode_util.h"

namespace tandem::tokenizer {

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError("cannot open tokenizer file " + path);
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0 || static_cast<size_t>(size) > kMaxTokenizerJsonBytes) {
    return InvalidArgumentError("tokenizer file too large or unreadable: " + path);
  }
  in.seekg(0);
  std::string text(static_cast<size_t>(size), '\0');
  in.read(text.data(), size);
  if (!in) return NotFoundError("cannot read tokenizer file " + path);
  auto result = FromJson(text);
  if (!result.ok()) return result.status().WithContext(path);
  return result;
}

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromJson(std::string_view json_text) {
  if (json_text.size() > kMaxTokenizerJsonBytes) return InvalidArgumentError("tokenizer.json too large");
  // nlohmann's parser is recursive: refuse deep nesting before parsing.
  if (JsonNestingDepth(json_text, 64) > 64) return InvalidArgumentError("tokenizer.json nested too deeply");
  const nlohmann::json j = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgumentError("tokenizer.json is not valid JSON");
  if (!j.is_object()) return InvalidArgumentError("tokenizer.json must be a JSON object");
  if (!j.contains("model")) return InvalidArgumentError("tokenizer.json has no 'model'");
  auto section = [&j](const char* key) -> const nlohmann::json& {
    static const nlohmann::json kNull;
    const auto it = j.find(key);
    return it == j.end() ? kNull : *it;
  };
  std::unique_ptr<Tokenizer> t(new Tokenizer());
  TANDEM_ASSIGN_OR_RETURN(t->normalizer_, Normalizer::FromJson(section("normalizer")));
  TANDEM_ASSIGN_OR_RETURN(t->pre_tokenizer_, PreTokenizer::FromJson(section("pre_tokenizer")));
  TANDEM_ASSIGN_OR_RETURN(t->model_, BpeModel::FromJson(section("model")));
  TANDEM_ASSIGN_OR_RETURN(t->post_processor_, PostProcessor::FromJson(section("post_processor")));
  TANDEM_ASSIGN_OR_RETURN(t->decoder_, Decoder::FromJson(section("decoder")));
  TANDEM_ASSIGN_OR_RETURN(t->added_, AddedVocabulary::FromJson(section("added_tokens"), t->normalizer_));
  return t;
}

Status Tokenizer::EncodePlain(std::string_view segment, bool at_text_start, std::vector<TokenId>* ids) const {
  std::string normalized;
  if (!normalizer_.empty()) {
    TANDEM_ASSIGN_OR_RETURN(normalized, normalizer_.Normalize(segment));
    segment = normalized;
  }
  std::vector<std::string> words;
  for (const Segment& piece : added_.Split(segment, /*normalized_pass=*/true)) {
    if (piece.token) {
      ids->push_back(*piece.token);
      continue;
    }
    words.clear();
    const bool start = at_text_start && piece.text.data() == segment.data();
    TANDEM_RETURN_IF_ERROR(pre_tokenizer_.Split(piece.text, start, &words));
    for (const std::string& w : words) model_.EncodeWord(w, ids);
  }
  return Status::Ok();
}

StatusOr<std::vector<TokenId>> Tokenizer::Encode(std::string_view text, bool add_special_tokens) const {
  if (text.size() > kMaxEncodeBytes) {
    return InvalidArgumentError("text to encode is larger than " + std::to_string(kMaxEncodeBytes) + " bytes");
  }
  if (!IsValidUtf8(text)) return InvalidArgumentError("text to encode is not valid UTF-8");
  std::vector<TokenId> ids;
  ids.reserve(text.size() / 3 + 4);
  for (const Segment& seg : added_.Split(text, /*normalized_pass=*/false)) {
    if (seg.token) {
      ids.push_back(*seg.token);
    } else {
      TANDEM_RETURN_IF_ERROR(EncodePlain(seg.text, seg.text.data() == text.data(), &ids));
    }
  }
  if (add_special_tokens) return post_processor_.Apply(std::move(ids));
  return ids;
}

StatusOr<std::string> Tokenizer::Decode(std::span<const TokenId> ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (TokenId id : ids) {
    if (const AddedToken* added = added_.Find(id)) {
      if (skip_special_tokens && added->special) continue;
      tokens.push_back(added->content);
    } else if (const std::string* token = model_.IdToToken(id); token != nullptr && !token->empty()) {
      tokens.push_back(*token);
    }
  }
  return decoder_.Decode(std::move(tokens));
}

std::string Tokenizer::TokenBytes(TokenId id) const {
  if (const AddedToken* added = added_.Find(id)) return added->content;
  const std::string* token = model_.IdToToken(id);
  if (token == nullptr || token->empty()) return "";
  std::string bytes = decoder_.DecodeBytes({*token});
  if (bytes.find("\xEF\xBF\xBD") == std::string::npos) return bytes;
  // The decoder chain's ByteLevel / ByteFallback steps turn a piece of a UTF-8 character into
  // U+FFFD; the raw bytes come from the token itself: a byte-fallback "<0xAB>", or a byte-level
  // piece whose every character maps to a byte.
  if (IsByteFallbackPiece(id) && token->size() == 6) {
    auto hex = [](char c) { return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10; };
    return std::string(1, static_cast<char>(hex((*token)[3]) * 16 + hex((*token)[4])));
  }
  std::string raw;
  for (size_t pos = 0; pos < token->size();) {
    const int b = UnicodeToByte(NextCodePoint(*token, &pos));
    if (b < 0) return bytes;
    raw.push_back(static_cast<char>(b));
  }
  return raw;
}

int Tokenizer::VocabSize() const { return std::max(model_.MaxId(), added_.MaxId()) + 1; }

std::optional<TokenId> Tokenizer::TokenToId(std::string_view token) const {
  if (auto id = added_.Find(token)) return id;
  return model_.TokenToId(token);
}

std::optional<std::string> Tokenizer::IdToToken(TokenId id) const {
  if (const AddedToken* added = added_.Find(id)) return added->content;
  const std::string* token = model_.IdToToken(id);
  if (token == nullptr || token->empty()) return std::nullopt;
  return *token;
}

bool Tokenizer::IsByteFallbackPiece(TokenId id) const {
  if (!decoder_.has_byte_fallback() || added_.Find(id) != nullptr) return false;
  const std::string* token = model_.IdToToken(id);
  return token != nullptr && IsByteFallbackToken(*token);
}

bool Tokenizer::IsSpecial(TokenId id) const {
  const AddedToken* added = added_.Find(id);
  return added != nullptr && added->special;
}

}  // namespace tandem::tokenizer
