// ParseJsonBody (declared in openai_request.h): the one place request bytes
// become JSON. The depth scan runs before the parser so a deeply nested body
// costs O(size) and never recurses.
#include <exception>

#include "common/base/json_depth.h"
#include "router/openai_request.h"
#include "router/utf8_stream.h"

namespace tandem::router {

std::optional<ApiError> ParseJsonBody(std::string_view body, int32_t max_depth, nlohmann::json* out) {
  if (body.empty()) return BadRequest("request body is empty; expected a JSON object");
  if (JsonNestingDepth(body, max_depth) > max_depth) {
    return BadRequest("JSON nesting is deeper than " + std::to_string(max_depth) + " levels");
  }
  // nlohmann's lexer rejects invalid UTF-8 inside strings and unpaired
  // surrogate escapes; checking the raw bytes first gives a clearer message.
  if (!IsValidUtf8(body)) return BadRequest("request body is not valid UTF-8");
  try {
    *out = nlohmann::json::parse(body.begin(), body.end());
  } catch (const std::exception& e) {
    return BadRequest(std::string("invalid JSON in request body: ") + e.what());
  }
  if (!out->is_object()) return BadRequest("request body must be a JSON object");
  return std::nullopt;
}

}  // namespace tandem::router
