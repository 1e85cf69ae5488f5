// Unit tests of ChatTemplate and TokenizerConfig: loading from a model
// directory, named templates, error statuses, and the render limits. Expected
// strings are written by hand from Jinja's documented semantics.
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include <gtest/gtest.h>

#include "common/tokenizer/chat_template.h"
#include "common/tokenizer/tokenizer_config.h"

namespace tandem::tokenizer {
namespace {

const nlohmann::json kMessages = nlohmann::json::parse(R"([
  {"role": "system", "content": "S"}, {"role": "user", "content": "hi"}])");

std::string Render(const std::string& source, const nlohmann::json& messages = kMessages,
                   ChatRenderOptions options = {}) {
  auto t = ChatTemplate::FromSource(source);
  if (!t.ok()) return "PARSE: " + t.status().message();
  auto out = t->Render(messages, options);
  return out.ok() ? *out : "ERROR: " + out.status().message();
}

TEST(ChatTemplateTest, BasicRendering) {
  EXPECT_EQ(Render("{% for m in messages %}[{{ m.role }}:{{ m['content'] }}]{% endfor %}"), "[system:S][user:hi]");
  ChatRenderOptions o;
  o.bos_token = "<s>";
  o.add_generation_prompt = false;
  EXPECT_EQ(Render("{{ bos_token }}{% if add_generation_prompt %}G{% endif %}", kMessages, o), "<s>");
  EXPECT_EQ(Render("{{ eos_token is defined }}"), "False");
  o.extra_context = {{"enable_thinking", false}};
  EXPECT_EQ(Render("{{ enable_thinking }}", kMessages, o), "False");
  o.tools = nlohmann::json::parse(R"([{"name": "f"}])");
  EXPECT_EQ(Render("{{ tools | tojson }}", kMessages, o), R"([{"name": "f"}])");
}

TEST(ChatTemplateTest, WhitespaceControl) {
  // trim_blocks removes the newline after a block tag; lstrip_blocks the
  // indentation before it; a single trailing newline of the source is dropped.
  EXPECT_EQ(Render("{% if true %}\n  x\n  {% endif %}\n"), "  x\n");
  EXPECT_EQ(Render("a  {%- if true -%}  b  {%- endif -%}  c"), "abc");
  EXPECT_EQ(Render("  {%+ if true %}x{% endif %}"), "  x");
  EXPECT_EQ(Render("{{ 'a' }}\n{{ 'b' }}"), "a\nb");
  EXPECT_EQ(Render("{# comment #}\nx"), "x");
}

TEST(ChatTemplateTest, RaiseExceptionCarriesMessage) {
  auto t = ChatTemplate::FromSource("{{ raise_exception('Roles must alternate') }}");
  ASSERT_TRUE(t.ok());
  const auto out = t->Render(kMessages, {});
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(out.status().message(), "Roles must alternate");
}

TEST(ChatTemplateTest, ErrorsAreStatuses) {
  EXPECT_EQ(ChatTemplate::FromSource("{% if x %}").status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(ChatTemplate::FromSource("a\n{% for %}").status().message().find("line 2"), std::string::npos);
  EXPECT_EQ(ChatTemplate::FromSource("{{ 'abc }}").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ChatTemplate::FromSource("{% include 'x' %}").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ChatTemplate::FromSource("{{ "
                                     "(((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((1)))))))))))"
                                     "))))))))))))))))))))))))))))))))))))))))))))))))))))))))))) }}")
                .status()
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Render("{{ undefined_thing.attr }}"), "ERROR: chat template error: 'undefined_thing' is undefined");
  EXPECT_EQ(Render("{{ 1 + 'a' }}").rfind("ERROR: chat template error", 0), 0u);
  EXPECT_EQ(Render("{{ messages | nosuchfilter }}").rfind("ERROR:", 0), 0u);
  EXPECT_EQ(Render("{% set x = [] %}{{ x.append(1) }}").rfind("ERROR:", 0), 0u);
  auto t = ChatTemplate::FromSource("x");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->Render(nlohmann::json::object(), {}).status().code(), StatusCode::kInvalidArgument);
}

TEST(ChatTemplateTest, LimitsStopRunawayTemplates) {
  auto huge = ChatTemplate::FromSource("{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}");
  ASSERT_TRUE(huge.ok());
  EXPECT_EQ(huge->Render(kMessages, {}).status().code(), StatusCode::kResourceExhausted);
  auto recursive = ChatTemplate::FromSource("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  ASSERT_TRUE(recursive.ok());
  EXPECT_EQ(recursive->Render(kMessages, {}).status().code(), StatusCode::kResourceExhausted);
  auto loops = ChatTemplate::FromSource(
      "{% for a in range(1000) %}{% for b in range(1000) %}{% for c in range(100) %}{% endfor %}{% endfor %}{% endfor "
      "%}");
  ASSERT_TRUE(loops.ok());
  EXPECT_EQ(loops->Render(kMessages, {}).status().code(), StatusCode::kResourceExhausted);
}

class ModelDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("tandem_chat_template_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void Write(const std::string& name, const std::string& text) { std::ofstream(dir_ / name) << text; }
  std::filesystem::path dir_;
};

TEST_F(ModelDirTest, ReadsConfigTokensAndNamedTemplates) {
  Write("tokenizer_config.json", R"({
    "bos_token": {"__type": "AddedToken", "content": "<bos>"}, "eos_token": "<eos>",
    "add_bos_token": true,
    "chat_template": [{"name": "default", "template": "D{{ messages | length }}"},
                      {"name": "tool_use", "template": "T"}]})");
  auto config = TokenizerConfig::FromModelDir(dir_.string());
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->bos_token, "<bos>");
  EXPECT_EQ(config->eos_token, "<eos>");
  EXPECT_EQ(config->add_bos_token, true);
  EXPECT_EQ(config->add_eos_token, std::nullopt);
  EXPECT_EQ(config->chat_templates.size(), 2u);
  auto def = ChatTemplate::FromModelDir(dir_.string());
  ASSERT_TRUE(def.ok());
  EXPECT_EQ(*def->Render(kMessages, {}), "D2");
  auto tool = ChatTemplate::FromModelDir(dir_.string(), "tool_use");
  ASSERT_TRUE(tool.ok());
  EXPECT_EQ(*tool->Render(kMessages, {}), "T");
  EXPECT_EQ(ChatTemplate::FromModelDir(dir_.string(), "nope").status().code(), StatusCode::kNotFound);
  // chat_template.jinja wins over the config's template.
  Write("chat_template.jinja", "J");
  auto jinja = ChatTemplate::FromModelDir(dir_.string());
  ASSERT_TRUE(jinja.ok());
  EXPECT_EQ(*jinja->Render(kMessages, {}), "J");
}

TEST_F(ModelDirTest, BadConfigs) {
  EXPECT_EQ(TokenizerConfig::FromModelDir(dir_.string()).status().code(), StatusCode::kNotFound);
  Write("tokenizer_config.json", R"({"chat_template": 5})");
  EXPECT_EQ(TokenizerConfig::FromModelDir(dir_.string()).status().code(), StatusCode::kInvalidArgument);
  Write("tokenizer_config.json", R"({"bos_token": [1]})");
  EXPECT_EQ(TokenizerConfig::FromModelDir(dir_.string()).status().code(), StatusCode::kInvalidArgument);
  Write("tokenizer_config.json", "{not json");
  EXPECT_EQ(TokenizerConfig::FromModelDir(dir_.string()).status().code(), StatusCode::kInvalidArgument);
  Write("tokenizer_config.json", R"({"bos_token": null})");
  auto ok = TokenizerConfig::FromModelDir(dir_.string());
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->bos_token, std::nullopt);
  EXPECT_EQ(ChatTemplate::FromModelDir(dir_.string()).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace tandem::tokenizer
