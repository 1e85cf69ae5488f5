#include "router/tool_parser.h"

#include <utility>

#include "common/base/ids.h"

namespace tandem::router {
namespace {

constexpr std::string_view kCallStart = "<tool_call>";
constexpr std::string_view kCallEnd = "</tool_call>";
constexpr std::string_view kPythonTag = "<|python_tag|>";

size_t FirstNonBlank(std::string_view s) { return s.find_first_not_of(" \t\r\n"); }

// The longest end of `s` that `marker` starts with (but not all of the marker).
size_t HeldSuffix(std::string_view s, std::string_view marker) {
  for (size_t k = std::min(s.size(), marker.size() - 1); k > 0; --k) {
    if (s.substr(s.size() - k) == marker.substr(0, k)) return k;
  }
  return 0;
}

bool StartsWith(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

}  // namespace

ToolCallFormat DetectToolCallFormat(std::string_view source) {
  if (source.find(kCallStart) != std::string_view::npos) return ToolCallFormat::kHermes;
  if (source.find(kPythonTag) != std::string_view::npos) return ToolCallFormat::kLlama3Json;
  if (source.find("tools") != std::string_view::npos && source.find("\"parameters\"") != std::string_view::npos) {
    return ToolCallFormat::kLlama3Json;
  }
  return ToolCallFormat::kNone;
}

StatusOr<ToolCallFormat> ResolveToolCallFormat(std::string_view option, std::string_view source) {
  if (option == "auto") return DetectToolCallFormat(source);
  if (option == "hermes") return ToolCallFormat::kHermes;
  if (option == "llama3_json") return ToolCallFormat::kLlama3Json;
  if (option == "none") return ToolCallFormat::kNone;
  return InvalidArgumentError("tool_call_parser must be auto, hermes, llama3_json or none, not \"" +
                              std::string(option) + "\"");
}

const char* ToolCallFormatName(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kHermes: return "hermes";
    case ToolCallFormat::kLlama3Json: return "llama3_json";
    case ToolCallFormat::kJsonArray: return "json_array";
    case ToolCallFormat::kArguments: return "arguments";
    case ToolCallFormat::kNone: break;
  }
  return "none";
}

ToolCallParser::ToolCallParser(ToolCallFormat format, int32_t max_calls, std::string named_function)
    : format_(format), max_calls_(max_calls), named_function_(std::move(named_function)) {
  switch (format) {
    case ToolCallFormat::kLlama3Json: mode_ = Mode::kLlamaStart; break;
    case ToolCallFormat::kJsonArray: mode_ = Mode::kArrayStart; break;
    default: mode_ = Mode::kContent; break;
  }
  markers_ = format == ToolCallFormat::kHermes;
}

void ToolCallParser::Feed(std::string_view text, std::vector<ToolParseEvent>* out) {
  if (format_ == ToolCallFormat::kArguments) {
    if (!call_begun_) {
      call_begun_ = true;
      out->push_back({ToolParseEvent::Kind::kCallBegin, 0, "call_" + RandomHexId().substr(0, 24), named_function_});
      num_calls_ = 1;
    }
    if (!text.empty()) out->push_back({ToolParseEvent::Kind::kArguments, 0, "", std::string(text)});
    return;
  }
  pending_.append(text);
  for (bool progress = true; progress;) {
    switch (mode_) {
      case Mode::kContent: progress = StepContent(out); break;
      case Mode::kLlamaStart: progress = StepLlamaStart(out); break;
      case Mode::kCallStart: progress = StepCallStart(out); break;
      case Mode::kCallObject: progress = StepCallObject(out); break;
      case Mode::kCallEnd: progress = StepCallEnd(); break;
      case Mode::kLlamaNext:
      case Mode::kArrayStart:
      case Mode::kArrayNext: progress = StepSeparator(out); break;
      case Mode::kDone:
        pending_.clear();
        progress = false;
        break;
    }
  }
}

void ToolCallParser::Finish(std::vector<ToolParseEvent>* out) {
  if (format_ == ToolCallFormat::kArguments) return Feed("", out);
  switch (mode_) {
    case Mode::kContent:
      if (!after_call_ || FirstNonBlank(pending_) != std::string::npos) EmitContent(std::move(pending_), out);
      break;
    case Mode::kLlamaStart:
    case Mode::kArrayStart: EmitContent(std::move(held_prefix_) + pending_, out); break;
    case Mode::kCallStart: EmitContent(std::string(kCallStart) + pending_, out); break;
    case Mode::kCallObject:
      if (!call_begun_) EndCallObject(out);  // an unfinished object that never named a function is content
      break;
    default: break;
  }
  pending_.clear();
  mode_ = Mode::kDone;
}

void ToolCallParser::EmitContent(std::string text, std::vector<ToolParseEvent>* out) {
  if (text.empty()) return;
  if (!out->empty() && out->back().kind == ToolParseEvent::Kind::kContent) {
    out->back().text += text;
  } else {
    out->push_back({ToolParseEvent::Kind::kContent, 0, "", std::move(text)});
  }
}

void ToolCallParser::EmitArguments(std::vector<ToolParseEvent>* out) {
  const std::string& args = scanner_->arguments();
  if (args.size() <= arguments_sent_) return;
  out->push_back({ToolParseEvent::Kind::kArguments, num_calls_ - 1, "", args.substr(arguments_sent_)});
  arguments_sent_ = args.size();
}

void ToolCallParser::ToContentForever(std::string prefix, std::vector<ToolParseEvent>* out) {
  markers_ = false;
  after_call_ = false;
  mode_ = Mode::kContent;
  scanner_.reset();
  held_prefix_.clear();
  EmitContent(std::move(prefix) + pending_, out);
  pending_.clear();
}

bool ToolCallParser::StepContent(std::vector<ToolParseEvent>* out) {
  if (pending_.empty()) return false;
  if (after_call_) {  // blank text after a call is dropped if another call follows it or nothing does
    const size_t k = FirstNonBlank(pending_);
    if (k == std::string::npos) return false;
    const std::string_view rest = std::string_view(pending_).substr(k);
    if (!StartsWith(rest, kCallStart) && StartsWith(kCallStart, rest)) return false;  // undecided
    if (StartsWith(rest, kCallStart)) pending_.erase(0, k);
    after_call_ = false;
    return true;
  }
  if (!markers_) {
    EmitContent(std::move(pending_), out);
    pending_.clear();
    return false;
  }
  const size_t at = pending_.find(kCallStart);
  if (at != std::string::npos) {
    EmitContent(pending_.substr(0, at), out);
    pending_.erase(0, at + kCallStart.size());
    mode_ = Mode::kCallStart;
    return true;
  }
  const size_t release = pending_.size() - HeldSuffix(pending_, kCallStart);
  EmitContent(pending_.substr(0, release), out);
  pending_.erase(0, release);
  return false;
}

bool ToolCallParser::StepLlamaStart(std::vector<ToolParseEvent>* out) {
  const size_t k = FirstNonBlank(pending_);
  if (k == std::string::npos) return false;
  const std::string_view rest = std::string_view(pending_).substr(k);
  if (StartsWith(rest, kPythonTag)) {
    held_prefix_ += pending_.substr(0, k + kPythonTag.size());
    pending_.erase(0, k + kPythonTag.size());
    return true;
  }
  if (StartsWith(kPythonTag, rest)) return false;  // may still become the tag
  if (rest[0] != '{') {
    ToContentForever(std::move(held_prefix_), out);
    return false;
  }
  held_prefix_ += pending_.substr(0, k);
  pending_.erase(0, k);
  scanner_.emplace();
  mode_ = Mode::kCallObject;
  return true;
}

bool ToolCallParser::StepCallStart(std::vector<ToolParseEvent>* out) {
  const size_t k = FirstNonBlank(pending_);
  if (k == std::string::npos) return false;
  if (pending_[k] != '{') {  // not a call after all: the marker is content
    EmitContent(std::string(kCallStart), out);
    mode_ = Mode::kContent;
    return true;
  }
  scanner_.emplace();  // it takes the blanks too, so a failed call gives its text back whole
  mode_ = Mode::kCallObject;
  return true;
}

bool ToolCallParser::StepCallObject(std::vector<ToolParseEvent>* out) {
  if (pending_.empty()) return false;
  pending_.erase(0, scanner_->Feed(pending_));
  if (!call_begun_ && scanner_->name() && !scanner_->failed()) {
    call_begun_ = true;
    call_dropped_ = num_calls_ >= max_calls_;
    if (!call_dropped_) {
      out->push_back({ToolParseEvent::Kind::kCallBegin, num_calls_, "call_" + RandomHexId().substr(0, 24),
                      *scanner_->name()});
      ++num_calls_;
    }
    held_prefix_.clear();
  }
  if (call_begun_ && !call_dropped_) EmitArguments(out);
  if (!scanner_->done() && !scanner_->failed()) return false;
  EndCallObject(out);
  return true;
}

void ToolCallParser::EndCallObject(std::vector<ToolParseEvent>* out) {
  if (!call_begun_) {  // not a call: what it was is content
    std::string text = format_ == ToolCallFormat::kHermes ? std::string(kCallStart) : std::move(held_prefix_);
    text += scanner_->text();
    if (format_ == ToolCallFormat::kHermes) {
      EmitContent(std::move(text), out);
      scanner_.reset();
      mode_ = Mode::kContent;
    } else {
      ToContentForever(std::move(text), out);
    }
    return;
  }
  if (!call_dropped_ && scanner_->done() && !scanner_->has_arguments()) {
    out->push_back({ToolParseEvent::Kind::kArguments, num_calls_ - 1, "", "{}"});
  }
  const bool broken = scanner_->failed();
  scanner_.reset();
  call_begun_ = call_dropped_ = false;
  arguments_sent_ = 0;
  expect_object_ = false;
  switch (format_) {
    case ToolCallFormat::kHermes: mode_ = Mode::kCallEnd; break;
    case ToolCallFormat::kLlama3Json: mode_ = broken ? Mode::kDone : Mode::kLlamaNext; break;
    default: mode_ = broken ? Mode::kDone : Mode::kArrayNext; break;
  }
}

bool ToolCallParser::StepCallEnd() {
  const size_t k = FirstNonBlank(pending_);
  if (k == std::string::npos) {
    pending_.clear();
    return false;
  }
  const size_t at = pending_.find(kCallEnd, k);
  if (at == std::string::npos) {  // text inside the call region is dropped up to its end marker
    pending_.erase(0, pending_.size() - HeldSuffix(pending_, kCallEnd));
    return false;
  }
  pending_.erase(0, at + kCallEnd.size());
  mode_ = Mode::kContent;
  after_call_ = true;
  return true;
}

bool ToolCallParser::StepSeparator(std::vector<ToolParseEvent>* out) {
  const size_t k = FirstNonBlank(pending_);
  if (k == std::string::npos) return false;
  const char c = pending_[k];
  if (num_calls_ == 0) held_prefix_ += pending_.substr(0, k + 1);
  if (c == '{' && expect_object_) {
    if (num_calls_ == 0) held_prefix_.pop_back();  // the object's own text is the scanner's
    pending_.erase(0, k);
    scanner_.emplace();
    mode_ = Mode::kCallObject;
    return true;
  }
  const bool separator = mode_ == Mode::kLlamaNext ? c == ';' : mode_ == Mode::kArrayStart ? c == '[' : c == ',';
  if (separator && !expect_object_) {
    pending_.erase(0, k + 1);
    expect_object_ = true;
    if (mode_ == Mode::kArrayStart) mode_ = Mode::kArrayNext;
    return true;
  }
  if (mode_ == Mode::kArrayNext && c == ']') {
    mode_ = Mode::kDone;
    return true;
  }
  if (num_calls_ == 0) held_prefix_.pop_back();
  ToContentForever(mode_ == Mode::kArrayNext || mode_ == Mode::kArrayStart ? std::move(held_prefix_) : "", out);
  return false;
}

}  // namespace tandem::router
