// tools / tool_choice / parallel_tool_calls validation, assistant tool_calls in
// messages (JSON-string arguments become objects for the templates), and the
// structured-output schema of `required` and a named function.
#include "router/tool_request.h"

#include <gtest/gtest.h>

#include "router/openai_request.h"

namespace tandem::router {
namespace {

using nlohmann::json;

const json kWeather = {{"type", "function"},
                       {"function",
                        {{"name", "get_weather"},
                         {"description", "Weather for a city"},
                         {"parameters",
                          {{"type", "object"},
                           {"properties", {{"city", {{"type", "string"}}}}},
                           {"required", {"city"}}}}}}};
const json kTime = {{"type", "function"}, {"function", {{"name", "get_time"}}}};

json Chat(json extra) {
  json body = {{"messages", {{{"role", "user"}, {"content", "x"}}}}};
  for (const auto& [k, v] : extra.items()) body[k] = v;
  return body;
}

std::optional<ApiError> Parse(const json& body, ApiRequest* out = nullptr) {
  ApiRequest scratch;
  return ParseChatRequest(body, RequestLimits{}, out ? out : &scratch);
}

TEST(ToolRequestTest, ToolsAndChoiceDefaults) {
  ApiRequest r;
  ASSERT_FALSE(Parse(Chat({{"tools", {kWeather, kTime}}}), &r));
  EXPECT_EQ(r.tools.choice, ToolChoice::kAuto) << "tools given: auto by default";
  EXPECT_TRUE(r.tools.parallel_tool_calls);
  ASSERT_EQ(r.tools.tools.size(), 2u);
  EXPECT_EQ(r.tools.tools[0], kWeather);
  EXPECT_EQ(r.tools.tools[1], kTime) << "only the keys the client gave";
  ApiRequest none;
  ASSERT_FALSE(Parse(Chat({{"tools", {kWeather}}, {"tool_choice", "none"}, {"parallel_tool_calls", false}}), &none));
  EXPECT_EQ(none.tools.choice, ToolChoice::kNone);
  EXPECT_TRUE(none.tools.has_tools()) << "none still renders the tools";
  EXPECT_FALSE(none.tools.parallel_tool_calls);
  ApiRequest plain;
  ASSERT_FALSE(Parse(Chat({{"tool_choice", "auto"}, {"tools", json::array()}}), &plain));
  EXPECT_EQ(plain.tools.choice, ToolChoice::kNone) << "auto without tools chooses nothing";
  EXPECT_FALSE(plain.tools.has_tools());
  ApiRequest named;
  ASSERT_FALSE(Parse(Chat({{"tools", {kWeather, kTime}},
                           {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_time"}}}}}}),
                     &named));
  EXPECT_EQ(named.tools.choice, ToolChoice::kNamed);
  EXPECT_EQ(named.tools.named_function, "get_time");
}

TEST(ToolRequestTest, BadToolsAndChoicesNameTheField) {
  json no_params = kWeather;
  no_params["function"]["parameters"] = "object";
  json no_name = kWeather;
  no_name["function"].erase("name");
  json bad_name = kWeather;
  bad_name["function"]["name"] = "get weather";
  json wrong_type = kWeather;
  wrong_type["type"] = "retrieval";
  const std::vector<std::pair<json, std::string>> cases = {
      {Chat({{"tools", "not-a-list"}}), "tools"},
      {Chat({{"tools", {{{"type", "function"}}}}}), "tools[0].function"},
      {Chat({{"tools", {kWeather, 5}}}), "tools[1]"},
      {Chat({{"tools", {no_name}}}), "tools[0].function.name"},
      {Chat({{"tools", {bad_name}}}), "tools[0].function.name"},
      {Chat({{"tools", {no_params}}}), "tools[0].function.parameters"},
      {Chat({{"tools", {wrong_type}}}), "tools[0].type"},
      {Chat({{"tools", {kWeather, kWeather}}}), "tools[1].function.name"},
      {Chat({{"tools", {kWeather}}, {"tool_choice", 3}}), "tool_choice"},
      {Chat({{"tools", {kWeather}}, {"tool_choice", "sometimes"}}), "tool_choice"},
      {Chat({{"tools", {kWeather}}, {"tool_choice", {{"type", "function"}}}}), "tool_choice.function.name"},
      {Chat({{"tools", {kWeather}}, {"tool_choice", {{"type", "x"}, {"function", {{"name", "get_weather"}}}}}}),
       "tool_choice.type"},
      {Chat({{"tools", {kWeather}}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "nope"}}}}}}),
       "tool_choice.function.name"},
      {Chat({{"tool_choice", "required"}}), "tool_choice"},
      {Chat({{"tool_choice", {{"type", "function"}, {"function", {{"name", "get_weather"}}}}}}),
       "tool_choice.function.name"},
      {Chat({{"tools", {kWeather}}, {"parallel_tool_calls", "yes"}}), "parallel_tool_calls"},
  };
  for (const auto& [body, param] : cases) {
    std::optional<ApiError> e = Parse(body);
    ASSERT_TRUE(e.has_value()) << body.dump();
    EXPECT_EQ(e->http_status, 400);
    EXPECT_EQ(e->param, param) << body.dump() << ": " << e->message;
  }
}

TEST(ToolRequestTest, AssistantToolCallsBecomeObjectsForTheTemplate) {
  json body = Chat({});
  body["messages"].push_back(
      {{"role", "assistant"},
       {"content", nullptr},
       {"tool_calls",
        {{{"id", "call_1"},
          {"type", "function"},
          {"function", {{"name", "get_weather"}, {"arguments", "{\"city\": \"Paris\"}"}}}},
         {{"id", "call_2"}, {"type", "function"}, {"function", {{"name", "get_time"}, {"arguments", ""}}}}}}});
  body["messages"].push_back({{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "{\"temp\": 21}"}});
  ApiRequest r;
  ASSERT_FALSE(Parse(body, &r));
  const json& a = r.messages[1];
  EXPECT_EQ(a["content"], "") << "null content renders as empty text";
  ASSERT_EQ(a["tool_calls"].size(), 2u);
  EXPECT_EQ(a["tool_calls"][0],
            json({{"id", "call_1"},
                  {"type", "function"},
                  {"function", {{"name", "get_weather"}, {"arguments", {{"city", "Paris"}}}}}}));
  EXPECT_EQ(a["tool_calls"][1]["function"]["arguments"], json::object());
  EXPECT_EQ(r.messages[2], json({{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "{\"temp\": 21}"}}));

  const std::vector<std::pair<json, std::string>> bad = {
      {{{"type", "function"}, {"function", {{"name", "f"}, {"arguments", "{not json"}}}},
       "messages[1].tool_calls[0].function.arguments"},
      {{{"type", "function"}, {"function", {{"name", "f"}, {"arguments", "[1, 2]"}}}},
       "messages[1].tool_calls[0].function.arguments"},
      {{{"type", "function"}, {"function", {{"name", "f"}, {"arguments", 5}}}},
       "messages[1].tool_calls[0].function.arguments"},
      {{{"type", "function"}, {"function", {{"arguments", "{}"}}}}, "messages[1].tool_calls[0].function.name"},
      {{{"type", "code"}, {"function", {{"name", "f"}}}}, "messages[1].tool_calls[0].type"},
      {"call", "messages[1].tool_calls[0]"},
  };
  for (const auto& [call, param] : bad) {
    json b = Chat({});
    b["messages"].push_back({{"role", "assistant"}, {"tool_calls", {call}}});
    std::optional<ApiError> e = Parse(b);
    ASSERT_TRUE(e.has_value()) << call.dump();
    EXPECT_EQ(e->param, param) << call.dump();
  }
  json user_calls = Chat({});
  user_calls["messages"][0]["tool_calls"] = {{{"type", "function"}, {"function", {{"name", "f"}}}}};
  std::optional<ApiError> e = Parse(user_calls);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "messages[0].tool_calls");
  json deep = Chat({});
  deep["messages"].push_back({{"role", "assistant"},
                              {"tool_calls",
                               {{{"type", "function"},
                                 {"function", {{"name", "f"}, {"arguments", std::string(40, '[') + "1" +
                                                                            std::string(40, ']')}}}}}}});
  e = Parse(deep);
  ASSERT_TRUE(e.has_value()) << "arguments deeper than the limit";
  EXPECT_EQ(e->param, "messages[1].tool_calls[0].function.arguments");
}

TEST(ToolRequestTest, RequiredAndNamedChoicesGetTheirSchemas) {
  ToolRequest none;
  EXPECT_EQ(ToolChoiceStructuredOutput(none), "");
  ApiRequest r;
  ASSERT_FALSE(Parse(Chat({{"tools", {kWeather, kTime}}, {"tool_choice", "required"}}), &r));
  json so = json::parse(ToolChoiceStructuredOutput(r.tools));
  EXPECT_EQ(so["type"], "json_schema");
  const json& schema = so["schema"];
  EXPECT_EQ(schema["type"], "array");
  EXPECT_EQ(schema["minItems"], 1);
  EXPECT_FALSE(schema.contains("maxItems"));
  ASSERT_EQ(schema["items"]["anyOf"].size(), 2u);
  const json& first = schema["items"]["anyOf"][0];
  EXPECT_EQ(first["properties"]["name"], json({{"type", "string"}, {"enum", {"get_weather"}}}));
  EXPECT_EQ(first["properties"]["parameters"], kWeather["function"]["parameters"]);
  EXPECT_EQ(first["required"], json({"name", "parameters"}));
  EXPECT_EQ(schema["items"]["anyOf"][1]["properties"]["parameters"],
            json({{"type", "object"}, {"properties", json::object()}}))
      << "a tool without parameters takes an empty object";

  ASSERT_FALSE(Parse(Chat({{"tools", {kWeather}}, {"tool_choice", "required"}, {"parallel_tool_calls", false}}), &r));
  EXPECT_EQ(json::parse(ToolChoiceStructuredOutput(r.tools))["schema"]["maxItems"], 1);

  ApiRequest named;
  ASSERT_FALSE(Parse(Chat({{"tools", {kWeather, kTime}},
                           {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_weather"}}}}}}),
                     &named));
  EXPECT_EQ(json::parse(ToolChoiceStructuredOutput(named.tools)),
            json({{"type", "json_schema"}, {"schema", kWeather["function"]["parameters"]}}));
}

}  // namespace
}  // namespace tandem::router
