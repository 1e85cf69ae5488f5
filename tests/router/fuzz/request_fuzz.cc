// Fuzz target: request body bytes -> JSON -> completions and chat validation.
// Invariants: no crash; every error body is valid UTF-8 JSON with a 4xx status.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "router/openai_request.h"
#include "router/utf8_stream.h"

namespace {

void CheckError(const tandem::router::ApiError& error) {
  if (error.http_status < 400 || error.http_status > 499) std::abort();
  const std::string body = error.ToBody();
  if (!tandem::router::IsValidUtf8(body)) std::abort();
  if (!nlohmann::json::accept(body)) std::abort();
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
  } else if (completion.prompts.empty() || completion.n < 1) {
    std::abort();
  }
  ApiRequest chat;
  if (auto error = ParseChatRequest(json, limits, &chat)) {
    CheckError(*error);
  } else if (!chat.messages.is_array() || chat.messages.empty()) {
    std::abort();
  }
  return 0;
}
