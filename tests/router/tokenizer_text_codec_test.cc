// TokenizerTextCodec over the hand-made byte-level tokenizer of the tokenizer
// tests (ids derived by hand from its vocabulary and merges).
#include "router/tokenizer_text_codec.h"

#include <gtest/gtest.h>

#include "tests/common/tokenizer/tiny_tokenizers.h"

namespace tandem::router {
namespace {

class TokenizerTextCodecTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto tok = tokenizer::Tokenizer::FromJson(tokenizer::test_data::TinyByteLevelJson());
    ASSERT_TRUE(tok.ok()) << tok.status().ToString();
    tokenizer_ = std::move(*tok);
    auto tmpl = tokenizer::ChatTemplate::FromSource(
        "{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}"
        "{% if add_generation_prompt %}[assistant]{% endif %}");
    ASSERT_TRUE(tmpl.ok()) << tmpl.status().ToString();
    template_ = std::make_unique<tokenizer::ChatTemplate>(std::move(*tmpl));
  }
  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
  std::unique_ptr<tokenizer::ChatTemplate> template_;
};

TEST_F(TokenizerTextCodecTest, EncodesDecodesAndRenders) {
  TokenizerTextCodec codec(tokenizer_.get(), template_.get());
  // "hello" = "he" (257) + "ll" (259) + "o" (111); the post-processor adds <|begin|> (303).
  auto ids = codec.Encode("hello", true);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*ids, (std::vector<TokenId>{303, 257, 259, 111}));
  EXPECT_EQ(*codec.Encode("hello", false), (std::vector<TokenId>{257, 259, 111}));
  const std::vector<TokenId> ids_out = {303, 257, 259, 111, 258, 300};
  for (bool skip : {true, false}) {
    auto decoder = codec.NewDecoder(skip);
    std::string text;
    for (TokenId id : ids_out) text += decoder->Add(id);
    text += decoder->Finish();
    EXPECT_EQ(text, skip ? "hello the" : "<|begin|>hello the<|end|>") << skip;
    EXPECT_EQ(*codec.Decode(ids_out, skip), text) << "one piece as streamed";
  }
  nlohmann::json messages = {{{"role", "user"}, {"content", "hi"}}};
  EXPECT_EQ(*codec.RenderChat(messages, {true}), "[user]hi[assistant]");
  EXPECT_EQ(*codec.RenderChat(messages, {false}), "[user]hi");
}

TEST_F(TokenizerTextCodecTest, TemplateKwargsReachTheTemplate) {
  auto tmpl = tokenizer::ChatTemplate::FromSource(
      "{% if enable_thinking is defined and not enable_thinking %}[no-think]{% endif %}"
      "{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}");
  ASSERT_TRUE(tmpl.ok());
  TokenizerTextCodec codec(tokenizer_.get(), &*tmpl);
  nlohmann::json messages = {{{"role", "user"}, {"content", "hi"}}};
  EXPECT_EQ(*codec.RenderChat(messages, {true, {{"enable_thinking", false}}}), "[no-think][user]hi");
  EXPECT_EQ(*codec.RenderChat(messages, {true, {{"enable_thinking", true}}}), "[user]hi");
  EXPECT_EQ(*codec.RenderChat(messages, {true}), "[user]hi");
}

TEST_F(TokenizerTextCodecTest, ToolsAndToolCallsReachTheTemplate) {
  auto tmpl = tokenizer::ChatTemplate::FromSource(
      "{% if tools is defined %}{% for t in tools %}<{{ t.function.name }}>{% endfor %}{% endif %}"
      "{% for m in messages %}[{{ m.role }}]{{ m.content }}"
      "{% for c in m.tool_calls or [] %}{{ c.function.name }}{{ c.function.arguments | tojson }}{% endfor %}"
      "{% endfor %}");
  ASSERT_TRUE(tmpl.ok()) << tmpl.status().ToString();
  TokenizerTextCodec codec(tokenizer_.get(), &*tmpl);
  nlohmann::json messages = {
      {{"role", "user"}, {"content", "hi"}},
      {{"role", "assistant"},
       {"content", ""},
       {"tool_calls", {{{"type", "function"}, {"function", {{"name", "f"}, {"arguments", {{"a", 1}}}}}}}}}};
  ChatRenderOptions options{false, nullptr, {{{"type", "function"}, {"function", {{"name", "f"}}}}}};
  EXPECT_EQ(*codec.RenderChat(messages, options), "<f>[user]hi[assistant]f{\"a\": 1}");
  options.tools = nullptr;
  EXPECT_EQ(*codec.RenderChat(messages, options), "[user]hi[assistant]f{\"a\": 1}") << "no tools: undefined";
}

TEST_F(TokenizerTextCodecTest, TemplateErrorsAreInvalidArgument) {
  auto raising = tokenizer::ChatTemplate::FromSource("{{ raise_exception('roles must alternate') }}");
  ASSERT_TRUE(raising.ok());
  TokenizerTextCodec codec(tokenizer_.get(), &*raising);
  auto text = codec.RenderChat(nlohmann::json::array(), {true});
  EXPECT_EQ(text.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(text.status().message().find("roles must alternate"), std::string::npos);
  TokenizerTextCodec no_template(tokenizer_.get(), nullptr);
  EXPECT_EQ(no_template.RenderChat(nlohmann::json::array(), {true}).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem::router
