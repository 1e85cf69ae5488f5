// ToolCallParser: finds tool calls in a chat choice's output text as it streams,
// in the format the model was trained on, and splits it into content and calls.
//
// Formats (ToolCallFormat):
//   kHermes      Hermes / Qwen: `<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>`,
//                any number, with content before, between and after them (blank
//                text around calls is dropped).
//   kLlama3Json  Llama 3.1+: the whole output is `{"name": ..., "parameters": {...}}`
//                (or "arguments"), optionally after `<|python_tag|>`, several joined
//                by `;`. Output that does not start that way is content.
//   kJsonArray   tool_choice "required" (structured output): `[{"name", "parameters"}, ...]`.
//   kArguments   a named tool_choice (structured output): the whole output is the
//                arguments of that one function.
// Text that may still become a call marker is held back until it is known not
// to be one, so a call's text never leaks out as content. A call is announced
// (kCallBegin, with a fresh "call_<hex>" id) once its name is complete; its
// arguments follow as raw text fragments, which joined are the arguments
// value's text exactly as the model wrote it. Calls past max_calls are dropped.
// Thread rule: one owner; not thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/base/status.h"
#include "router/tool_call_scanner.h"

namespace tandem::router {

enum class ToolCallFormat { kNone, kHermes, kLlama3Json, kJsonArray, kArguments };

// The format a chat template's model writes its calls in: `<tool_call>` in the
// template is Hermes; `<|python_tag|>`, or a "parameters" key the template asks
// calls to use, is Llama 3.1 JSON; kNone when neither shows.
ToolCallFormat DetectToolCallFormat(std::string_view chat_template_source);
// The router option `tool_call_parser`: "auto" (detect from the template),
// "hermes", "llama3_json" or "none". InvalidArgument for anything else.
StatusOr<ToolCallFormat> ResolveToolCallFormat(std::string_view option, std::string_view chat_template_source);
const char* ToolCallFormatName(ToolCallFormat format);

struct ToolParseEvent {
  enum class Kind {
    kContent,    // `text` is content
    kCallBegin,  // call `index` starts: `id`, `text` = its name
    kArguments,  // `text` continues the arguments of call `index`
  };
  Kind kind = Kind::kContent;
  int32_t index = 0;
  std::string id;
  std::string text;
};

class ToolCallParser {
 public:
  // kArguments needs the function's name; max_calls >= 1.
  ToolCallParser(ToolCallFormat format, int32_t max_calls, std::string named_function = "");

  // Appends the events `text` makes certain. Text may end anywhere (inside a
  // marker, a JSON string, a UTF-8 character: bytes are passed on as they come).
  void Feed(std::string_view text, std::vector<ToolParseEvent>* out);
  // End of output: what was held back. A call cut off keeps what it streamed.
  void Finish(std::vector<ToolParseEvent>* out);

  int32_t num_calls() const { return num_calls_; }

 private:
  enum class Mode {
    kContent,     // content; Hermes: watching for `<tool_call>`
    kLlamaStart,  // Llama: before the first non-blank byte (and `<|python_tag|>`)
    kCallStart,   // Hermes: after `<tool_call>`, before the object's '{'
    kCallObject,  // inside a call object (scanner_)
    kCallEnd,     // Hermes: after the object, up to `</tool_call>`
    kLlamaNext,   // Llama: after an object: `;` and another, or the end
    kArrayStart,  // required: before the '['
    kArrayNext,   // required: after '[' or an element: `,` and another, or ']'
    kDone,        // the rest is dropped
  };

  bool StepContent(std::vector<ToolParseEvent>* out);
  bool StepLlamaStart(std::vector<ToolParseEvent>* out);
  bool StepCallStart(std::vector<ToolParseEvent>* out);
  bool StepCallObject(std::vector<ToolParseEvent>* out);
  bool StepCallEnd();
  bool StepSeparator(std::vector<ToolParseEvent>* out);
  // The object in pending_ ended or failed; back to content on failure.
  void EndCallObject(std::vector<ToolParseEvent>* out);
  // Content from here on: pending_ (and `prefix`) are content.
  void ToContentForever(std::string prefix, std::vector<ToolParseEvent>* out);
  void EmitContent(std::string text, std::vector<ToolParseEvent>* out);
  void EmitArguments(std::vector<ToolParseEvent>* out);

  const ToolCallFormat format_;
  const int32_t max_calls_;
  const std::string named_function_;
  Mode mode_;
  std::string pending_;          // text not yet turned into events
  bool after_call_ = false;      // kContent after a Hermes call: blank text is held, then dropped
  bool markers_ = true;          // kContent looks for `<tool_call>` (Hermes only)
  std::string held_prefix_;      // Llama: `<|python_tag|>` taken before the object
  std::optional<ToolCallScanner> scanner_;
  bool call_begun_ = false;      // the current object's kCallBegin went out (or was dropped past max_calls)
  bool call_dropped_ = false;    // the current call is past max_calls
  bool expect_object_ = false;   // kLlamaNext / kArrayNext: a separator was taken, an object comes next
  size_t arguments_sent_ = 0;
  int32_t num_calls_ = 0;
};

}  // namespace tandem::router
