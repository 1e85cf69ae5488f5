// The endpoints besides generation, in vLLM's shapes, without sockets:
//   GET  /v1/models, /v1/models/{id}   the served model object (404 model_not_found for another id)
//   POST /tokenize     {"prompt": str | "messages": [...], "add_special_tokens"?, "add_generation_prompt"?,
//                       "chat_template_kwargs"?} -> {"count", "max_model_len", "tokens"}
//   POST /detokenize   {"tokens": [ids]} -> {"prompt": text} (special tokens kept, as vLLM's decode)
//   GET  /version      {"version": project version}
// Requests are checked against the field table (request_fields.h) like the
// generation endpoints. Thread rule: pure functions of an immutable context.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "router/router_context.h"

namespace tandem::router {

struct JsonReply {
  int http_status = 200;
  std::string body;                         // JSON text
  std::vector<std::string> ignored_fields;  // for the x-tandem-ignored-fields header
};

// One entry of /v1/models.
nlohmann::json ModelObject(const RouterContext& context);
// GET /v1/models/{id}; `id` already percent-decoded.
JsonReply RetrieveModel(const RouterContext& context, std::string_view id);
JsonReply HandleTokenize(const RouterContext& context, std::string_view body);
JsonReply HandleDetokenize(const RouterContext& context, std::string_view body);
// `version` is the project version the binary was built from.
JsonReply VersionReply(std::string_view version);

// %XX escapes decoded; nullopt for a malformed escape.
std::optional<std::string> PercentDecode(std::string_view text);

}  // namespace tandem::router
