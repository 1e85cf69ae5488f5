// "host:port" control addresses. Thread rule: free functions, thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/base/status.h"

namespace tandem::net {

struct HostPort {
  std::string host;  // name or IP literal, without IPv6 brackets
  uint16_t port = 0;
};

// Parses "host:port", "[v6addr]:port". InvalidArgument for a missing or bad
// port, an empty host, or input over 512 bytes.
StatusOr<HostPort> ParseHostPort(std::string_view address);

// Formats back to "host:port" (brackets around an IPv6 host).
std::string FormatHostPort(const HostPort& host_port);

}  // namespace tandem::net
