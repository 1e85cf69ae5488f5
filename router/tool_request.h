// ToolRequest: a chat request's `tools`, `tool_choice` and `parallel_tool_calls`,
// validated, and what follows from them: the tool list the chat template
// receives, and for `required` / a named function the JSON schema the nodes
// enforce (GenerateRequest::structured_output), as vLLM builds it.
// Thread rule: pure functions.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "router/request_reader.h"

namespace tandem::router {

enum class ToolChoice {
  kNone,      // no tool calls: tools still reach the template; the output is not parsed
  kAuto,      // the model decides; its output is parsed for calls (tool_parser.h)
  kRequired,  // at least one call, forced by structured output: a JSON array of {name, parameters}
  kNamed,     // exactly that function, forced by structured output: its arguments object
};

inline constexpr size_t kMaxTools = 128;
inline constexpr size_t kMaxToolNameBytes = 64;

struct ToolRequest {
  // null without tools; else [{"type": "function", "function": {"name", "description"?,
  // "parameters"?, "strict"?}}], only the keys the client gave (the template's `tools`).
  nlohmann::json tools;
  // Default: kAuto when tools are given, else kNone (as OpenAI and vLLM).
  ToolChoice choice = ToolChoice::kNone;
  std::string named_function;       // kNamed: a name in `tools`
  bool parallel_tool_calls = true;  // false: at most one call (required: maxItems 1; auto: the first)

  bool has_tools() const { return tools.is_array() && !tools.empty(); }
};

// Reads body["tools"], body["tool_choice"], body["parallel_tool_calls"] into *out.
// Every error names its field: tools not a list, an entry not an object or not
// of type "function", a missing/bad name, duplicate names, parameters not an
// object, tool_choice of a wrong type or naming no tool, required/named
// without tools.
ReadError ReadToolRequest(const nlohmann::json& body, ToolRequest* out);

// The structured output that forces `required` or a named function:
// {"type": "json_schema", "schema": {...}} as compact JSON; "" for none / auto.
//   required: {"type": "array", "minItems": 1, ["maxItems": 1,] "items": {"anyOf": [per tool:
//             {"type": "object", "properties": {"name": {"type": "string", "enum": [name]},
//              "parameters": <its parameters>}, "required": ["name", "parameters"],
//              "additionalProperties": false}]}}
//   named:    the function's parameters schema.
// A tool without parameters takes {"type": "object", "properties": {}}.
std::string ToolChoiceStructuredOutput(const ToolRequest& request);

}  // namespace tandem::router
