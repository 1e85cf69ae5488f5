// Command line for tandem-router: `--config router.yaml` plus overrides of
// the most used RouterConfig fields. Thread rule: call once at startup.
#pragma once

#include "router/router_config.h"

namespace tandem::router {

struct RouterCommandLine {
  RouterConfig config;
  std::string log_level = "info";
  bool help_requested = false;  // --help was given; the text is in `help`
  std::string help;
};

// Reads --config (YAML) if given, then applies flag overrides, then validates.
// Unknown flags and bad values are InvalidArgument with CLI11's message.
StatusOr<RouterCommandLine> ParseRouterFlags(int argc, const char* const* argv);

}  // namespace tandem::router
