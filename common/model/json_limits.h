// Helpers shared by the model-directory parsers: bounded file reads and a
// JSON nesting-depth check run before nlohmann parses untrusted text.
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

// InvalidArgument when arrays/objects in `text` nest deeper than `max_depth`.
// Strings (with escapes) are skipped, so brackets inside them do not count.
Status CheckJsonDepth(std::string_view text, int max_depth, std::string_view what);

// Parses `text` (size-capped, depth-checked) into a JSON value without
// throwing. `what` names the input in error messages (e.g. a file path).
StatusOr<nlohmann::json> ParseJsonText(std::string_view text, size_t max_bytes, int max_depth,
                                       std::string_view what);

}  // namespace tandem::model
