// Validation of chat `messages` (and `chat_template_kwargs`) into the form the
// chat template renders; shared by /v1/chat/completions and /tokenize.
// Thread rule: pure functions.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "router/request_reader.h"

namespace tandem::router {

// Reads body["messages"] into *out: [{role, content[, name, tool_call_id,
// tool_calls]}], content joined from text parts (null or missing on an assistant
// message: ""), `developer` as `system`. At most max_messages. An assistant
// message's tool_calls become [{id?, type: "function", function: {name,
// arguments: <object>}}] (a JSON-string arguments is parsed, as vLLM does for
// the templates); tool_calls on another role, or arguments that are not a JSON
// object, are a 400 naming messages[i].tool_calls[j]... Keys a message may carry
// that the template never sees are appended to *ignored as "messages[].<key>"
// (once each).
ReadError ReadChatMessages(const nlohmann::json& body, int32_t max_messages, nlohmann::json* out,
                           std::vector<std::string>* ignored);

// Reads body["chat_template_kwargs"] (an object) into *out; null when absent.
// Names the template variables the router sets itself are a 400.
ReadError ReadChatTemplateKwargs(const nlohmann::json& body, nlohmann::json* out);

}  // namespace tandem::router
