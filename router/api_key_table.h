// ApiKeyTable: maps `Authorization: Bearer <key>` to a tenant id.
//
// Keys are stored as SHA-256 digests and compared with CRYPTO_memcmp against
// every entry (no early exit), so timing reveals neither a key nor which entry
// matched. Keys are never logged. Thread rule: immutable after construction;
// thread-safe.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "router/router_config.h"

namespace tandem::router {

class ApiKeyTable {
 public:
  explicit ApiKeyTable(const std::vector<ApiKeyEntry>& entries);

  // True when no keys are configured: every request is let in as tenant "default".
  bool open() const { return entries_.empty(); }

  // The tenant for an Authorization header value ("Bearer <key>"), or nullopt
  // when it is missing, malformed or unknown. When open(), always "default".
  std::optional<std::string> Authenticate(std::string_view authorization_header) const;

 private:
  using Digest = std::array<unsigned char, 32>;
  struct Entry {
    Digest digest;
    std::string tenant;
  };
  static Digest Hash(std::string_view key);
  std::vector<Entry> entries_;
};

}  // namespace tandem::router
