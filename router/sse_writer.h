// Server-sent events framing for the streaming endpoints.
//
// Every function returns one complete event ("data: ...\n\n") that is valid
// UTF-8 and cannot be split or ended early by the payload: invalid bytes
// become U+FFFD and line breaks inside the payload start a new `data:` line.
// Thread rule: pure functions.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace tandem::router {

// The final event of every stream.
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

// `data: <compact json>\n\n`.
std::string SseJsonEvent(const nlohmann::json& payload);

// One event carrying arbitrary bytes as its data.
std::string SseDataEvent(std::string_view data);

}  // namespace tandem::router
