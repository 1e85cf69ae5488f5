// AdminAuth: the admin key check of the operator endpoints (admin_endpoints.h).
// Thread rule: immutable after construction; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "router/api_key_table.h"

namespace tandem::router {

// Checks `Authorization: Bearer <admin key>`, compared in constant time
// (ApiKeyTable: SHA-256 digests, CRYPTO_memcmp). Never open: with no key
// configured every admin request is refused.
class AdminAuth {
 public:
  // `admin_key` empty = the admin API is off.
  explicit AdminAuth(const std::string& admin_key);

  bool enabled() const { return key_.has_value(); }
  // True when enabled and the header carries the admin key.
  bool Check(std::string_view authorization_header) const;

 private:
  std::optional<ApiKeyTable> key_;
};

}  // namespace tandem::router
