// Request validation against the field table (request_fields.h): every
// unsupported field is a 400 naming it unless its value is the no-op, type
// errors, min_tokens, the decoding switches, and the ignored-fields list.
#include "router/openai_request.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <tuple>

#include "router/priority_class.h"
#include "router/request_fields.h"

namespace tandem::router {
namespace {

using nlohmann::json;

const json kCompletion = {{"prompt", "x"}};
const json kChat = {{"messages", {{{"role", "user"}, {"content", "x"}}}}};

std::optional<ApiError> Parse(const json& body, ApiKind kind, ApiRequest* out = nullptr) {
  ApiRequest scratch;
  RequestLimits limits;
  limits.vocab_size = 300;
  return kind == ApiKind::kChat ? ParseChatRequest(body, limits, out ? out : &scratch)
                                : ParseCompletionRequest(body, limits, out ? out : &scratch);
}

json With(json body, const std::string& field, json value) {
  body[field] = std::move(value);
  return body;
}

// One unsupported field: a value that needs the feature, and values that are its no-op.
struct UnsupportedCase {
  const char* field;
  json needs_feature;
  std::vector<json> no_ops;  // JSON null (= absent) always passes and is tried too
};

const std::vector<UnsupportedCase>& UnsupportedCases() {
  static const std::vector<UnsupportedCase> cases = {
      {"functions", json::array({{{"name", "f"}}}), {json::array()}},
      {"function_call", {{"name", "f"}}, {"none", "auto"}},
      {"guided_regex", "a+", {}},
      {"guided_choice", json::array({"a", "b"}), {}},
      {"guided_grammar", "root ::= \"a\"", {}},
      {"guided_decoding_backend", "xgrammar", {}},
      {"guided_whitespace_pattern", " ", {}},
      {"structural_tag", "{}", {}},
      {"structured_outputs", {{"json", {{"type", "object"}}}}, {}},
      {"prompt_logprobs", 1, {}},
      {"return_tokens_as_token_ids", true, {false}},
      {"suffix", "end", {""}},
      {"allowed_token_ids", json::array({1, 2}), {}},
      {"bad_words", json::array({"x"}), {json::array()}},
      {"logits_processors", json::array({"my.proc"}), {json::array()}},
      {"use_beam_search", true, {false}},
      {"length_penalty", 0.5, {1, 1.0}},
      {"truncate_prompt_tokens", 5, {}},
      {"service_tier", "flex", {"auto", "default"}},
      {"cache_salt", "salt", {}},
      {"continue_final_message", true, {false}},
      {"chat_template", "{{ messages }}", {}},
      {"documents", json::array({{{"title", "t"}, {"text", "x"}}}), {}},
      {"mm_processor_kwargs", {{"a", 1}}, {json::object()}},
      {"modalities", json::array({"text", "audio"}), {json::array({"text"})}},
      {"audio", {{"voice", "alloy"}}, {}},
      {"web_search_options", json::object(), {}},
      {"reasoning_effort", "high", {}},
      {"verbosity", "low", {}},
      {"include_reasoning", false, {true}},
      {"store", true, {false}},
      {"kv_transfer_params", {{"a", 1}}, {}},
      {"vllm_xargs", {{"a", 1}}, {json::object()}},
  };
  return cases;
}

TEST(RequestFieldsTest, TableIsConsistent) {
  std::set<std::string> names;
  for (const RequestField& f : RequestFieldTable()) {
    EXPECT_TRUE(names.insert(f.name).second) << "duplicate " << f.name;
    EXPECT_NE(f.bodies, 0) << f.name;
    EXPECT_TRUE(f.note != nullptr && *f.note != '\0') << f.name;
    // Implemented fields are checked by their readers; the others by the table.
    EXPECT_EQ(f.use == FieldUse::kImplemented, f.check == nullptr) << f.name;
    EXPECT_EQ(FindRequestField(f.name), &f);
  }
  EXPECT_EQ(FindRequestField("no_such_field"), nullptr);
}

// router/README.md's field table is the documentation of this one: same fields, uses and bodies.
TEST(RequestFieldsTest, RouterReadmeTableMatchesTheCode) {
  const char* dir = std::getenv("TANDEM_SOURCE_DIR");
  if (dir == nullptr) GTEST_SKIP() << "TANDEM_SOURCE_DIR is not set (run through ctest)";
  std::ifstream in(std::string(dir) + "/router/README.md");
  ASSERT_TRUE(in.good());
  const std::regex row(R"(^\| `([a-z_]+)` \| (implemented|metadata|unsupported) \| ([a-z, ]+) \|)");
  std::map<std::string, std::string> documented;
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, row)) documented[m[1]] = m[2].str() + " | " + m[3].str();
  }
  std::map<std::string, std::string> code;
  for (const RequestField& f : RequestFieldTable()) {
    const char* use = f.use == FieldUse::kImplemented ? "implemented"
                      : f.use == FieldUse::kMetadata  ? "metadata"
                                                      : "unsupported";
    std::string bodies;
    for (auto [bit, name] : {std::pair{kCompletionsBody, "completions"}, std::pair{kChatBody, "chat"},
                             std::pair{kTokenizeBody, "tokenize"}, std::pair{kDetokenizeBody, "detokenize"}}) {
      if (f.bodies & bit) bodies += (bodies.empty() ? "" : ", ") + std::string(name);
    }
    code[f.name] = std::string(use) + " | " + bodies;
  }
  EXPECT_EQ(documented, code);
}

TEST(RequestFieldsTest, EveryUnsupportedFieldIsA400NamingItUnlessItsValueIsTheNoOp) {
  std::set<std::string> tested;
  for (const UnsupportedCase& c : UnsupportedCases()) {
    tested.insert(c.field);
    const RequestField* field = FindRequestField(c.field);
    ASSERT_NE(field, nullptr) << c.field;
    EXPECT_EQ(field->use, FieldUse::kUnsupported) << c.field;
    for (ApiKind kind : {ApiKind::kCompletion, ApiKind::kChat}) {
      const json& base = kind == ApiKind::kChat ? kChat : kCompletion;
      std::optional<ApiError> e = Parse(With(base, c.field, c.needs_feature), kind);
      ASSERT_TRUE(e.has_value()) << c.field << " was accepted";
      EXPECT_EQ(e->http_status, 400) << c.field;
      EXPECT_EQ(e->type, "invalid_request_error") << c.field;
      EXPECT_EQ(e->param, c.field);
      EXPECT_EQ(e->code, "unsupported_parameter") << c.field;
      EXPECT_NE(e->message.find("not supported"), std::string::npos) << e->message;
      std::vector<json> no_ops = c.no_ops;
      no_ops.push_back(nullptr);
      for (const json& no_op : no_ops) {
        std::optional<ApiError> ok = Parse(With(base, c.field, no_op), kind);
        EXPECT_FALSE(ok.has_value()) << c.field << " = " << no_op.dump() << ": " << ok->message;
      }
    }
  }
  for (const RequestField& f : RequestFieldTable()) {
    if (f.use == FieldUse::kUnsupported && (f.bodies & (kCompletionsBody | kChatBody))) {
      EXPECT_TRUE(tested.count(f.name)) << "no case for unsupported field " << f.name;
    }
  }
}

TEST(RequestFieldsTest, TypeErrorsNameTheField) {
  const std::vector<std::pair<const char*, json>> cases = {
      {"tools", "not-a-list"},
      {"tools", {{"type", "function"}}},
      {"tool_choice", 3},
      {"tool_choice", "sometimes"},
      {"functions", "f"},
      {"parallel_tool_calls", "yes"},
      {"response_format", "json"},
      {"user", 5},
      {"metadata", "x"},
      {"safety_identifier", json::array()},
      {"prompt_cache_key", 1},
      {"prediction", "text"},
      {"logprobs", "yes"},
      {"priority", "high"},
      {"priority", 1.5},
      {"echo", "no"},
      {"logit_bias", json::array()},
      {"modalities", "text"},
      {"store", "no"},
  };
  for (const auto& [field, value] : cases) {
    std::optional<ApiError> e = Parse(With(kChat, field, value), ApiKind::kChat);
    ASSERT_TRUE(e.has_value()) << field << " = " << value.dump();
    EXPECT_EQ(e->http_status, 400);
    EXPECT_EQ(e->param, field) << value.dump();
    EXPECT_TRUE(e->code.empty()) << field << ": a type error, not an unsupported value";
  }
  std::optional<ApiError> e = Parse(With(kChat, "response_format", {{"type", 5}}), ApiKind::kChat);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "response_format.type");
  e = Parse(With(kChat, "response_format", {{"type", "yaml"}}), ApiKind::kChat);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "response_format.type");
  e = Parse(With(kChat, "response_format", {{"type", "json_schema"}}), ApiKind::kChat);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "response_format.json_schema");
  // Metadata of the right type is accepted and changes nothing.
  json meta = kChat;
  meta["user"] = "u-1";
  meta["metadata"] = {{"k", "v"}};
  meta["parallel_tool_calls"] = false;
  meta["prediction"] = {{"type", "content"}, {"content", "x"}};
  EXPECT_FALSE(Parse(meta, ApiKind::kChat).has_value());
}

// No implemented field accepts a value of the wrong type: each has a reader.
TEST(RequestFieldsTest, EveryImplementedFieldIsTypeChecked) {
  for (const RequestField& f : RequestFieldTable()) {
    if (f.use != FieldUse::kImplemented) continue;
    for (ApiKind kind : {ApiKind::kCompletion, ApiKind::kChat}) {
      const uint8_t bit = kind == ApiKind::kChat ? kChatBody : kCompletionsBody;
      if ((f.bodies & bit) == 0) continue;
      const json& base = kind == ApiKind::kChat ? kChat : kCompletion;
      std::optional<ApiError> as_object = Parse(With(base, f.name, {{"bad", 1}}), kind);
      std::optional<ApiError> as_string = Parse(With(base, f.name, "\x01"), kind);
      const std::optional<ApiError>& e = as_object ? as_object : as_string;
      ASSERT_TRUE(e.has_value()) << f.name << " accepted both an object and a string";
      EXPECT_EQ(e->param.rfind(f.name, 0), 0u) << f.name << ": param " << e->param;
    }
  }
}

// priority: an integer within int32 on both endpoints; absent or null leaves it to the API key.
TEST(OpenAiRequestTest, Priority) {
  for (ApiKind kind : {ApiKind::kCompletion, ApiKind::kChat}) {
    const json& base = kind == ApiKind::kChat ? kChat : kCompletion;
    ApiRequest r;
    ASSERT_FALSE(Parse(base, kind, &r));
    EXPECT_EQ(r.priority, std::nullopt);
    ApiRequest null_priority;
    ASSERT_FALSE(Parse(With(base, "priority", nullptr), kind, &null_priority));
    EXPECT_EQ(null_priority.priority, std::nullopt);
    for (int64_t value : {int64_t{-5}, int64_t{0}, int64_t{3}, kMinPriority, kMaxPriority}) {
      ApiRequest given;
      ASSERT_FALSE(Parse(With(base, "priority", value), kind, &given)) << value;
      EXPECT_EQ(given.priority, value);
    }
    for (const json& bad : {json("1"), json(1.5), json(true), json::array({1}), json(kMaxPriority + 1),
                            json(kMinPriority - 1), json(uint64_t{1} << 63)}) {
      std::optional<ApiError> e = Parse(With(base, "priority", bad), kind);
      ASSERT_TRUE(e.has_value()) << bad.dump();
      EXPECT_EQ(e->http_status, 400);
      EXPECT_EQ(e->param, "priority") << bad.dump();
      EXPECT_NE(e->message.find("priority must be"), std::string::npos) << e->message;
    }
  }
}

TEST(OpenAiRequestTest, LogprobsAndTopLogprobs) {
  ApiRequest r;
  ASSERT_FALSE(Parse(kCompletion, ApiKind::kCompletion, &r));
  EXPECT_EQ(r.logprobs, -1);
  for (int k : {0, 5, 20}) {
    ApiRequest c;
    ASSERT_FALSE(Parse(With(kCompletion, "logprobs", k), ApiKind::kCompletion, &c)) << k;
    EXPECT_EQ(c.logprobs, k);
  }
  ApiRequest chat;
  ASSERT_FALSE(Parse(With(With(kChat, "logprobs", true), "top_logprobs", 7), ApiKind::kChat, &chat));
  EXPECT_EQ(chat.logprobs, 7);
  ApiRequest chat_no_top;
  ASSERT_FALSE(Parse(With(kChat, "logprobs", true), ApiKind::kChat, &chat_no_top));
  EXPECT_EQ(chat_no_top.logprobs, 0);
  ApiRequest chat_off;
  ASSERT_FALSE(Parse(With(kChat, "logprobs", false), ApiKind::kChat, &chat_off));
  EXPECT_EQ(chat_off.logprobs, -1);
  const std::vector<std::tuple<ApiKind, json, std::string>> bad = {
      {ApiKind::kCompletion, With(kCompletion, "logprobs", 21), "logprobs"},
      {ApiKind::kCompletion, With(kCompletion, "logprobs", -1), "logprobs"},
      {ApiKind::kCompletion, With(kCompletion, "logprobs", true), "logprobs"},
      {ApiKind::kCompletion, With(kCompletion, "logprobs", 2.5), "logprobs"},
      {ApiKind::kChat, With(kChat, "logprobs", 3), "logprobs"},
      {ApiKind::kChat, With(With(kChat, "logprobs", true), "top_logprobs", 21), "top_logprobs"},
      {ApiKind::kChat, With(With(kChat, "logprobs", true), "top_logprobs", -1), "top_logprobs"},
      {ApiKind::kChat, With(kChat, "top_logprobs", 2), "top_logprobs"},  // needs logprobs true
  };
  for (const auto& [kind, body, param] : bad) {
    std::optional<ApiError> e = Parse(body, kind);
    ASSERT_TRUE(e.has_value()) << body.dump();
    EXPECT_EQ(e->http_status, 400);
    EXPECT_EQ(e->param, param) << body.dump();
  }
}

TEST(OpenAiRequestTest, LogitBias) {
  ApiRequest r;
  ASSERT_FALSE(Parse(With(kCompletion, "logit_bias", {{"5", -100}, {"7", 2.5}, {"0", 100}}), ApiKind::kCompletion, &r));
  std::map<TokenId, float> got(r.logit_bias.begin(), r.logit_bias.end());
  EXPECT_EQ(got, (std::map<TokenId, float>{{0, 100.f}, {5, -100.f}, {7, 2.5f}}));
  ApiRequest empty;
  ASSERT_FALSE(Parse(With(kChat, "logit_bias", json::object()), ApiKind::kChat, &empty));
  EXPECT_TRUE(empty.logit_bias.empty());
  for (const json& bad : {json{{"5", 101}}, json{{"5", -100.5}}, json{{"5", "1"}}, json{{"x", 1}}, json{{"-1", 1}},
                          json{{"999999", 1}}, json{{"", 1}}, json{{"5 ", 1}}, json{{"05", 1}, {"5", 2}},
                          json::array({1}), json("5")}) {
    std::optional<ApiError> e = Parse(With(kChat, "logit_bias", bad), ApiKind::kChat);
    ASSERT_TRUE(e.has_value()) << bad.dump();
    EXPECT_EQ(e->http_status, 400);
    EXPECT_EQ(e->param, "logit_bias") << bad.dump();
  }
}

TEST(OpenAiRequestTest, MinTokens) {
  ApiRequest r;
  ASSERT_FALSE(Parse(With(With(kCompletion, "min_tokens", 4), "max_tokens", 4), ApiKind::kCompletion, &r));
  EXPECT_EQ(r.min_tokens, 4);
  json over = With(With(kCompletion, "min_tokens", 5), "max_tokens", 4);
  std::optional<ApiError> e = Parse(over, ApiKind::kCompletion);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "min_tokens");
  // max_completion_tokens is the bound when given.
  EXPECT_TRUE(Parse(With(With(over, "max_completion_tokens", 3), "max_tokens", 9), ApiKind::kCompletion));
  EXPECT_FALSE(Parse(With(over, "max_completion_tokens", 5), ApiKind::kCompletion));
  for (const json& bad : {json(-1), json("3"), json(2.5), json(int64_t{1} << 40)}) {
    e = Parse(With(kChat, "min_tokens", bad), ApiKind::kChat);
    ASSERT_TRUE(e.has_value()) << bad.dump();
    EXPECT_EQ(e->param, "min_tokens");
  }
  ApiRequest unset;
  ASSERT_FALSE(Parse(kChat, ApiKind::kChat, &unset));
  EXPECT_EQ(unset.min_tokens, 0);
}

TEST(OpenAiRequestTest, DecodingSwitchesAndDefaults) {
  ApiRequest completion, chat;
  ASSERT_FALSE(Parse(kCompletion, ApiKind::kCompletion, &completion));
  ASSERT_FALSE(Parse(kChat, ApiKind::kChat, &chat));
  EXPECT_TRUE(completion.add_special_tokens);
  EXPECT_FALSE(chat.add_special_tokens);  // the chat template writes them
  EXPECT_TRUE(completion.skip_special_tokens);
  EXPECT_FALSE(completion.include_stop_str_in_output);
  json body = kCompletion;
  body["add_special_tokens"] = false;
  body["skip_special_tokens"] = false;
  body["include_stop_str_in_output"] = true;
  body["spaces_between_special_tokens"] = true;
  ApiRequest r;
  ASSERT_FALSE(Parse(body, ApiKind::kCompletion, &r));
  EXPECT_FALSE(r.add_special_tokens);
  EXPECT_FALSE(r.skip_special_tokens);
  EXPECT_TRUE(r.include_stop_str_in_output);
  // spaces_between_special_tokens false only changes output when special tokens are kept: refused there.
  body["spaces_between_special_tokens"] = false;
  std::optional<ApiError> e = Parse(body, ApiKind::kCompletion);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "spaces_between_special_tokens");
  body["skip_special_tokens"] = true;
  EXPECT_FALSE(Parse(body, ApiKind::kCompletion));
  e = Parse(With(kChat, "include_stop_str_in_output", 1), ApiKind::kChat);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "include_stop_str_in_output");
  e = Parse(With(kChat, "stream_options", {{"continuous_usage_stats", true}}), ApiKind::kChat);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "stream_options.continuous_usage_stats");
}

TEST(OpenAiRequestTest, RequestIdChatTemplateKwargsAndToolCalls) {
  ApiRequest r;
  ASSERT_FALSE(Parse(With(kChat, "request_id", "job-7:a.b_c"), ApiKind::kChat, &r));
  EXPECT_EQ(r.request_id, "job-7:a.b_c");
  for (const json& bad : {json(""), json("a b"), json("x\r\ny"), json(std::string(129, 'a')), json(7)}) {
    std::optional<ApiError> e = Parse(With(kChat, "request_id", bad), ApiKind::kChat);
    ASSERT_TRUE(e.has_value()) << bad.dump();
    EXPECT_EQ(e->param, "request_id");
  }
  ASSERT_FALSE(Parse(With(kChat, "chat_template_kwargs", {{"enable_thinking", false}}), ApiKind::kChat, &r));
  EXPECT_EQ(r.chat_template_kwargs, json({{"enable_thinking", false}}));
  std::optional<ApiError> e = Parse(With(kChat, "chat_template_kwargs", {{"tools", json::array()}}), ApiKind::kChat);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "chat_template_kwargs.tools");
  json calls = kChat;
  calls["messages"].push_back({{"role", "assistant"}, {"tool_calls", json::array({{{"id", "c1"}}})}});
  e = Parse(calls, ApiKind::kChat);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "messages[1].tool_calls[0].function");
  calls["messages"][1]["tool_calls"] = json::array();
  ASSERT_FALSE(Parse(calls, ApiKind::kChat, &r));
  EXPECT_FALSE(r.messages[1].contains("tool_calls")) << "an empty list is left out for the templates";
}

TEST(OpenAiRequestTest, UnknownFieldsAreListedAndKnownOnesAreNot) {
  json body = kCompletion;
  body["frobnicate"] = 1;
  body["messages"] = json::array();  // a chat field: unknown to completions
  body["user"] = "u";
  body["min_tokens"] = 1;
  body["stream_options"] = {{"include_usage", true}, {"extra_option", 1}};
  ApiRequest r;
  ASSERT_FALSE(Parse(body, ApiKind::kCompletion, &r));
  EXPECT_EQ(r.ignored_fields, (std::vector<std::string>{"frobnicate", "messages", "stream_options.extra_option"}));
  json chat = kChat;
  chat["prompt"] = "x";
  chat["messages"][0]["reasoning_content"] = "hmm";
  ApiRequest c;
  ASSERT_FALSE(Parse(chat, ApiKind::kChat, &c));
  EXPECT_EQ(c.ignored_fields, (std::vector<std::string>{"prompt", "messages[].reasoning_content"}));
  ApiRequest clean;
  ASSERT_FALSE(Parse(kChat, ApiKind::kChat, &clean));
  EXPECT_TRUE(clean.ignored_fields.empty());
}

TEST(OpenAiRequestTest, IgnoredFieldsHeaderValueIsPrintableAndBounded) {
  EXPECT_EQ(IgnoredFieldsHeaderValue({}), "");
  EXPECT_EQ(IgnoredFieldsHeaderValue({"a", "b_c", "messages[].x"}), "a, b_c, messages[].x");
  EXPECT_EQ(IgnoredFieldsHeaderValue({"ok", "bad\r\nX-Evil: 1", "", std::string(65, 'a')}), "ok, 3 more");
  std::vector<std::string> many;
  for (int i = 0; i < 20; ++i) many.push_back("f" + std::to_string(i));
  const std::string value = IgnoredFieldsHeaderValue(many);
  EXPECT_EQ(value.substr(value.size() - 8), ", 4 more");
  EXPECT_NE(value.find("f15"), std::string::npos);
  EXPECT_EQ(value.find("f16"), std::string::npos);
}

}  // namespace
}  // namespace tandem::router

namespace tandem::router {
namespace {

TEST(ResponseFormatTest, BecomesTheSpecTheNodesEnforce) {
  ApiRequest r;
  ASSERT_FALSE(ParseChatRequest(With(kChat, "response_format", {{"type", "text"}}), RequestLimits{}, &r));
  EXPECT_EQ(r.structured_output, "");
  ApiRequest o;
  ASSERT_FALSE(ParseChatRequest(With(kChat, "response_format", {{"type", "json_object"}}), RequestLimits{}, &o));
  EXPECT_EQ(json::parse(o.structured_output), json({{"type", "json_object"}}));
  const json schema = {{"type", "object"},
                       {"properties", {{"name", {{"type", "string"}}}, {"age", {{"type", "integer"}}}}},
                       {"required", json::array({"name"})}};
  ApiRequest s;
  ASSERT_FALSE(ParseChatRequest(
      With(kChat, "response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "p"}, {"schema", schema}}}}),
      RequestLimits{}, &s));
  EXPECT_EQ(json::parse(s.structured_output), json({{"type", "json_schema"}, {"schema", schema}}));
  // vLLM's guided_json, as an object and as JSON text, on completions too.
  json completion = {{"prompt", "x"}, {"guided_json", schema}};
  ApiRequest g;
  ASSERT_FALSE(ParseCompletionRequest(completion, RequestLimits{}, &g));
  EXPECT_EQ(g.structured_output, s.structured_output);
  completion["guided_json"] = schema.dump();
  ApiRequest t;
  ASSERT_FALSE(ParseCompletionRequest(completion, RequestLimits{}, &t));
  EXPECT_EQ(t.structured_output, s.structured_output);
}

TEST(ResponseFormatTest, BadSchemasAre400sNamingTheField) {
  auto format = [](json schema) {
    return json{{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", std::move(schema)}}}};
  };
  const std::vector<std::pair<json, std::string>> cases = {
      {{{"type", "json_schema"}, {"json_schema", "x"}}, "response_format.json_schema"},
      {{{"type", "json_schema"}, {"json_schema", {{"name", "x"}}}}, "response_format.json_schema.schema"},
      {{{"type", "json_schema"}, {"json_schema", {{"name", 3}, {"schema", {{"type", "object"}}}}}},
       "response_format.json_schema.name"},
      {format({{"type", "string"}, {"pattern", "a+"}}), "response_format.json_schema"},
      {format({{"type", "teapot"}}), "response_format.json_schema"},
      {format({{"type", "object"}, {"required", "name"}}), "response_format.json_schema"},
      {format({{"$ref", "#/$defs/missing"}}), "response_format.json_schema"},
      {format({{"type", "array"}, {"minItems", 3}, {"maxItems", 1}}), "response_format.json_schema"},
  };
  for (const auto& [value, param] : cases) {
    ApiRequest r;
    std::optional<ApiError> e = ParseChatRequest(With(kChat, "response_format", value), RequestLimits{}, &r);
    ASSERT_TRUE(e.has_value()) << value.dump();
    EXPECT_EQ(e->http_status, 400);
    EXPECT_EQ(e->param, param) << value.dump() << ": " << e->message;
    EXPECT_TRUE(r.structured_output.empty());
  }
  ApiRequest both;
  json body = With(kChat, "response_format", {{"type", "json_object"}});
  body["guided_json"] = {{"type", "object"}};
  std::optional<ApiError> e = ParseChatRequest(body, RequestLimits{}, &both);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "guided_json");
  ApiRequest text;
  e = ParseChatRequest(With(kChat, "guided_json", "{not json"), RequestLimits{}, &text);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "guided_json");
}

}  // namespace
}  // namespace tandem::router
