// Pieces of the Prometheus text exposition format, shared by the renderer and
// its tests. Thread rule: free functions, thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace tandem::metrics {

// True for [a-zA-Z_:][a-zA-Z0-9_:]*.
bool IsValidMetricName(std::string_view name);
// True for [a-zA-Z_][a-zA-Z0-9_]* not starting with "__".
bool IsValidLabelName(std::string_view name);
// HELP text: backslash -> \\, newline -> \n.
std::string EscapeHelp(std::string_view text);
// Label value: backslash -> \\, double quote -> \", newline -> \n.
std::string EscapeLabelValue(std::string_view value);
// Shortest text that reads back to the same double; "+Inf", "-Inf", "NaN".
std::string FormatValue(double value);

}  // namespace tandem::metrics
