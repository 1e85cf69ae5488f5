// ApiKeyTable: maps `Authorization: Bearer <key>` to what the key grants: its
// tenant and the priority of its requests.
//
// Keys are stored as SHA-256 digests and compared with CRYPTO_memcmp against
// every entry (no early exit), so timing reveals neither a key nor which entry
// matched. Keys are never logged. Thread rule: immutable after construction;
// thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "router/router_config.h"

namespace tandem::router {

// What an authenticated request runs as.
struct ApiKeyGrant {
  std::string tenant;
  int32_t default_priority = 0;                        // for requests without `priority`
  std::optional<int32_t> min_priority = std::nullopt;  // the most urgent priority allowed; nullopt = no cap

  // The priority a request runs at: its own `requested` value when given, else
  // the key's default, raised to min_priority when it is more urgent than that.
  int32_t PriorityFor(std::optional<int32_t> requested) const;
};

class ApiKeyTable {
 public:
  // REQUIRES: entries passed RouterConfig::Validate (their priorities parse).
  explicit ApiKeyTable(const std::vector<ApiKeyEntry>& entries);

  // True when no keys are configured: every request is let in as tenant "default".
  bool open() const { return entries_.empty(); }

  // The grant for an Authorization header value ("Bearer <key>"), or nullopt
  // when it is missing, malformed or unknown. When open(), always tenant
  // "default" with priority 0 and no cap.
  std::optional<ApiKeyGrant> Authenticate(std::string_view authorization_header) const;

 private:
  using Digest = std::array<unsigned char, 32>;
  struct Entry {
    Digest digest;
    ApiKeyGrant grant;
  };
  static Digest Hash(std::string_view key);
  std::vector<Entry> entries_;
};

}  // namespace tandem::router
