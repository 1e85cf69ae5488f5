#include "common/net/cluster_token_file.h"

#include <fstream>

namespace tandem::net {

StatusOr<std::string> ReadClusterTokenFile(const std::string& path) {
  return ReadSecretFile(path, "cluster_token_file");
}

StatusOr<std::string> ReadSecretFile(const std::string& path, const std::string& option) {
  constexpr size_t kMaxTokenBytes = 4096;
  std::ifstream in(path, std::ios::binary);
  if (!in) return InvalidArgumentError("cannot read " + option + " " + path);
  std::string token(kMaxTokenBytes + 1, '\0');
  in.read(token.data(), static_cast<std::streamsize>(token.size()));
  token.resize(static_cast<size_t>(in.gcount()));
  if (token.size() > kMaxTokenBytes) return InvalidArgumentError(option + " " + path + " is over 4096 bytes");
  while (!token.empty() &&
         (token.back() == '\n' || token.back() == '\r' || token.back() == ' ' || token.back() == '\t')) {
    token.pop_back();
  }
  if (token.size() < 16) {
    return InvalidArgumentError(option + " " + path + " holds fewer than 16 bytes");
  }
  return token;
}

}  // namespace tandem::net
