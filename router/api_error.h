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
// Maps a Status from a backend or codec to an ApiError (see InferenceBackend for the table).
ApiError ApiErrorFromStatus(const Status& status, std::string param = "");

// JSON dump that never throws on invalid UTF-8 (replaces it with U+FFFD).
std::string DumpJson(const nlohmann::json& value);

}  // namespace tandem::router
