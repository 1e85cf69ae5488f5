#include "common/net/cluster_token_file.h"

#include <fstream>

namespace tandem::net {

StatusOr<std::string> ReadClusterTokenFile(const std::string& path) {
  constexpr size_t kMaxTokenBytes = 4096;
  std::ifstream in(path, std::ios::binary);
  if (!in) return InvalidArgumentError("cannot read cluster_token_file " + path);
  std::string token(kMaxTokenBytes + 1, '\0');
  in.read(token.data(), static_cast<std::streamsize>(token.size()));
  token.resize(static_cast<size_t>(in.gcount()));
  if (token.size() > kMaxTokenBytes) return InvalidArgumentError("cluster_token_file " + path + " is over 4096 bytes");
  while (!token.empty() &&
         (token.back() == '\n' || token.back() == '\r' || token.back() == ' ' || token.back() == '\t')) {
    token.pop_back();
  }
  if (token.size() < 16) {
    return InvalidArgumentError("cluster_token_file " + path + " holds fewer than 16 bytes of token");
  }
  return token;
}

}  // namespace tandem::net
