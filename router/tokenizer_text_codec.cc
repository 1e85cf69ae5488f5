#include "router/tokenizer_text_codec.h"

#include "common/tokenizer/incremental_detokenizer.h"

namespace tandem::router {
namespace {

class DetokenizerAdapter : public TextDecoder {
 public:
  DetokenizerAdapter(const tokenizer::Tokenizer& tok, bool skip_special_tokens)
      : detokenizer_(tok, skip_special_tokens) {}
  std::string Add(TokenId token_id) override { return detokenizer_.Add(token_id); }
  std::string Finish() override { return detokenizer_.Finish(); }

 private:
  tokenizer::IncrementalDetokenizer detokenizer_;
};

}  // namespace

TokenizerTextCodec::TokenizerTextCodec(const tokenizer::Tokenizer* tokenizer,
                                       const tokenizer::ChatTemplate* chat_template,
                                       tokenizer::ChatRenderOptions base_options)
    : tokenizer_(tokenizer), chat_template_(chat_template), base_options_(std::move(base_options)) {
  TANDEM_CHECK(tokenizer_ != nullptr);
}

StatusOr<std::vector<TokenId>> TokenizerTextCodec::Encode(std::string_view text, bool add_special) const {
  return tokenizer_->Encode(text, add_special);
}

StatusOr<std::string> TokenizerTextCodec::RenderChat(const nlohmann::json& messages,
                                                     const ChatRenderOptions& options) const {
  if (chat_template_ == nullptr) {
    return InvalidArgumentError("this model has no chat template; use /v1/completions");
  }
  tokenizer::ChatRenderOptions render = base_options_;
  render.add_generation_prompt = options.add_generation_prompt;
  render.tools = options.tools;
  if (options.template_kwargs.is_object()) {
    if (!render.extra_context.is_object()) render.extra_context = nlohmann::json::object();
    for (const auto& [key, value] : options.template_kwargs.items()) render.extra_context[key] = value;
  }
  StatusOr<std::string> text = chat_template_->Render(messages, render);
  if (!text.ok()) return InvalidArgumentError("chat template: " + text.status().message());
  return text;
}

std::unique_ptr<TextDecoder> TokenizerTextCodec::NewDecoder(bool skip_special_tokens) const {
  return std::make_unique<DetokenizerAdapter>(*tokenizer_, skip_special_tokens);
}

StatusOr<std::string> TokenizerTextCodec::Decode(std::span<const TokenId> ids, bool skip_special_tokens) const {
  return tokenizer_->Decode(ids, skip_special_tokens);
}

std::string TokenizerTextCodec::TokenBytes(TokenId id) const { return tokenizer_->TokenBytes(id); }

}  // namespace tandem::router
