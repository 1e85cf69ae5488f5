// RequestFields: every request field the router knows, with what it does here.
//
// One table (request_fields.cc) classifies the fields of the OpenAI API and of
// vLLM's extensions for each body (completions, chat, tokenize, detokenize):
//   implemented  read, type-checked and honoured (their readers live in
//                openai_request.cc and tokenize_api.cc);
//   metadata     type-checked and accepted; no effect is expected of them (`user`);
//   unsupported  a 400 `invalid_request_error` naming the field, code
//                `unsupported_parameter`, unless the value is the field's no-op
//                (`tools: []`, `logprobs: false`, `response_format: {"type": "text"}`).
// A field the table does not know for a body is ignored, as vLLM does, and
// named in the `x-tandem-ignored-fields` response header. Thread rule: pure.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "router/request_reader.h"

namespace tandem::router {

enum class FieldUse { kImplemented, kMetadata, kUnsupported };

// The request bodies a field belongs to (bits).
enum RequestBody : uint8_t {
  kCompletionsBody = 1,
  kChatBody = 2,
  kTokenizeBody = 4,
  kDetokenizeBody = 8,
};

struct RequestField {
  const char* name;
  FieldUse use;
  uint8_t bodies;  // RequestBody bits
  // kMetadata: the type check; kUnsupported: passes the no-op values only.
  // Called with the field's non-null value. nullptr: nothing to check here (an
  // implemented field's reader checks it).
  ReadError (*check)(const RequestField& field, const nlohmann::json& value);
  // kUnsupported: why, as the client reads it in the error. Otherwise what it does.
  const char* note;
};

std::span<const RequestField> RequestFieldTable();
// The entry for `name`, or nullptr.
const RequestField* FindRequestField(std::string_view name);

// Runs the table over a body of kind `body_kind`: returns the first type
// error or unsupported value, and appends each top-level field the table does
// not know for that body to *ignored (in name order).
ReadError CheckRequestFields(const nlohmann::json& body, RequestBody body_kind, std::vector<std::string>* ignored);

inline constexpr char kIgnoredFieldsHeader[] = "x-tandem-ignored-fields";
// The header value for `names`: joined by ", "; a name that is not 1-64 bytes
// of [A-Za-z0-9_.[]-] is counted, not copied (it came from the client), as are
// names past the 16th: "a, b, 3 more". Empty for no names.
std::string IgnoredFieldsHeaderValue(const std::vector<std::string>& names);

}  // namespace tandem::router
