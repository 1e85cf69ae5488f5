#include "common/kv_cache/block_hash.h"

#include <openssl/evp.h>

#include "common/base/check.h"

namespace tandem::kv_cache {
namespace {

// Length-prefixes a field so ("ab","c") and ("a","bc") hash differently.
void UpdateField(EVP_MD_CTX* ctx, const void* data, size_t size) {
  uint64_t len = size;
  EVP_DigestUpdate(ctx, &len, sizeof(len));
  if (size > 0) EVP_DigestUpdate(ctx, data, size);
}

struct DigestCtx {
  DigestCtx() : ctx(EVP_MD_CTX_new()) { TANDEM_CHECK(ctx != nullptr) << "EVP_MD_CTX_new failed"; }
  ~DigestCtx() { EVP_MD_CTX_free(ctx); }
  EVP_MD_CTX* ctx;
};

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

BlockHash HashBlock(const BlockHash& parent, std::string_view tenant_salt,
                    std::string_view model_id, std::span<const TokenId> tokens) {
  // One context per thread, reused: EVP_MD_CTX_new per block would dominate.
  thread_local DigestCtx digest;
  // Fetched once: an implicit fetch on every init costs as much as the hash itself.
  static EVP_MD* const kSha256 = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  TANDEM_CHECK(kSha256 != nullptr) << "OpenSSL has no SHA256";
  EVP_MD_CTX* ctx = digest.ctx;
  TANDEM_CHECK(EVP_DigestInit_ex2(ctx, kSha256, nullptr) == 1) << "SHA-256 init failed";
  EVP_DigestUpdate(ctx, parent.bytes.data(), parent.bytes.size());
  UpdateField(ctx, tenant_salt.data(), tenant_salt.size());
  UpdateField(ctx, model_id.data(), model_id.size());
  // Token ids as little-endian int32 (the in-memory form on our targets).
  UpdateField(ctx, tokens.data(), tokens.size_bytes());
  BlockHash out;
  unsigned int len = 0;
  TANDEM_CHECK(EVP_DigestFinal_ex(ctx, out.bytes.data(), &len) == 1 && len == 32)
      << "SHA-256 final failed";
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
    hashes->push_back(HashBlock(parent, tenant_salt, model_id,
                                tokens.subspan(b * block_size, static_cast<size_t>(block_size))));
    ++appended;
  }
  return appended;
}

}  // namespace tandem::kv_cache
