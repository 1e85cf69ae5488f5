// Fuzz target: request body bytes -> JSON -> completions and chat validation.
// Invariants: no crash; every error body is valid UTF-8 JSON with a 4xx status;
// the ignored-fields header value is printable ASCII (it echoes client keys).
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "router/openai_request.h"
#include "router/request_fields.h"
#include "router/utf8_stream.h"

namespace {

void CheckError(const tandem::router::ApiError& error) {
  if (error.http_status < 400 || error.http_status > 499) std::abort();
  const std::string body = error.ToBody();
  if (!tandem::router::IsValidUtf8(body)) std::abort();
  if (!nlohmann::json::accept(body)) std::abort();
}

void CheckHeader(const std::vector<std::string>& ignored) {
  for (char c : tandem::router::IgnoredFieldsHeaderValue(ignored)) {
    if (c < 0x20 || c > 0x7e) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tandem::router;
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  nlohmann::json json;
  if (auto error = ParseJsonBody(body, 32, &json)) {
    CheckError(*error);
    return 0;
  }
  RequestLimits limits;
  limits.vocab_size = 1000;
  ApiRequest completion;
  if (auto error = ParseCompletionRequest(json, limits, &completion)) {
    CheckError(*error);
  } else if (completion.prompts.empty() || completion.n < 1 || completion.min_tokens < 0) {
    std::abort();
  }
  CheckHeader(completion.ignored_fields);
  ApiRequest chat;
  if (auto error = ParseChatRequest(json, limits, &chat)) {
    CheckError(*error);
  } else if (!chat.messages.is_array() || chat.messages.empty()) {
    std::abort();
  }
  CheckHeader(chat.ignored_fields);
  return 0;
}
