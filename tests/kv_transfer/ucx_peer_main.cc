// Helper process for the two-process UCX tests: a receiver-side UCX transport.
// Prints its worker address and region descriptor (hex, one per line), then
// progresses the worker and answers commands on stdin:
//   check <seed> <length>  -> "ok" if the region starts with PatternByte(seed, i)
//   exit                   -> leaves
#include <poll.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "kv_transfer/ucx/ucx_transport.h"

namespace {

uint8_t PatternByte(uint32_t seed, size_t i) { return static_cast<uint8_t>((i * 131 + seed * 7 + (i >> 9)) & 0xff); }

std::string Hex(const std::string& s) {
  static const char* k = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out.push_back(k[c >> 4]);
    out.push_back(k[c & 15]);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace tandem::kv_transfer;
  UcxConfig config;
  if (argc > 1) config.transports = argv[1];
  size_t bytes = 8 << 20;
  auto t = UcxTransport::Create(config);
  if (!t.ok()) {
    std::cerr << t.status().ToString() << "\n";
    return 2;
  }
  std::vector<uint8_t> region(bytes, 0);
  auto reg = (*t)->RegisterMemory(region.data(), region.size(), MemoryKind::kHost);
  if (!reg.ok()) return 3;
  std::cout << Hex((*t)->WorkerAddress()) << "\n" << Hex(reg->descriptor) << std::endl;
  std::string line;
  std::vector<TransferEvent> events;
  while (true) {
    (*t)->Poll(&events);
    pollfd pfd{0, POLLIN, 0};
    if (::poll(&pfd, 1, 0) <= 0) continue;
    if (!std::getline(std::cin, line) || line == "exit") break;
    std::istringstream in(line);
    std::string cmd;
    uint32_t seed = 0;
    size_t len = 0;
    in >> cmd >> seed >> len;
    bool ok = cmd == "check" && len <= region.size();
    for (size_t i = 0; ok && i < len; ++i) ok = region[i] == PatternByte(seed, i);
    std::cout << (ok ? "ok" : "bad") << std::endl;
  }
  (void)(*t)->UnregisterMemory(reg->id);
  return 0;
}
