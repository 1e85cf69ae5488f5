// Parses Jinja template source into a syntax tree, with the lexer settings
// Hugging Face uses for chat templates: trim_blocks, lstrip_blocks, a single
// trailing newline removed, and `-`/`+` whitespace control. Pure function;
// thread-safe.
#pragma once

#include <string_view>

#include "common/base/status.h"
#include "common/tokenizer/jinja_ast.h"

namespace tandem::tokenizer::jinja {

// Source larger than this is rejected.
inline constexpr size_t kMaxTemplateBytes = 1u << 20;
// Maximum nesting of blocks and expressions.
inline constexpr int kMaxNestingDepth = 64;

// InvalidArgument("template syntax error, line N: ...") on malformed input.
StatusOr<NodeList> ParseTemplate(std::string_view source);

}  // namespace tandem::tokenizer::jinja
