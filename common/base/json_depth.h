// The JSON nesting-depth scan run on untrusted text before a parser sees it
// (nlohmann's parser recurses, so deep nesting is refused by depth first).
// Thread rule: a free function, no state.
#pragma once

#include <string_view>

namespace tandem {

// Deepest nesting of '[' and '{' in `text` outside JSON strings (escapes
// honoured). The scan stops as soon as the depth passes `stop_above` and
// returns that depth, so callers test `> limit` in O(size) at most. Malformed
// text is scanned as it is; the parser reports it afterwards.
int JsonNestingDepth(std::string_view text, int stop_above);

}  // namespace tandem
