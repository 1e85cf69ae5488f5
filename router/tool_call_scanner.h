// ToolCallScanner: reads one tool-call JSON object as its text arrives,
// `{"name": "f", "arguments": {...}}` (or "parameters", Llama 3.1's key), and
// tells as early as possible the function's name and the raw text of its
// arguments so far, so a stream can send both before the object is complete.
//
// It only follows the object's structure (strings, escapes, nesting); it does
// not validate values, so a complete call's arguments are checked with a real
// JSON parser by whoever needs them valid. The first of "arguments" /
// "parameters" wins; other keys are skipped. Nesting is limited to kMaxDepth.
// Thread rule: one owner; not thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tandem::router {

class ToolCallScanner {
 public:
  static constexpr int32_t kMaxDepth = 64;

  // Scans `text`, the continuation of the object (its first non-blank byte must
  // be '{'). Returns how many bytes it took: all of them, or up to and including
  // the object's closing '}' (then done()). Takes nothing once done() or failed().
  size_t Feed(std::string_view text);

  bool done() const { return done_; }
  // Not a JSON object of this shape (a byte out of place, too deep, a
  // non-string name). What was scanned is in text().
  bool failed() const { return failed_; }
  // The name, once its string is complete.
  const std::optional<std::string>& name() const { return name_; }
  // The raw text of the arguments value so far (no blanks around it).
  const std::string& arguments() const { return arguments_; }
  bool has_arguments() const { return arguments_key_seen_; }
  // Everything taken so far, verbatim.
  const std::string& text() const { return text_; }

 private:
  enum class State { kStart, kKey, kColon, kValue, kScalar, kAfterValue };

  void Step(char c);
  void StepTopLevel(char c);
  void StartValue(char c);
  void EndValue();
  void Fail() { failed_ = true; }

  State state_ = State::kStart;
  int32_t depth_ = 0;  // 1 inside the object; more inside a value
  bool in_string_ = false;
  bool escape_ = false;
  bool done_ = false;
  bool failed_ = false;
  std::string token_;      // the current key or string value at depth 1, quotes included
  std::string key_;        // the key whose value is being read
  bool capturing_ = false;  // the value being read is the arguments
  bool arguments_key_seen_ = false;
  std::optional<std::string> name_;
  std::string arguments_;
  std::string text_;
};

}  // namespace tandem::router
