// Helpers shared by the model-directory parsers: bounded file reads and JSON
// parsing capped in size and nesting depth (JsonNestingDepth) before nlohmann
// parses untrusted text.
// Thread rule: free functions, no state.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "nlohmann/json.hpp"

#include "common/base/status.h"

namespace tandem::model {

// Reads the whole file at `path`. NotFound when it does not exist;
// InvalidArgument when it is larger than `max_bytes`.
StatusOr<std::string> ReadFileToString(const std::string& path, size_t max_bytes);

// Parses `text` into a JSON value without throwing: InvalidArgument when it is
// over `max_bytes`, when its arrays/objects nest deeper than `max_depth`, or
// when it is not JSON. `what` names the input in error messages (a file path).
StatusOr<nlohmann::json> ParseJsonText(std::string_view text, size_t max_bytes, int max_depth, std::string_view what);

}  // namespace tandem::model
