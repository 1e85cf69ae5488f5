// Logging through spdlog. One process-wide logger, configured once at startup
// (InitLogging) before other threads start; the macros are thread-safe.
// Never log prompt or completion text: log ids and sizes.
#pragma once

#include <spdlog/spdlog.h>

#include <string_view>

#include "common/base/status.h"

namespace tandem {

// level: "trace", "debug", "info", "warn", "error", "off". Returns InvalidArgument
// for an unknown level. Messages go to stderr.
Status InitLogging(std::string_view level);

}  // namespace tandem

#define TANDEM_LOG_DEBUG(...) SPDLOG_DEBUG(__VA_ARGS__)
#define TANDEM_LOG_INFO(...) SPDLOG_INFO(__VA_ARGS__)
#define TANDEM_LOG_WARN(...) SPDLOG_WARN(__VA_ARGS__)
#define TANDEM_LOG_ERROR(...) SPDLOG_ERROR(__VA_ARGS__)
