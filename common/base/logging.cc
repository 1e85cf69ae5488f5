#include "common/base/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <string>

namespace tandem {

Status InitLogging(std::string_view level) {
  auto parsed = spdlog::level::from_str(std::string(level));
  if (parsed == spdlog::level::off && level != "off") {
    return InvalidArgumentError("unknown log level '" + std::string(level) +
                                "' (trace, debug, info, warn, error, off)");
  }
  auto logger = spdlog::stderr_color_mt("tandem");
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%L%$ [%t] %v");
  spdlog::set_default_logger(logger);
  spdlog::set_level(parsed);
  return Status::Ok();
}

}  // namespace tandem
