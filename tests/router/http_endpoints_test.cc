// Over loopback sockets: /v1/models/{id}, /tokenize, /detokenize, /version, the
// x-tandem-ignored-fields header, and the request fields that change the output
// (min_tokens, include_stop_str_in_output, skip_special_tokens,
// add_special_tokens, chat_template_kwargs, request_id).
#include <regex>

#include "tests/router/router_fixture.h"

namespace tandem::router::testing {
namespace {

using nlohmann::json;

const TokenId kHello = kWordBase, kWorld = kWordBase + 1, kStopWord = kWordBase + 2, kBang = kWordBase + 3;
const json kUserHi = {{{"role", "user"}, {"content", "hi"}}};

class HttpEndpointsTest : public RouterFixture {};

// The text of an SSE completion stream.
std::string StreamText(const std::string& body) {
  std::string text;
  for (const std::string& e : SseEvents(body)) {
    if (e == "[DONE]") continue;
    json chunk = json::parse(e);
    if (!chunk["choices"].empty()) text += chunk["choices"][0]["text"].get<std::string>();
  }
  return text;
}

TEST_F(HttpEndpointsTest, ModelRetrieveAndVersion) {
  StartServer();
  HttpResult list = Send(port_, "GET", "/v1/models");
  HttpResult one = Send(port_, "GET", "/v1/models/tiny");
  ASSERT_EQ(one.status, 200) << one.body;
  EXPECT_EQ(one.Json(), list.Json()["data"][0]) << "the same object as the list's entry";
  EXPECT_EQ(one.Json()["max_model_len"], kContext);
  EXPECT_EQ(Send(port_, "GET", "/v1/models/ti%6Ey").status, 200);  // percent-escaped
  HttpResult other = Send(port_, "GET", "/v1/models/gpt-9");
  EXPECT_EQ(other.status, 404);
  EXPECT_EQ(other.Json()["error"]["code"], "model_not_found");
  EXPECT_EQ(other.Json()["error"]["param"], "model");
  EXPECT_EQ(Send(port_, "GET", "/v1/models/").status, 404);
  EXPECT_EQ(Send(port_, "GET", "/v1/models/%zz").status, 400);
  EXPECT_EQ(Send(port_, "POST", "/v1/models/tiny").status, 405);
  HttpResult version = Send(port_, "GET", "/version");
  ASSERT_EQ(version.status, 200);
  EXPECT_TRUE(std::regex_match(version.Json()["version"].get<std::string>(), std::regex(R"(\d+\.\d+\.\d+)")))
      << version.body;
  EXPECT_EQ(Send(port_, "POST", "/version").status, 405);
}

TEST_F(HttpEndpointsTest, TokenizeMatchesWhatGenerationCounts) {
  StartServer();
  HttpResult r = Post(port_, "/tokenize", {{"model", "tiny"}, {"prompt", "hi"}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.Json(), json({{"count", 3}, {"max_model_len", kContext}, {"tokens", {kBos, 'h', 'i'}}}));
  HttpResult completion = Post(port_, "/v1/completions", {{"prompt", "hi"}});
  EXPECT_EQ(completion.Json()["usage"]["prompt_tokens"], r.Json()["count"]);
  r = Post(port_, "/tokenize", {{"prompt", "hi"}, {"add_special_tokens", false}});
  EXPECT_EQ(r.Json()["tokens"], json({'h', 'i'}));
  // Chat: the rendered template, no special tokens added; the same count as a chat completion's prompt.
  r = Post(port_, "/tokenize", {{"messages", kUserHi}});
  ASSERT_EQ(r.status, 200) << r.body;
  const std::string rendered = "<|user|>hi\n<|assistant|>";
  EXPECT_EQ(r.Json()["count"], rendered.size());
  HttpResult chat = Post(port_, "/v1/chat/completions", {{"messages", kUserHi}});
  EXPECT_EQ(chat.Json()["usage"]["prompt_tokens"], r.Json()["count"]);
  r = Post(port_, "/tokenize", {{"messages", kUserHi}, {"add_generation_prompt", false}});
  EXPECT_EQ(r.Json()["count"], rendered.size() - std::string("<|assistant|>").size());
  r = Post(port_, "/tokenize", {{"messages", kUserHi}, {"chat_template_kwargs", {{"k", 1}}}});
  EXPECT_EQ(r.Json()["count"], rendered.size() + std::string("[k=1]").size());
  // Errors name their field; unknown fields are listed.
  auto error_param = [&](const json& body) {
    HttpResult e = Post(port_, "/tokenize", body);
    EXPECT_EQ(e.status / 100, 4) << body.dump();
    return e.Json()["error"]["param"];
  };
  EXPECT_EQ(error_param({{"prompt", 5}}), "prompt");
  EXPECT_EQ(error_param(json::object()), "prompt");
  EXPECT_EQ(error_param({{"prompt", "x"}, {"messages", kUserHi}}), "prompt");
  EXPECT_EQ(error_param({{"messages", "hi"}}), "messages");
  EXPECT_EQ(error_param({{"prompt", "x"}, {"model", "gpt-9"}}), "model");
  EXPECT_EQ(error_param({{"prompt", "x"}, {"return_token_strs", true}}), "return_token_strs");
  r = Post(port_, "/tokenize", {{"prompt", "x"}, {"max_tokens", 3}});
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.headers["x-tandem-ignored-fields"], "max_tokens");
  EXPECT_EQ(Send(port_, "GET", "/tokenize").status, 405);
}

TEST_F(HttpEndpointsTest, DetokenizeRoundTripsAndRefusesBadIds) {
  StartServer();
  const std::string text = "caf\xC3\xA9 au lait";
  json ids = Post(port_, "/tokenize", {{"prompt", text}, {"add_special_tokens", false}}).Json()["tokens"];
  HttpResult r = Post(port_, "/detokenize", {{"model", "tiny"}, {"tokens", ids}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.Json(), json({{"prompt", text}}));
  // Special tokens are kept, as vLLM's decode does.
  EXPECT_EQ(Post(port_, "/detokenize", {{"tokens", {kBos, kHello, kEos}}}).Json()["prompt"], "<bos>Hello<eos>");
  EXPECT_EQ(Post(port_, "/detokenize", {{"tokens", json::array()}}).Json()["prompt"], "");
  for (const json& bad : {json({1, kFakeVocab}), json({1, -1}), json({1, 2.5}), json({1, "a"})}) {
    HttpResult e = Post(port_, "/detokenize", {{"tokens", bad}});
    EXPECT_EQ(e.status, 400) << bad.dump();
    EXPECT_EQ(e.Json()["error"]["param"], "tokens[1]") << bad.dump();
  }
  EXPECT_EQ(Post(port_, "/detokenize", {{"tokens", "1 2"}}).Json()["error"]["param"], "tokens");
  EXPECT_EQ(Post(port_, "/detokenize", json::object()).Json()["error"]["param"], "tokens");
}

TEST_F(HttpEndpointsTest, IgnoredFieldsHeaderOnJsonStreamAndErrors) {
  StartServer();
  json body = {{"prompt", "hi"}, {"frobnicate", 1}, {"user", "u-1"}, {"min_tokens", 0}};
  HttpResult r = Post(port_, "/v1/completions", body);
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.headers["x-tandem-ignored-fields"], "frobnicate") << "known fields are not listed";
  body["stream"] = true;
  r = Post(port_, "/v1/completions", body);
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.headers["x-tandem-ignored-fields"], "frobnicate");
  body["temperature"] = 5;
  r = Post(port_, "/v1/completions", body);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.headers["x-tandem-ignored-fields"], "frobnicate");
  // None: no header, also on the next request of the same connection.
  r = Post(port_, "/v1/completions", {{"prompt", "hi"}});
  EXPECT_EQ(r.headers.count("x-tandem-ignored-fields"), 0u);
  // A hostile key cannot inject a header line.
  r = Send(port_, "POST", "/v1/completions", R"({"prompt": "hi", "a\r\nx-evil: 1": 1})");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.headers.count("x-evil"), 0u);
  EXPECT_EQ(r.headers["x-tandem-ignored-fields"], "1 more");
}

TEST_F(HttpEndpointsTest, MinTokensReachesTheEngineAndHoldsOffStops) {
  StartServer();
  engine_.SetScript({{kHello, kEos}});
  HttpResult r = Post(port_, "/v1/completions", {{"prompt", "x"}, {"min_tokens", 3}, {"max_tokens", 8}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(engine_.submitted().at(0).min_tokens, 3);
  EXPECT_EQ(r.Json()["choices"][0]["text"], "HelloHelloHello");  // the fake skips EOS until then
  EXPECT_EQ(r.Json()["usage"]["completion_tokens"], 4);
  // A stop string cannot end the output within min_tokens tokens either.
  engine_.SetScript({{kHello, kStopWord, kWorld, kStopWord}});
  for (int min_tokens : {0, 2}) {
    r = Post(port_, "/v1/completions", {{"prompt", "x"}, {"stop", "STOP"}, {"min_tokens", min_tokens}});
    EXPECT_EQ(r.Json()["choices"][0]["text"], min_tokens == 0 ? "Hello" : "HelloSTOP world") << min_tokens;
  }
}

TEST_F(HttpEndpointsTest, IncludeStopStrInOutputStreamingAndNot) {
  StartServer();
  engine_.SetScript({{kHello, kWorld, kStopWord, kBang}});
  for (bool stream : {false, true}) {
    for (bool include : {false, true}) {
      json body = {{"prompt", "x"}, {"stop", {"wor", "ld"}}, {"include_stop_str_in_output", include}};
      body["stream"] = stream;
      HttpResult r = Post(port_, "/v1/completions", body);
      ASSERT_EQ(r.status, 200) << r.body;
      const std::string text = stream ? StreamText(r.body) : r.Json()["choices"][0]["text"].get<std::string>();
      EXPECT_EQ(text, include ? "Hello wor" : "Hello ") << "stream " << stream;
    }
  }
  // A stop token id ends the output without its text, unless asked for.
  for (bool include : {false, true}) {
    HttpResult r = Post(port_, "/v1/completions",
                        {{"prompt", "x"}, {"stop_token_ids", {kBang}}, {"include_stop_str_in_output", include}});
    EXPECT_EQ(r.Json()["choices"][0]["text"], include ? "Hello worldSTOP!" : "Hello worldSTOP");
    EXPECT_EQ(r.Json()["choices"][0]["finish_reason"], "stop");
    EXPECT_EQ(r.Json()["usage"]["completion_tokens"], 4);
  }
}

TEST_F(HttpEndpointsTest, SpecialTokensTemplateKwargsAndRequestId) {
  StartServer();
  engine_.SetScript({{kHello, kEos, kWorld}});
  json body = {{"prompt", "x"}, {"ignore_eos", true}, {"max_tokens", 3}};
  EXPECT_EQ(Post(port_, "/v1/completions", body).Json()["choices"][0]["text"], "Hello world");
  body["skip_special_tokens"] = false;
  EXPECT_EQ(Post(port_, "/v1/completions", body).Json()["choices"][0]["text"], "Hello<eos> world");
  // add_special_tokens: no BOS in front of a text prompt.
  ASSERT_EQ(Post(port_, "/v1/completions", {{"prompt", "hi"}, {"add_special_tokens", false}}).status, 200);
  EXPECT_EQ(engine_.submitted().back().prompt_token_ids, (std::vector<TokenId>{'h', 'i'}));
  // chat_template_kwargs reach the template.
  ASSERT_EQ(
      Post(port_, "/v1/chat/completions", {{"messages", kUserHi}, {"chat_template_kwargs", {{"think", false}}}}).status,
      200);
  const std::vector<TokenId> prompt = engine_.submitted().back().prompt_token_ids;
  EXPECT_EQ(std::string(prompt.begin(), prompt.end()), "[think=false]<|user|>hi\n<|assistant|>");
  // request_id becomes the response id.
  HttpResult r = Post(port_, "/v1/chat/completions", {{"messages", kUserHi}, {"request_id", "job-42"}});
  EXPECT_EQ(r.Json()["id"], "chatcmpl-job-42");
}

}  // namespace
}  // namespace tandem::router::testing
