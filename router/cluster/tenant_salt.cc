#include "router/cluster/tenant_salt.h"

#include <openssl/sha.h>

namespace tandem::router::cluster {

std::string TenantSalt(std::string_view tenant_id) {
  std::string input = "tandem-tenant:";
  input.append(tenant_id.empty() ? std::string_view("anonymous") : tenant_id);
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(input.data()), input.size(), digest);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * SHA256_DIGEST_LENGTH);
  for (unsigned char b : digest) {
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 15]);
  }
  return out;
}

}  // namespace tandem::router::cluster
