// ApiError: an OpenAI-shaped error, `{"error": {"message", "type", "param", "code"}}`,
// with the HTTP status it is sent with. Thread rule: a plain value.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "common/base/status.h"

namespace tandem::router {

struct ApiError {
  int http_status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // the offending request field ("messages[0].role"); empty = null
  std::string code;   // machine-readable code ("context_length_exceeded"); empty = null

  nlohmann::json ToJson() const;
  // Compact JSON text; always valid UTF-8 (invalid bytes become U+FFFD).
  std::string ToBody() const;
};

// 400 invalid_request_error naming `param`.
ApiError BadRequest(std::string message, std::string param = "", std::string code = "");
// Maps a Status from an engine or codec to an ApiError (see EngineClient for the table).
// For refusals before a request produced anything: ResourceExhausted is 429 rate_limit_error.
ApiError ApiErrorFromStatus(const Status& status, std::string param = "");
// The same for a request that failed after it produced output (tokens or stream
// bytes): no longer a refusal, so ResourceExhausted is a 500 server_error.
ApiError ApiErrorAfterOutput(const Status& status);

// JSON dump that never throws on invalid UTF-8 (replaces it with U+FFFD).
std::string DumpJson(const nlohmann::json& value);

}  // namespace tandem::router
