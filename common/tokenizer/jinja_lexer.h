// Lexing for the Jinja parser: splits template source into text and tag
// segments (applying whitespace control, trim_blocks and lstrip_blocks), and
// tag contents into expression tokens. Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/base/status.h"

namespace tandem::tokenizer::jinja {

struct TemplateSegment {
  enum class Kind { kText, kVariable, kBlock };
  Kind kind;
  std::string content;  // text, or the inside of {{ }} / {% %} without markers
  int line;
};

StatusOr<std::vector<TemplateSegment>> SplitTemplate(std::string_view source);

struct ExprToken {
  enum class Kind { kName, kString, kInt, kFloat, kOp, kEnd };
  Kind kind;
  std::string text;  // name, decoded string, number text or operator
  int line;
};

StatusOr<std::vector<ExprToken>> TokenizeExpression(std::string_view content, int line);

}  // namespace tandem::tokenizer::jinja
