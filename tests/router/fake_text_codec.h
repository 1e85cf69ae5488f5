// FakeTextCodec: a byte-level tokenizer for router tests.
//
// Ids 0..255 are single bytes (so a multibyte character spans several tokens
// and the decoder emits partial UTF-8); 256 is EOS and 257 BOS (special:
// "<eos>", "<bos>", or nothing when special tokens are skipped); 258.. are
// whole words from kWords. Chat rendering is "<|role|>content\n" per message
// plus "<|assistant|>", after "[k=v]" for each template kwarg; a message
// whose content is "RAISE" makes the "template" fail. Thread rule: stateless.
#pragma once

#include <string>
#include <vector>

#include "router/text_codec.h"

namespace tandem::router::testing {

inline constexpr TokenId kEos = 256;
inline constexpr TokenId kBos = 257;
inline constexpr TokenId kWordBase = 258;
inline const std::vector<std::string> kWords = {"Hello", " world", "STOP", "!", " the", "\n"};
inline constexpr int32_t kFakeVocab = 300;

// Token ids of `text` as single bytes (no BOS).
inline std::vector<TokenId> ByteTokens(const std::string& text) {
  std::vector<TokenId> ids;
  for (unsigned char c : text) ids.push_back(c);
  return ids;
}

inline std::string FakeTokenText(TokenId id, bool skip_special_tokens) {
  if (id >= 0 && id < 256) return std::string(1, static_cast<char>(id));
  if (id >= kWordBase && id < kWordBase + static_cast<TokenId>(kWords.size())) return kWords[id - kWordBase];
  if (skip_special_tokens) return "";
  return id == kEos ? "<eos>" : id == kBos ? "<bos>" : "";
}

class FakeDecoder : public TextDecoder {
 public:
  explicit FakeDecoder(bool skip_special_tokens) : skip_special_tokens_(skip_special_tokens) {}
  std::string Add(TokenId id) override { return FakeTokenText(id, skip_special_tokens_); }
  std::string Finish() override { return ""; }

 private:
  const bool skip_special_tokens_;
};

class FakeTextCodec : public TextCodec {
 public:
  StatusOr<std::vector<TokenId>> Encode(std::string_view text, bool add_special) const override {
    std::vector<TokenId> ids;
    if (add_special) ids.push_back(kBos);
    for (unsigned char c : text) ids.push_back(c);
    return ids;
  }
  StatusOr<std::string> RenderChat(const nlohmann::json& messages, const ChatRenderOptions& options) const override {
    std::string out;
    if (options.template_kwargs.is_object()) {
      for (const auto& [k, v] : options.template_kwargs.items()) out += "[" + k + "=" + v.dump() + "]";
    }
    for (const auto& m : messages) {
      if (m["content"] == "RAISE") return InvalidArgumentError("template raised: boom");
      out += "<|" + m["role"].get<std::string>() + "|>" + m["content"].get<std::string>() + "\n";
    }
    if (options.add_generation_prompt) out += "<|assistant|>";
    return out;
  }
  std::unique_ptr<TextDecoder> NewDecoder(bool skip_special_tokens) const override {
    return std::make_unique<FakeDecoder>(skip_special_tokens);
  }
  StatusOr<std::string> Decode(std::span<const TokenId> ids, bool skip_special_tokens) const override {
    std::string out;
    for (TokenId id : ids) out += FakeTokenText(id, skip_special_tokens);
    return out;
  }
  std::string TokenBytes(TokenId id) const override { return FakeTokenText(id, false); }
};

}  // namespace tandem::router::testing
