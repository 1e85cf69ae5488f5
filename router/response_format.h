// Structured output requests: OpenAI's `response_format` ({"type": "text" | "json_object" |
// "json_schema"}) and vLLM's `guided_json` (a JSON Schema, as an object or as JSON text),
// checked and turned into the spec the nodes enforce (GenerateRequest::structured_output):
// {"type":"json_object"} or {"type":"json_schema","schema":{...}}. The schema is compiled here
// (common/grammar) so a malformed or unsupported one is a 400 naming the place, never a node error.
// Thread rule: free functions, no state.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "router/request_reader.h"

namespace tandem::router {

// Reads response_format and guided_json from `body` (at most one of them may ask for a
// structure). `spec` stays empty for free text.
ReadError ReadResponseFormat(const nlohmann::json& body, std::string* spec);

// A 400 on `param` when the grammar refuses `spec` (e.g. a tool's parameters schema with a
// keyword structured output does not support).
ReadError CheckStructuredOutput(const std::string& spec, const std::string& param);

}  // namespace tandem::router
