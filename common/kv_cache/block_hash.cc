#include "common/kv_cache/block_hash.h"

#include <openssl/evp.h>

#include "common/base/check.h"

namespace tandem::kv_cache {
namespace {

// Appends a length-prefixed field so ("ab","c") and ("a","bc") hash differently.
void AppendField(std::string* buf, const void* data, size_t size) {
  uint64_t len = size;
  buf->append(reinterpret_cast<const char*>(&len), sizeof(len));
  buf->append(static_cast<const char*>(data), size);
}

}  // namespace

std::string BlockHash::ToHex() const {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(64, '0');
  for (size_t i = 0; i < bytes.size(); ++i) {
    out[2 * i] = kDigits[bytes[i] >> 4];
    out[2 * i + 1] = kDigits[bytes[i] & 15];
  }
  return out;
}

BlockHash HashBlock(const BlockHash& parent, std::string_view tenant_salt, std::string_view model_id,
                    std::span<const TokenId> tokens) {
  // One contiguous message and a one-shot digest: cheaper than several updates.
  thread_local std::string message;
  message.clear();
  message.append(reinterpret_cast<const char*>(parent.bytes.data()), parent.bytes.size());
  AppendField(&message, tenant_salt.data(), tenant_salt.size());
  AppendField(&message, model_id.data(), model_id.size());
  // Token ids as little-endian int32 (the in-memory form on our targets).
  AppendField(&message, tokens.data(), tokens.size_bytes());
  // Fetched once: an implicit fetch per digest costs about as much as the hash.
  static EVP_MD* const kSha256 = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  TANDEM_CHECK(kSha256 != nullptr) << "OpenSSL has no SHA256";
  BlockHash out;
  unsigned int len = 0;
  TANDEM_CHECK(EVP_Digest(message.data(), message.size(), out.bytes.data(), &len, kSha256, nullptr) == 1 && len == 32)
      << "SHA-256 failed";
  return out;
}

int ExtendBlockHashes(std::string_view tenant_salt, std::string_view model_id, int block_size,
                      std::span<const TokenId> tokens, std::vector<BlockHash>* hashes) {
  TANDEM_CHECK_GT(block_size, 0);
  size_t full_blocks = tokens.size() / static_cast<size_t>(block_size);
  int appended = 0;
  while (hashes->size() < full_blocks) {
    size_t b = hashes->size();
    BlockHash parent = b == 0 ? BlockHash{} : (*hashes)[b - 1];
    hashes->push_back(
        HashBlock(parent, tenant_salt, model_id, tokens.subspan(b * block_size, static_cast<size_t>(block_size))));
    ++appended;
  }
  return appended;
}

}  // namespace tandem::kv_cache
