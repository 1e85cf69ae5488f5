// Tool-call parsing (ToolCallParser, ToolCallScanner, ParseToolOutput): each
// format parsed whole, then streamed in chunks cut at every byte, byte by byte
// and at random; the stream's events joined must equal the whole parse, and a
// call's text must never come out as content. Round trips: random calls
// written as Hermes and as Llama 3.1 JSON (as the templates write them) parse
// back to the same names and arguments.
#include "router/tool_parser.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <random>

#include "router/tool_call_output.h"
#include "router/tool_call_scanner.h"

namespace tandem::router {
namespace {

using nlohmann::json;

struct Call {
  std::string name;
  json arguments;
};

ToolParseOptions Options(ToolCallFormat format, int32_t max_calls = 1 << 20, std::string named = "") {
  return {format, max_calls, std::move(named)};
}

// Streams `text` cut at `cuts` (ascending offsets) and joins the events.
ParsedToolOutput Streamed(const ToolParseOptions& o, const std::string& text, const std::vector<size_t>& cuts) {
  ToolCallParser parser(o.format, o.max_calls, o.named_function);
  std::vector<ToolParseEvent> events;
  size_t from = 0;
  for (size_t cut : cuts) {
    parser.Feed(std::string_view(text).substr(from, cut - from), &events);
    from = cut;
  }
  parser.Feed(std::string_view(text).substr(from), &events);
  parser.Finish(&events);
  for (const ToolParseEvent& e : events) {
    if (e.kind == ToolParseEvent::Kind::kContent) {
      EXPECT_FALSE(e.text.empty()) << "an empty content event";
    }
  }
  return CollectToolEvents(events);
}

void ExpectSame(const ParsedToolOutput& got, const ParsedToolOutput& want, const std::string& label) {
  EXPECT_EQ(got.content, want.content) << label;
  ASSERT_EQ(got.calls.size(), want.calls.size()) << label;
  for (size_t i = 0; i < got.calls.size(); ++i) {
    EXPECT_EQ(got.calls[i].name, want.calls[i].name) << label;
    EXPECT_EQ(got.calls[i].arguments, want.calls[i].arguments) << label;
    EXPECT_EQ(got.calls[i].id.rfind("call_", 0), 0u) << label;
  }
}

// Whole parse = the stream cut anywhere (two pieces at every byte, byte by byte).
void ExpectStreamsLikeWhole(const ToolParseOptions& o, const std::string& text) {
  const ParsedToolOutput whole = ParseToolOutput(o, text);
  for (size_t cut = 0; cut <= text.size(); ++cut) ExpectSame(Streamed(o, text, {cut}), whole, "cut at " + std::to_string(cut));
  std::vector<size_t> every;
  for (size_t i = 1; i < text.size(); ++i) every.push_back(i);
  ExpectSame(Streamed(o, text, every), whole, "byte by byte");
}

TEST(ToolParserTest, DetectsTheFormatFromTheTemplate) {
  EXPECT_EQ(DetectToolCallFormat("... <tool_call>\\n{\"name\": <function-name>, \"arguments\": ...}"), ToolCallFormat::kHermes);
  EXPECT_EQ(DetectToolCallFormat("{{- \"<|python_tag|>\" + tool_call.name }}"), ToolCallFormat::kLlama3Json);
  EXPECT_EQ(DetectToolCallFormat("{% if tools %}'{\"name\": function name, \"parameters\": dictionary}'"),
            ToolCallFormat::kLlama3Json);
  EXPECT_EQ(DetectToolCallFormat("{% for m in messages %}{{ m.content }}{% endfor %}"), ToolCallFormat::kNone);
  EXPECT_EQ(*ResolveToolCallFormat("auto", "<tool_call>"), ToolCallFormat::kHermes);
  EXPECT_EQ(*ResolveToolCallFormat("llama3_json", "<tool_call>"), ToolCallFormat::kLlama3Json);
  EXPECT_EQ(*ResolveToolCallFormat("none", "<tool_call>"), ToolCallFormat::kNone);
  EXPECT_FALSE(ResolveToolCallFormat("mistral", "").ok());
}

TEST(ToolParserTest, HermesCallsWithContentBefore) {
  const std::string text =
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n"
      "<tool_call>\n{\"arguments\": {}, \"name\": \"get_time\"}\n</tool_call>";
  const ParsedToolOutput out = ParseToolOutput(Options(ToolCallFormat::kHermes), text);
  EXPECT_EQ(out.content, "Let me check.\n");
  ASSERT_EQ(out.calls.size(), 2u);
  EXPECT_EQ(out.calls[0].name, "get_weather");
  EXPECT_EQ(out.calls[0].arguments, "{\"city\": \"Paris\"}");
  EXPECT_EQ(out.calls[1].name, "get_time") << "arguments before the name";
  EXPECT_EQ(out.calls[1].arguments, "{}");
  EXPECT_NE(out.calls[0].id, out.calls[1].id);
  ExpectStreamsLikeWhole(Options(ToolCallFormat::kHermes), text);
  // parallel_tool_calls false: the first call only.
  const ParsedToolOutput one = ParseToolOutput(Options(ToolCallFormat::kHermes, 1), text);
  ASSERT_EQ(one.calls.size(), 1u);
  EXPECT_EQ(one.calls[0].name, "get_weather");
  EXPECT_EQ(one.content, "Let me check.\n");
  ExpectStreamsLikeWhole(Options(ToolCallFormat::kHermes, 1), text);
}

TEST(ToolParserTest, HermesTextThatIsNotACall) {
  for (const std::string text :
       {"plain text", "a < b and <tool or <tool_cal", "x <tool_call> not json </tool_call> y", "", "<tool_call>",
        "ends inside <tool_call>\n{\"nam", "<tool_call>\n{\"name\": 5, \"arguments\": {}}\n</tool_call>",
        "<think>\n\n</think>\n\nHi"}) {
    const ParsedToolOutput out = ParseToolOutput(Options(ToolCallFormat::kHermes), text);
    EXPECT_TRUE(out.calls.empty()) << text;
    EXPECT_EQ(out.content.value_or(""), text) << "all of it is content";
    ExpectStreamsLikeWhole(Options(ToolCallFormat::kHermes), text);
  }
  // A call whose arguments are not JSON: the whole output is content (vLLM's rule).
  const std::string broken = "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": tru}}\n</tool_call>";
  const ParsedToolOutput out = ParseToolOutput(Options(ToolCallFormat::kHermes), broken);
  EXPECT_TRUE(out.calls.empty());
  EXPECT_EQ(out.content, broken);
  // An unterminated last call still counts (the model stopped at EOS).
  const ParsedToolOutput open =
      ParseToolOutput(Options(ToolCallFormat::kHermes), "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}");
  ASSERT_EQ(open.calls.size(), 1u);
  EXPECT_EQ(open.calls[0].arguments, "{\"a\": 1}");
  EXPECT_FALSE(open.content.has_value());
}

TEST(ToolParserTest, Llama3JsonCalls) {
  for (const std::string prefix : {"", "<|python_tag|>", "  \n"}) {
    const std::string text = prefix +
                             "{\"name\": \"search\", \"parameters\": {\"q\": \"a } \\\" b\", \"n\": [1, {\"x\": null}]}}; "
                             "{\"name\": \"get_time\", \"parameters\": {}}";
    const ParsedToolOutput out = ParseToolOutput(Options(ToolCallFormat::kLlama3Json), text);
    EXPECT_FALSE(out.content.has_value()) << prefix;
    ASSERT_EQ(out.calls.size(), 2u) << prefix;
    EXPECT_EQ(out.calls[0].name, "search");
    EXPECT_EQ(json::parse(out.calls[0].arguments), json::parse("{\"q\": \"a } \\\" b\", \"n\": [1, {\"x\": null}]}"));
    EXPECT_EQ(out.calls[1].arguments, "{}");
    ExpectStreamsLikeWhole(Options(ToolCallFormat::kLlama3Json), text);
  }
  for (const std::string text : {"Hello there", "The answer is {\"name\": \"f\"}", "{\"answer\": 42}", "<|python_ta",
                                 "<|python_tag|>import sys", "{\"name\": \"f\", \"parameters\": {\"a\": 1"}) {
    // The last: a call cut off inside its arguments, which are then not JSON: content.
    const ParsedToolOutput out = ParseToolOutput(Options(ToolCallFormat::kLlama3Json), text);
    EXPECT_TRUE(out.calls.empty()) << text;
    EXPECT_EQ(out.content, text) << text;
    // A stream cannot take back a call it announced; it sends the broken call as it came.
    if (text.back() != '1') ExpectStreamsLikeWhole(Options(ToolCallFormat::kLlama3Json), text);
  }
  // A name without parameters is a call with no arguments.
  const ParsedToolOutput bare = ParseToolOutput(Options(ToolCallFormat::kLlama3Json), "{\"name\": \"now\"}");
  ASSERT_EQ(bare.calls.size(), 1u);
  EXPECT_EQ(bare.calls[0].arguments, "{}");
}

TEST(ToolParserTest, RequiredArrayAndNamedFunction) {
  const std::string array = "[{\"name\": \"f\", \"parameters\": {\"x\": 1}}, {\"name\": \"g\", \"parameters\": {}}]";
  const ParsedToolOutput out = ParseToolOutput(Options(ToolCallFormat::kJsonArray), array);
  ASSERT_EQ(out.calls.size(), 2u);
  EXPECT_EQ(out.calls[0].name, "f");
  EXPECT_EQ(out.calls[0].arguments, "{\"x\": 1}");
  EXPECT_EQ(out.calls[1].name, "g");
  EXPECT_FALSE(out.content.has_value());
  ExpectStreamsLikeWhole(Options(ToolCallFormat::kJsonArray), array);
  ExpectStreamsLikeWhole(Options(ToolCallFormat::kJsonArray), "  [ ]  ");
  const ParsedToolOutput junk = ParseToolOutput(Options(ToolCallFormat::kJsonArray), "no json here");
  EXPECT_TRUE(junk.calls.empty());
  EXPECT_EQ(junk.content, "no json here");
  ExpectStreamsLikeWhole(Options(ToolCallFormat::kJsonArray), "no json here");

  const std::string args = "{\"city\": \"Paris\", \"days\": 3}";
  const ParsedToolOutput named = ParseToolOutput(Options(ToolCallFormat::kArguments, 1, "get_weather"), args);
  ASSERT_EQ(named.calls.size(), 1u);
  EXPECT_EQ(named.calls[0].name, "get_weather");
  EXPECT_EQ(named.calls[0].arguments, args);
  EXPECT_FALSE(named.content.has_value());
  ExpectStreamsLikeWhole(Options(ToolCallFormat::kArguments, 1, "get_weather"), args);
}

TEST(ToolParserTest, StreamAnnouncesACallOnceItsNameIsComplete) {
  ToolCallParser parser(ToolCallFormat::kHermes, 8);
  std::vector<ToolParseEvent> events;
  parser.Feed("Sure.<tool", &events);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].text, "Sure.") << "the possible marker is held back";
  parser.Feed("_call>\n{\"name\": \"get_wea", &events);
  EXPECT_EQ(events.size(), 1u) << "no call before its name is complete";
  parser.Feed("ther\", \"arguments\": {\"ci", &events);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[1].kind, ToolParseEvent::Kind::kCallBegin);
  EXPECT_EQ(events[1].text, "get_weather");
  EXPECT_EQ(events[2].kind, ToolParseEvent::Kind::kArguments);
  EXPECT_EQ(events[2].text, "{\"ci");
  parser.Feed("ty\": \"Paris\"}}\n</tool_call>", &events);
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[3].text, "ty\": \"Paris\"}");
  parser.Finish(&events);
  EXPECT_EQ(events.size(), 4u);
  EXPECT_EQ(ToolEventDelta(events[1]),
            json::parse(R"({"tool_calls": [{"index": 0, "id": ")" + events[1].id +
                        R"(", "type": "function", "function": {"name": "get_weather", "arguments": ""}}]})"));
  EXPECT_EQ(ToolEventDelta(events[3]),
            json::parse(R"({"tool_calls": [{"index": 0, "function": {"arguments": "ty\": \"Paris\"}"}}]})"));
}

TEST(ToolParserTest, ScannerLimitsDepthAndRejectsNonObjects) {
  ToolCallScanner deep;
  deep.Feed("{\"name\": \"f\", \"arguments\": " + std::string(100, '[') + std::string(100, ']') + "}");
  EXPECT_TRUE(deep.failed());
  ToolCallScanner not_object;
  not_object.Feed("[1]");
  EXPECT_TRUE(not_object.failed());
  ToolCallScanner escaped;
  EXPECT_EQ(escaped.Feed("{\"name\": \"a\\u00e9\\\"b\"} tail"), 22u) << "up to the closing brace";
  EXPECT_TRUE(escaped.done());
  EXPECT_EQ(escaped.name(), "a\xc3\xa9\"b");
}

// Random calls written as the templates write them parse back to themselves, in any chunks.
json RandomValue(std::mt19937& rng, int depth) {
  static const std::vector<std::string> strings = {"Paris", "a \"quoted\" }", "</tool_call>", "日本語 🤔", "back\\slash",
                                                   "<tool_call>", "semi; colon", ""};
  switch (rng() % (depth > 2 ? 4 : 6)) {
    case 0: return strings[rng() % strings.size()];
    case 1: return static_cast<int>(rng() % 1000) - 500;
    case 2: return rng() % 2 == 0;
    case 3: return nullptr;
    case 4: {
      json a = json::array();
      for (int i = rng() % 3; i > 0; --i) a.push_back(RandomValue(rng, depth + 1));
      return a;
    }
  }
  json o = json::object();
  for (int i = rng() % 3; i > 0; --i) o["k" + std::to_string(rng() % 10)] = RandomValue(rng, depth + 1);
  return o;
}

TEST(ToolParserTest, RandomCallsRoundTripInBothFormats) {
  std::mt19937 rng(26);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<Call> calls;
    for (int i = 1 + rng() % 3; i > 0; --i) {
      json args = json::object();
      for (int j = rng() % 4; j > 0; --j) args["p" + std::to_string(j)] = RandomValue(rng, 1);
      calls.push_back({"fn_" + std::to_string(rng() % 100), args});
    }
    const std::string content = trial % 3 == 0 ? "" : trial % 3 == 1 ? "Checking: a < b.\n" : "<tool_cal\n";
    // Qwen's template: the marker, the object with a space after each colon and comma, the end marker.
    std::string hermes = content;
    std::string llama = trial % 2 == 0 ? "<|python_tag|>" : "";
    for (size_t i = 0; i < calls.size(); ++i) {
      const std::string args = calls[i].arguments.dump(-1, ' ', false);
      hermes += (i > 0 ? "\n" : "") + std::string("<tool_call>\n{\"name\": \"") + calls[i].name +
                "\", \"arguments\": " + args + "}\n</tool_call>";
      llama += (i > 0 ? "; " : "") + std::string("{\"name\": \"") + calls[i].name + "\", \"parameters\": " + args + "}";
    }
    for (const auto& [format, text] : {std::pair{ToolCallFormat::kHermes, hermes}, std::pair{ToolCallFormat::kLlama3Json, llama}}) {
      const ParsedToolOutput whole = ParseToolOutput(Options(format), text);
      ASSERT_EQ(whole.calls.size(), calls.size()) << text;
      for (size_t i = 0; i < calls.size(); ++i) {
        EXPECT_EQ(whole.calls[i].name, calls[i].name);
        EXPECT_EQ(json::parse(whole.calls[i].arguments), calls[i].arguments) << text;
      }
      if (format == ToolCallFormat::kHermes) {
        EXPECT_EQ(whole.content.value_or(""), content);
      } else {
        EXPECT_FALSE(whole.content.has_value());
      }
      std::vector<size_t> cuts;
      for (size_t at = rng() % 4; at < text.size(); at += 1 + rng() % 7) cuts.push_back(at);
      ExpectSame(Streamed(Options(format), text, cuts), whole, "random cuts: " + text);
    }
  }
}

}  // namespace
}  // namespace tandem::router
