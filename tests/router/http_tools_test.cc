// Tools over HTTP against the fake engine, scripted to emit a tool call in each
// format: message.tool_calls (id, type, name, JSON arguments), content outside
// the calls, finish_reason "tool_calls"; streamed as OpenAI deltas (the call's
// id, type and name first with empty arguments, then argument fragments), with
// no call text leaking as content; required / named choices send the
// structured-output schema to the engine and parse its forced JSON.
#include <gtest/gtest.h>

#include "tests/router/router_fixture.h"

namespace tandem::router::testing {
namespace {

using nlohmann::json;

const json kWeather = {{"type", "function"},
                       {"function",
                        {{"name", "get_weather"},
                         {"parameters", {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}}}}}};
const std::string kHermesTwo =
    "Sure.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n"
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>";
const std::string kLlama = "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}";

class HttpToolsTest : public RouterFixture {
 protected:
  HttpToolsTest() { context_tokens_ = 1024; }  // the fake codec makes a token of each byte
  void Script(const std::string& text, int batch = 3) {
    std::vector<TokenId> tokens = ByteTokens(text);
    tokens.push_back(kEos);
    engine_.SetScript({tokens, batch});
  }
  static json Chat(json extra = json::object()) {
    json body = {{"messages", {{{"role", "user"}, {"content", "weather?"}}}}, {"tools", {kWeather}}};
    for (const auto& [k, v] : extra.items()) body[k] = v;
    return body;
  }
  // A streamed response put back together the way the SDK accumulates it.
  struct Streamed {
    std::string content;
    json calls = json::array();  // [{id, type, function: {name, arguments}}]
    std::string finish_reason;
  };
  static Streamed Accumulate(const std::string& body) {
    Streamed out;
    for (const std::string& event : SseEvents(body)) {
      if (event == "[DONE]") break;
      const json chunk = json::parse(event);
      if (chunk["choices"].empty()) continue;
      const json& choice = chunk["choices"][0];
      const json& delta = choice["delta"];
      if (delta.contains("content")) {
        out.content += delta["content"].get<std::string>();
        EXPECT_EQ(delta["content"].get<std::string>().find("<tool"), std::string::npos) << "call text leaked";
      }
      for (const json& d : delta.value("tool_calls", json::array())) {
        const size_t i = d["index"];
        if (i == out.calls.size()) {
          EXPECT_TRUE(d.contains("id") && d["type"] == "function" && d["function"]["arguments"] == "")
              << "a call's first delta: " << d.dump();
          out.calls.push_back({{"id", d["id"]}, {"type", "function"}, {"function", d["function"]}});
        } else {
          if (i >= out.calls.size()) {
            ADD_FAILURE() << "a delta for a call never announced: " << d.dump();
            continue;
          }
          EXPECT_FALSE(d.contains("id"));
          out.calls[i]["function"]["arguments"] =
              out.calls[i]["function"]["arguments"].get<std::string>() + d["function"]["arguments"].get<std::string>();
        }
      }
      if (!choice["finish_reason"].is_null()) out.finish_reason = choice["finish_reason"];
    }
    return out;
  }
};

TEST_F(HttpToolsTest, HermesCallsWholeAndStreamed) {
  StartServer();
  Script(kHermesTwo);
  HttpResult r = Post(port_, "/v1/chat/completions", Chat());
  ASSERT_EQ(r.status, 200) << r.body;
  const json choice = r.Json()["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_EQ(choice["message"]["content"], "Sure.\n");
  const json& calls = choice["message"]["tool_calls"];
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0]["type"], "function");
  EXPECT_EQ(calls[0]["id"].get<std::string>().rfind("call_", 0), 0u);
  EXPECT_EQ(calls[0]["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(calls[0]["function"]["arguments"].get<std::string>()), json({{"city", "Paris"}}));
  EXPECT_EQ(json::parse(calls[1]["function"]["arguments"].get<std::string>()), json({{"city", "Rome"}}));
  EXPECT_TRUE(engine_.submitted().back().structured_output.empty()) << "auto is not constrained";

  for (int batch : {1, 2, 5, 64}) {
    Script(kHermesTwo, batch);
    r = Post(port_, "/v1/chat/completions", Chat({{"stream", true}}));
    ASSERT_EQ(r.status, 200);
    const Streamed s = Accumulate(r.body);
    EXPECT_EQ(s.content, "Sure.\n") << batch;
    EXPECT_EQ(s.finish_reason, "tool_calls");
    ASSERT_EQ(s.calls.size(), 2u) << batch;
    for (int i : {0, 1}) {
      EXPECT_EQ(s.calls[i]["function"]["name"], calls[i]["function"]["name"]);
      EXPECT_EQ(s.calls[i]["function"]["arguments"], calls[i]["function"]["arguments"]) << "same text as whole";
    }
  }
  // parallel_tool_calls false: the first call only.
  Script(kHermesTwo);
  r = Post(port_, "/v1/chat/completions", Chat({{"parallel_tool_calls", false}}));
  EXPECT_EQ(r.Json()["choices"][0]["message"]["tool_calls"].size(), 1u);
}

TEST_F(HttpToolsTest, Llama3JsonCallsWholeAndStreamed) {
  tool_call_format_ = ToolCallFormat::kLlama3Json;
  StartServer();
  Script(kLlama);
  json choice = Post(port_, "/v1/chat/completions", Chat()).Json()["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_TRUE(choice["message"]["content"].is_null());
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u);
  EXPECT_EQ(choice["message"]["tool_calls"][0]["function"]["arguments"], "{\"city\": \"Oslo\"}");
  Script(kLlama, 1);
  const Streamed s = Accumulate(Post(port_, "/v1/chat/completions", Chat({{"stream", true}})).body);
  EXPECT_EQ(s.content, "");
  ASSERT_EQ(s.calls.size(), 1u);
  EXPECT_EQ(s.calls[0]["function"]["arguments"], "{\"city\": \"Oslo\"}");
  EXPECT_EQ(s.finish_reason, "tool_calls");
  // Plain text stays text, with finish_reason stop and no tool_calls.
  Script("It is sunny {in Oslo}.");
  choice = Post(port_, "/v1/chat/completions", Chat()).Json()["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "stop");
  EXPECT_EQ(choice["message"]["content"], "It is sunny {in Oslo}.");
  EXPECT_FALSE(choice["message"].contains("tool_calls"));
}

TEST_F(HttpToolsTest, ChoiceNoneAndModelsWithoutAParser) {
  tool_call_format_ = ToolCallFormat::kNone;
  StartServer();
  Script(kHermesTwo);
  HttpResult r = Post(port_, "/v1/chat/completions", Chat());
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.Json()["error"]["param"], "tool_choice") << "auto needs a parser, as vLLM";
  r = Post(port_, "/v1/chat/completions", Chat({{"tool_choice", "none"}}));
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.Json()["choices"][0]["message"]["content"], kHermesTwo) << "none: the output is not parsed";
  EXPECT_EQ(r.Json()["choices"][0]["finish_reason"], "stop");
}

TEST_F(HttpToolsTest, RequiredAndNamedAreForcedByStructuredOutput) {
  StartServer();
  Script("[{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Rome\"}}]");
  json choice = Post(port_, "/v1/chat/completions", Chat({{"tool_choice", "required"}})).Json()["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u);
  EXPECT_EQ(choice["message"]["tool_calls"][0]["function"]["arguments"], "{\"city\": \"Rome\"}");
  const json so = json::parse(engine_.submitted().back().structured_output);
  EXPECT_EQ(so["type"], "json_schema");
  EXPECT_EQ(so["schema"]["type"], "array");
  EXPECT_EQ(so["schema"]["items"]["anyOf"][0]["properties"]["name"]["enum"], json({"get_weather"}));

  Script("{\"city\": \"Lima\"}", 1);
  const json named = {{"type", "function"}, {"function", {{"name", "get_weather"}}}};
  choice = Post(port_, "/v1/chat/completions", Chat({{"tool_choice", named}})).Json()["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "stop") << "a named function keeps stop, as OpenAI";
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u);
  EXPECT_EQ(choice["message"]["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(choice["message"]["tool_calls"][0]["function"]["arguments"], "{\"city\": \"Lima\"}");
  EXPECT_EQ(json::parse(engine_.submitted().back().structured_output)["schema"], kWeather["function"]["parameters"]);
  const Streamed s = Accumulate(Post(port_, "/v1/chat/completions", Chat({{"tool_choice", named}, {"stream", true}})).body);
  ASSERT_EQ(s.calls.size(), 1u);
  EXPECT_EQ(s.calls[0]["function"]["arguments"], "{\"city\": \"Lima\"}");
  EXPECT_EQ(s.content, "");
}

}  // namespace
}  // namespace tandem::router::testing
