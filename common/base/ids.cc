#include "common/base/ids.h"

#include <random>

namespace tandem {

std::string RandomHexId() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(32, '0');
  uint64_t a = rng(), b = rng();
  for (int i = 0; i < 16; ++i) {
    out[i] = kHex[(a >> (i * 4)) & 0xf];
    out[16 + i] = kHex[(b >> (i * 4)) & 0xf];
  }
  return out;
}

}  // namespace tandem
