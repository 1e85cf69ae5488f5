#include "common/net/address.h"

#include <charconv>

namespace tandem::net {

StatusOr<HostPort> ParseHostPort(std::string_view address) {
  if (address.size() > 512) return InvalidArgumentError("address is over 512 bytes");
  HostPort out;
  std::string_view port_text;
  if (!address.empty() && address.front() == '[') {
    size_t close = address.find(']');
    if (close == std::string_view::npos || close + 1 >= address.size() || address[close + 1] != ':') {
      return InvalidArgumentError("bad address '" + std::string(address) + "': want [v6]:port");
    }
    out.host = std::string(address.substr(1, close - 1));
    port_text = address.substr(close + 2);
  } else {
    size_t colon = address.rfind(':');
    if (colon == std::string_view::npos || address.find(':') != colon) {
      return InvalidArgumentError("bad address '" + std::string(address) + "': want host:port");
    }
    out.host = std::string(address.substr(0, colon));
    port_text = address.substr(colon + 1);
  }
  if (out.host.empty()) return InvalidArgumentError("address '" + std::string(address) + "' has no host");
  unsigned port = 0;
  auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || end != port_text.data() + port_text.size() || port_text.empty() || port > 65535) {
    return InvalidArgumentError("address '" + std::string(address) + "' has a bad port");
  }
  out.port = static_cast<uint16_t>(port);
  return out;
}

std::string FormatHostPort(const HostPort& host_port) {
  if (host_port.host.find(':') != std::string::npos) {
    return "[" + host_port.host + "]:" + std::to_string(host_port.port);
  }
  return host_port.host + ":" + std::to_string(host_port.port);
}

}  // namespace tandem::net
