#include "router/sse_writer.h"

#include "router/api_error.h"
#include "router/utf8_stream.h"

namespace tandem::router {

std::string SseJsonEvent(const nlohmann::json& payload) {
  // Compact JSON has no raw line breaks (they are escaped inside strings).
  return SseDataEvent(DumpJson(payload));
}

std::string SseDataEvent(std::string_view data) {
  const std::string clean = SanitizeUtf8(data);
  std::string out;
  out.reserve(clean.size() + 16);
  out.append("data: ");
  for (size_t i = 0; i < clean.size(); ++i) {
    const char c = clean[i];
    if (c == '\r' || c == '\n') {
      // CR, LF and CRLF all end a line in SSE; each becomes a continuation line.
      if (c == '\r' && i + 1 < clean.size() && clean[i + 1] == '\n') ++i;
      out.append("\ndata: ");
    } else {
      out.push_back(c);
    }
  }
  out.append("\n\n");
  return out;
}

}  // namespace tandem::router
