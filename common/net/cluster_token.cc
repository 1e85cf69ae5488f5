#include "common/net/cluster_token.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>

namespace tandem::net {
namespace {

std::array<uint8_t, 32> Digest(std::string_view bytes) {
  std::array<uint8_t, 32> out{};
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), out.data());
  return out;
}

}  // namespace

ClusterToken::ClusterToken(std::string_view token) : digest_(Digest(token)) {}

bool ClusterToken::Matches(std::string_view presented) const {
  std::array<uint8_t, 32> other = Digest(presented);
  return CRYPTO_memcmp(other.data(), digest_.data(), digest_.size()) == 0;
}

}  // namespace tandem::net
