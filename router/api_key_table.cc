#include "router/api_key_table.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <algorithm>
#include <cctype>

#include "common/base/check.h"

namespace tandem::router {
namespace {

std::optional<int32_t> ValidPriority(const std::string& text) {
  StatusOr<std::optional<int32_t>> value = ParseKeyPriority(text, "api key priority");
  TANDEM_CHECK(value.ok()) << value.status().ToString();
  return *value;
}

}  // namespace

int32_t ApiKeyGrant::PriorityFor(std::optional<int32_t> requested) const {
  const int32_t priority = requested.value_or(default_priority);
  return min_priority ? std::max(priority, *min_priority) : priority;
}

ApiKeyTable::ApiKeyTable(const std::vector<ApiKeyEntry>& entries) {
  for (const ApiKeyEntry& e : entries) {
    ApiKeyGrant grant{e.tenant, ValidPriority(e.priority).value_or(0), ValidPriority(e.min_priority)};
    entries_.push_back({Hash(e.key), std::move(grant)});
  }
}

ApiKeyTable::Digest ApiKeyTable::Hash(std::string_view key) {
  Digest digest;
  SHA256(reinterpret_cast<const unsigned char*>(key.data()), key.size(), digest.data());
  return digest;
}

std::optional<ApiKeyGrant> ApiKeyTable::Authenticate(std::string_view header) const {
  if (open()) return ApiKeyGrant{"default"};
  constexpr std::string_view kScheme = "Bearer ";
  if (header.size() <= kScheme.size()) return std::nullopt;
  // The scheme name is case-insensitive (RFC 7235).
  for (size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(header[i])) != std::tolower(static_cast<unsigned char>(kScheme[i]))) {
      return std::nullopt;
    }
  }
  std::string_view key = header.substr(kScheme.size());
  while (!key.empty() && key.front() == ' ') key.remove_prefix(1);
  while (!key.empty() && key.back() == ' ') key.remove_suffix(1);
  const Digest digest = Hash(key);
  const Entry* match = nullptr;
  for (const Entry& entry : entries_) {
    const bool equal = CRYPTO_memcmp(entry.digest.data(), digest.data(), digest.size()) == 0;
    if (equal && match == nullptr) match = &entry;
  }
  if (match == nullptr) return std::nullopt;
  return match->grant;
}

}  // namespace tandem::router
