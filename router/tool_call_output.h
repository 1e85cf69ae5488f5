// What a chat choice's tool calls become in OpenAI's shapes: the parsed calls of
// a whole output (message.tool_calls, content outside them), and the stream
// deltas of ToolCallParser events (delta.tool_calls[{index, id, type, function:
// {name, arguments: ""}}] when a call begins, then {index, function: {arguments:
// fragment}}). Thread rule: pure functions.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "router/tool_parser.h"

namespace tandem::router {

struct ToolCallOutput {
  std::string id;         // "call_<24 hex>"
  std::string name;
  std::string arguments;  // JSON text of the arguments, as the model wrote it
};

struct ParsedToolOutput {
  std::optional<std::string> content;  // the text outside calls; nullopt when empty
  std::vector<ToolCallOutput> calls;
};

struct ToolParseOptions {
  ToolCallFormat format = ToolCallFormat::kNone;
  int32_t max_calls = 1 << 20;  // parallel_tool_calls false: 1
  std::string named_function;   // kArguments
};

// Parses a whole output. As vLLM does, output whose calls do not parse (a call's
// arguments that are not valid JSON) is all content, with no calls; a named
// function's call (kArguments) takes the output as it is.
ParsedToolOutput ParseToolOutput(const ToolParseOptions& options, std::string_view text);

// The same from events already made (a stream's, joined): the calls and content
// they describe, with no validation.
ParsedToolOutput CollectToolEvents(const std::vector<ToolParseEvent>& events);

// One chat stream `delta` object per event ({"content": ...} or {"tool_calls": [...]}).
nlohmann::json ToolEventDelta(const ToolParseEvent& event);

// message.tool_calls: [{"id", "type": "function", "function": {"name", "arguments"}}].
nlohmann::json ToolCallsJson(const std::vector<ToolCallOutput>& calls);

}  // namespace tandem::router
