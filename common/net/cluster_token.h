// Constant-time check of the shared cluster token presented in Hello.
// Both sides are hashed with SHA-256 first, so neither the comparison time nor
// an early length mismatch reveals anything about the expected token.
// Thread rule: value type; const methods are thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace tandem::net {

class ClusterToken {
 public:
  explicit ClusterToken(std::string_view token);
  // True when `presented` equals the token (CRYPTO_memcmp over the digests).
  bool Matches(std::string_view presented) const;

 private:
  std::array<uint8_t, 32> digest_{};
};

}  // namespace tandem::net
