// Over loopback sockets: the request fields that change the output
// (min_tokens, include_stop_str_in_output, skip_special_tokens).
#include "tests/router/router_fixture.h"

namespace tandem::router::testing {
namespace {

using nlohmann::json;

const TokenId kHello = kWordBase, kWorld = kWordBase + 1, kStopWord = kWordBase + 2, kBang = kWordBase + 3;

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

TEST_F(HttpEndpointsTest, MinTokensReachesTheBackendAndHoldsOffStops) {
  StartServer();
  backend_.SetScript({{kHello, kEos}});
  HttpResult r = Post(port_, "/v1/completions", {{"prompt", "x"}, {"min_tokens", 3}, {"max_tokens", 8}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(backend_.submitted().at(0).min_tokens, 3);
  EXPECT_EQ(r.Json()["choices"][0]["text"], "HelloHelloHello");  // the fake skips EOS until then
  EXPECT_EQ(r.Json()["usage"]["completion_tokens"], 4);
  // A stop string cannot end the output within min_tokens tokens either.
  backend_.SetScript({{kHello, kStopWord, kWorld, kStopWord}});
  for (int min_tokens : {0, 2}) {
    r = Post(port_, "/v1/completions", {{"prompt", "x"}, {"stop", "STOP"}, {"min_tokens", min_tokens}});
    EXPECT_EQ(r.Json()["choices"][0]["text"], min_tokens == 0 ? "Hello" : "HelloSTOP world") << min_tokens;
  }
}

TEST_F(HttpEndpointsTest, IncludeStopStrInOutputStreamingAndNot) {
  StartServer();
  backend_.SetScript({{kHello, kWorld, kStopWord, kBang}});
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

TEST_F(HttpEndpointsTest, SkipSpecialTokens) {
  StartServer();
  backend_.SetScript({{kHello, kEos, kWorld}});
  json body = {{"prompt", "x"}, {"ignore_eos", true}, {"max_tokens", 3}};
  EXPECT_EQ(Post(port_, "/v1/completions", body).Json()["choices"][0]["text"], "Hello world");
  body["skip_special_tokens"] = false;
  EXPECT_EQ(Post(port_, "/v1/completions", body).Json()["choices"][0]["text"], "Hello<eos> world");
}

}  // namespace
}  // namespace tandem::router::testing
