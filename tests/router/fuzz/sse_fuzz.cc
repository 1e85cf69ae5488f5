// Fuzz target: arbitrary bytes through the streaming text path (UTF-8
// holdback -> stop matcher -> SSE framing), split at input-chosen points.
// Invariants: every event is valid UTF-8 and well framed; the streamed text
// equals the sanitized whole text cut at the first stop string.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "router/sse_writer.h"
#include "router/stop_matcher.h"
#include "router/utf8_stream.h"

namespace {

void CheckEvent(const std::string& event) {
  using namespace tandem::router;
  if (!IsValidUtf8(event)) std::abort();
  if (event.rfind("data: ", 0) != 0 || event.size() < 8) std::abort();
  if (event.compare(event.size() - 2, 2, "\n\n") != 0) std::abort();
  // Exactly one blank line, at the end: the payload cannot end the event early.
  if (event.find("\n\n") != event.size() - 2) std::abort();
  if (event.find('\r') != std::string::npos) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tandem::router;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  CheckEvent(SseDataEvent(input));
  CheckEvent(SseJsonEvent(nlohmann::json{{"text", std::string(input)}}));

  const std::string stop = "STOP";
  Utf8Assembler utf8;
  StopMatcher matcher({stop});
  std::string streamed;
  bool stopped = false;
  size_t pos = 0;
  // Piece lengths come from the input itself (low 3 bits of each piece's first byte).
  while (pos < input.size() && !stopped) {
    const size_t len = 1 + (static_cast<uint8_t>(input[pos]) & 7);
    const std::string piece = utf8.Add(input.substr(pos, len));
    pos += len;
    StopMatcher::Output out = matcher.Add(piece);
    if (!IsValidUtf8(out.text)) std::abort();
    if (!out.text.empty()) CheckEvent(SseDataEvent(out.text));
    streamed += out.text;
    stopped = out.stopped;
  }
  if (!stopped) {
    StopMatcher::Output out = matcher.Add(utf8.Finish());
    streamed += out.text;
    if (!out.stopped) streamed += matcher.Finish();
  }
  const std::string whole = SanitizeUtf8(input);
  const std::string expected = whole.substr(0, whole.find(stop));
  if (streamed != expected) std::abort();
  return 0;
}
