// Helper process for the two-process UCX tests.
// Mode "raw" (argv: tls): a receiver-side UCX transport. Prints its worker
// address and region descriptor (hex, one per line), then progresses the worker
// and answers commands on stdin:
//   check <seed> <length>  -> "ok" if the region starts with PatternByte(seed, i)
//   exit                   -> leaves
// Mode "session" (argv: tls session): a KvReceiver (ucx_peer_plan.h). Prints the
// encoded KvTarget (hex), relays control messages as "msg <hex>" lines both ways,
// and prints "done <status>" then "landed ok|bad" when the session ends.
#include <poll.h>

#include <cstdio>
#include <cstring>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "common/base/clock.h"
#include "common/base/line_pipe.h"
#include "kv_transfer/kv_receiver.h"
#include "kv_transfer/ucx/ucx_transport.h"
#include "tests/kv_transfer/peer_plan.h"

namespace {

uint8_t PatternByte(uint32_t seed, size_t i) { return static_cast<uint8_t>((i * 131 + seed * 7 + (i >> 9)) & 0xff); }

int RunSession(tandem::kv_transfer::Transport& t) {
  using namespace tandem::kv_transfer;
  using namespace tandem::kv_transfer::testing;
  using namespace tandem::line_pipe;
  tandem::SystemClock clock;
  auto recv_layout = PeerLayout(kPeerRecvBlocks);
  std::vector<uint8_t> pool(recv_layout.TotalBytes(), 0);
  KvReceiver r(KvReceiverConfig{.model_id = "peer-model", .layout = recv_layout}, t, clock,
               [](tandem::RequestId, std::string m) { std::cout << "msg " << Hex(m) << std::endl; });
  if (!r.RegisterLanding(pool.data(), MemoryKind::kHost).ok()) return 4;
  tandem::Status result = tandem::InternalError("not done");
  bool done = false;
  ReceiveParams p;
  p.request_id = 42;
  p.epoch = 3;
  p.blocks = kPeerDstBlocks;
  p.lease_ms = 30'000;
  p.on_done = [&](const tandem::Status& s) {
    result = s;
    done = true;
  };
  auto target = r.Open(std::move(p));
  if (!target.ok()) return 5;
  std::cout << Hex(*target) << std::endl;
  std::string line;
  StdinLines lines;
  bool eof = false;
  while (!done && !eof) {
    r.Poll();
    while (!done && lines.Next(&line, &eof)) {
      if (line.rfind("msg ", 0) == 0) r.OnControlMessage(Unhex(line.substr(4)));
    }
  }
  std::cout << "done " << result.ToString() << std::endl;
  size_t n = recv_layout.BytesPerBlockLayer();
  bool ok = done && result.ok();
  for (int layer = 0; ok && layer < recv_layout.num_layers; ++layer) {
    for (size_t i = 0; ok && i < kPeerSrcBlocks.size(); ++i) {
      size_t src = (static_cast<size_t>(layer) * kPeerSendBlocks + kPeerSrcBlocks[i]) * n;
      size_t dst = (static_cast<size_t>(layer) * kPeerRecvBlocks + kPeerDstBlocks[i]) * n;
      for (size_t k = 0; ok && k < n; ++k) ok = pool[dst + k] == PeerPattern(src + k);
    }
  }
  std::cout << "landed " << (ok ? "ok" : "bad") << std::endl;
  while (!eof && line != "exit") {
    if (!lines.Next(&line, &eof)) ::poll(nullptr, 0, 1);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace tandem::kv_transfer;
  using namespace tandem::kv_transfer::testing;
  using namespace tandem::line_pipe;
  UcxConfig config;
  if (argc > 1) config.transports = argv[1];
  config.peer_error_handling = config.transports != "shm";
  size_t bytes = 8 << 20;
  auto t = UcxTransport::Create(config);
  if (!t.ok()) {
    std::cerr << t.status().ToString() << "\n";
    return 2;
  }
  if (argc > 2 && std::string(argv[2]) == "session") return RunSession(**t);
  std::vector<uint8_t> region(bytes, 0);
  auto reg = (*t)->RegisterMemory(region.data(), region.size(), MemoryKind::kHost);
  if (!reg.ok()) return 3;
  std::cout << Hex((*t)->WorkerAddress()) << "\n" << Hex(reg->descriptor) << std::endl;
  std::string line;
  std::vector<TransferEvent> events;
  StdinLines lines;
  bool eof = false;
  while (!eof) {
    (*t)->Poll(&events);
    if (!lines.Next(&line, &eof)) continue;
    if (line == "exit") break;
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
