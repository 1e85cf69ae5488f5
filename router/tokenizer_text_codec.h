// TokenizerTextCodec: the TextCodec over common/tokenizer (HF tokenizer.json,
// incremental detokenizer, Jinja chat template). This is what tandem-router
// plugs into HttpServer; tests use a fake instead.
//
// Thread rule: thread-safe (the tokenizer and template are immutable); the
// tokenizer and template must outlive the codec and every decoder it made.
#pragma once

#include "common/tokenizer/chat_template.h"
#include "common/tokenizer/tokenizer.h"
#include "router/text_codec.h"

namespace tandem::router {

class TokenizerTextCodec : public TextCodec {
 public:
  // `chat_template` may be null: chat requests then get a 400. `base_options`
  // carries bos/eos token strings and extra template variables; its
  // add_generation_prompt is replaced per request, and a request's
  // template_kwargs are added to (and win over) its extra_context.
  TokenizerTextCodec(const tokenizer::Tokenizer* tokenizer, const tokenizer::ChatTemplate* chat_template,
                     tokenizer::ChatRenderOptions base_options = {});

  StatusOr<std::vector<TokenId>> Encode(std::string_view text, bool add_special) const override;
  // Every template failure (syntax, raise_exception, render limits) is
  // InvalidArgument carrying the template's message, so the client gets a 400.
  StatusOr<std::string> RenderChat(const nlohmann::json& messages, const ChatRenderOptions& options) const override;
  std::unique_ptr<TextDecoder> NewDecoder(bool skip_special_tokens) const override;
  StatusOr<std::string> Decode(std::span<const TokenId> ids, bool skip_special_tokens) const override;
  std::string TokenBytes(TokenId id) const override;

 private:
  const tokenizer::Tokenizer* const tokenizer_;
  const tokenizer::ChatTemplate* const chat_template_;
  const tokenizer::ChatRenderOptions base_options_;
};

}  // namespace tandem::router
