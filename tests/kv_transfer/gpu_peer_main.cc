// Helper process for the two-process GPU transport tests (cuda_ipc, nccl): the
// other end of a transport whose memory lives on a GPU. Lines on stdin/stdout.
//
//   raw <backend> <device> <bytes> <fill>
//     A bare transport with a device region of <bytes> filled with <fill>. Prints
//     its worker address and region descriptor (hex, one line each), then
//     answers: "dump <path>" (region bytes to a file) -> ok; "accept <hex token>"
//     -> ok | error <status>; "recv <n> <offset> <length> ..." (a receive batch)
//     -> posted <id> | error <status>; "events" -> one "event <id> <code>
//     <message>" line per ended receive batch, then "end"; "exit".
//   recv-session <backend> <device> <lease_ms>
//     A KvReceiver over a device landing pool (peer_plan.h), request 42 epoch 3.
//     Prints the encoded KvTarget (hex), relays control messages as "msg <hex>"
//     lines both ways, and when the session ends prints "done <status>", then
//     "landed ok|bad" and "untouched ok|bad" (blocks it did not ask for).
//   send-session <backend> <device> <layer_delay_ms>
//     A KvSender over a device pool holding PeerPattern: reads "target <hex>",
//     sends one layer every <layer_delay_ms>, relays messages, prints "done <status>".
#include <cuda_runtime_api.h>
#include <poll.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/base/clock.h"
#include "common/base/line_pipe.h"
#include "kv_transfer/kv_receiver.h"
#include "kv_transfer/kv_sender.h"
#include "kv_transfer/transport_factory.h"
#include "tests/kv_transfer/peer_plan.h"

namespace tandem::kv_transfer::testing {
namespace {

using line_pipe::Hex;
using line_pipe::StdinLines;
using line_pipe::Unhex;

using SteadyClock = std::chrono::steady_clock;

void* DeviceBytes(size_t bytes, int fill) {
  void* p = nullptr;
  if (cudaMalloc(&p, bytes) != cudaSuccess || cudaMemset(p, fill, bytes) != cudaSuccess) return nullptr;
  return p;
}

std::vector<uint8_t> Download(const void* p, size_t bytes) {
  std::vector<uint8_t> host(bytes);
  TANDEM_CHECK(cudaMemcpy(host.data(), p, bytes, cudaMemcpyDeviceToHost) == cudaSuccess);
  return host;
}

int RunRaw(Transport& t, size_t bytes, int fill) {
  void* region = DeviceBytes(bytes, fill);
  if (region == nullptr) return 3;
  auto reg = t.RegisterMemory(region, bytes, MemoryKind::kDevice);
  if (!reg.ok()) {
    std::cerr << reg.status().ToString() << "\n";
    return 3;
  }
  std::cout << Hex(t.WorkerAddress()) << "\n" << Hex(reg->descriptor) << std::endl;
  PeerId peer = kInvalidHandle;
  std::vector<TransferEvent> events;
  StdinLines lines;
  std::string line;
  bool eof = false;
  while (!eof) {
    t.Poll(&events);
    if (!lines.Next(&line, &eof)) continue;
    std::istringstream in(line);
    std::string cmd;
    in >> cmd;
    if (cmd == "exit") break;
    if (cmd == "dump") {
      std::string path;
      in >> path;
      std::vector<uint8_t> host = Download(region, bytes);
      std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(host.data()), host.size());
      std::cout << "ok" << std::endl;
    } else if (cmd == "accept") {
      std::string hex;
      in >> hex;
      auto accepted = t.Accept(Unhex(hex));
      if (accepted.ok()) peer = *accepted;
      std::cout << (accepted.ok() ? std::string("ok") : "error " + accepted.status().ToString()) << std::endl;
    } else if (cmd == "recv") {
      size_t n = 0;
      in >> n;
      std::vector<WriteOp> ops(n);
      for (WriteOp& op : ops) {
        op.local_region = reg->id;
        in >> op.local_offset >> op.length;
      }
      auto id = t.PostReceives(peer, ops);
      std::cout << (id.ok() ? "posted " + std::to_string(*id) : "error " + id.status().ToString()) << std::endl;
    } else if (cmd == "events") {
      for (const TransferEvent& e : events) {
        std::cout << "event " << e.id << " " << static_cast<int>(e.status.code()) << " " << e.status.message() << "\n";
      }
      events.clear();
      std::cout << "end" << std::endl;
    }
  }
  (void)t.UnregisterMemory(reg->id);
  return 0;
}

// Relays stdin "msg <hex>" lines to `deliver` until `done` or stdin closes.
template <typename Deliver, typename Step>
void Relay(StdinLines& lines, bool* eof, const bool& done, Deliver deliver, Step step) {
  std::string line;
  while (!done && !*eof) {
    step();
    while (!done && lines.Next(&line, eof)) {
      if (line.rfind("msg ", 0) == 0) deliver(Unhex(line.substr(4)));
    }
  }
}

void WaitForExit(StdinLines& lines, bool eof, Transport& t) {
  std::string line;
  std::vector<TransferEvent> events;
  while (!eof && line != "exit") {
    t.Poll(&events);  // a two-sided transport may still have to progress
    if (!lines.Next(&line, &eof)) ::poll(nullptr, 0, 1);
  }
}

int RunReceiveSession(Transport& t, uint32_t lease_ms) {
  SystemClock clock;
  kv_cache::KvLayout layout = PeerLayout(kPeerRecvBlocks);
  void* pool = DeviceBytes(layout.TotalBytes(), 0xEE);
  if (pool == nullptr) return 4;
  Status result = InternalError("not done");
  bool done = false;
  {
    KvReceiver r(KvReceiverConfig{.model_id = "peer-model", .layout = layout}, t, clock,
                 [](RequestId, std::string m) { std::cout << "msg " << Hex(m) << std::endl; });
    if (!r.RegisterLanding(pool, MemoryKind::kDevice).ok()) return 4;
    ReceiveParams p;
    p.request_id = 42;
    p.epoch = 3;
    p.blocks = kPeerDstBlocks;
    p.lease_ms = lease_ms;
    p.on_done = [&](const Status& s) {
      result = s;
      done = true;
    };
    auto target = r.Open(std::move(p));
    if (!target.ok()) return 5;
    std::cout << Hex(*target) << std::endl;
    StdinLines lines;
    bool eof = false;
    Relay(
        lines, &eof, done, [&](const std::string& m) { r.OnControlMessage(m); }, [&] { r.Poll(); });
    std::cout << "done " << result.ToString() << std::endl;
    std::vector<uint8_t> host = Download(pool, layout.TotalBytes());
    const size_t n = layout.BytesPerBlockLayer();
    bool landed = done && result.ok(), untouched = true;
    for (int layer = 0; layer < layout.num_layers; ++layer) {
      for (size_t i = 0; landed && i < kPeerSrcBlocks.size(); ++i) {
        size_t src = (static_cast<size_t>(layer) * kPeerSendBlocks + kPeerSrcBlocks[i]) * n;
        size_t dst = (static_cast<size_t>(layer) * kPeerRecvBlocks + kPeerDstBlocks[i]) * n;
        for (size_t k = 0; landed && k < n; ++k) landed = host[dst + k] == PeerPattern(src + k);
      }
      for (int b = 0; b < kPeerRecvBlocks; ++b) {
        bool mine = false;
        for (int32_t d : kPeerDstBlocks) mine = mine || d == b;
        size_t at = (static_cast<size_t>(layer) * kPeerRecvBlocks + b) * n;
        for (size_t k = 0; !mine && untouched && k < n; ++k) untouched = host[at + k] == 0xEE;
      }
    }
    std::cout << "landed " << (landed ? "ok" : "bad") << "\nuntouched " << (untouched ? "ok" : "bad") << std::endl;
    WaitForExit(lines, eof, t);
  }
  cudaFree(pool);
  return 0;
}

int RunSendSession(Transport& t, int layer_delay_ms) {
  SystemClock clock;
  kv_cache::KvLayout layout = PeerLayout(kPeerSendBlocks);
  std::vector<uint8_t> host(layout.TotalBytes());
  for (size_t i = 0; i < host.size(); ++i) host[i] = PeerPattern(i);
  void* pool = DeviceBytes(host.size(), 0);
  if (pool == nullptr || cudaMemcpy(pool, host.data(), host.size(), cudaMemcpyHostToDevice) != cudaSuccess) return 4;
  auto reg = t.RegisterMemory(pool, host.size(), MemoryKind::kDevice);
  if (!reg.ok()) return 4;
  StdinLines lines;
  std::string line;
  bool eof = false;
  while (line.rfind("target ", 0) != 0 && !eof) {
    if (!lines.Next(&line, &eof)) ::poll(nullptr, 0, 1);
  }
  Status result = InternalError("not done");
  bool done = false;
  {
    KvSender s(KvSenderConfig{.model_id = "peer-model", .layout = layout}, t, clock,
               [](RequestId, std::string m) { std::cout << "msg " << Hex(m) << std::endl; });
    SendParams p;
    p.target = Unhex(line.substr(7));
    p.source_blocks = kPeerSrcBlocks;
    p.on_done = [&](const Status& st) {
      result = st;
      done = true;
    };
    if (!s.Open(std::move(p)).ok()) return 5;
    int next_layer = 0;
    auto next_at = SteadyClock::now();
    Relay(
        lines, &eof, done, [&](const std::string& m) { s.OnControlMessage(m); },
        [&] {
          s.Poll();
          if (next_layer < layout.num_layers && SteadyClock::now() >= next_at) {
            s.SendLayer(42, next_layer, LayerSource{reg->id, layout.BlockOffset(next_layer, 0)}).IgnoreError();
            ++next_layer;
            next_at = SteadyClock::now() + std::chrono::milliseconds(layer_delay_ms);
          }
        });
    if (!done) s.CancelAll(CancelledError("peer shutting down"));
    while (s.num_sessions() > 0) s.Poll();
  }
  std::cout << "done " << result.ToString() << std::endl;
  WaitForExit(lines, eof, t);
  (void)t.UnregisterMemory(reg->id);
  cudaFree(pool);
  return 0;
}

int Main(int argc, char** argv) {
  if (argc < 5) {
    std::cerr << "usage: kv_transfer_gpu_peer raw|recv-session|send-session <backend> <device> <arg> [fill]\n";
    return 2;
  }
  const std::string mode = argv[1];
  const int device = std::stoi(argv[3]);
  if (cudaSetDevice(device) != cudaSuccess) return 2;
  auto t = MakeTransport(argv[2], TransportOptions{.ucx_transports = "", .cuda_device = device});
  if (!t.ok()) {
    std::cerr << t.status().ToString() << "\n";
    return 2;
  }
  if (mode == "raw") return RunRaw(**t, std::stoull(argv[4]), argc > 5 ? std::stoi(argv[5]) : 0);
  if (mode == "recv-session") return RunReceiveSession(**t, static_cast<uint32_t>(std::stoul(argv[4])));
  if (mode == "send-session") return RunSendSession(**t, std::stoi(argv[4]));
  return 2;
}

}  // namespace
}  // namespace tandem::kv_transfer::testing

int main(int argc, char** argv) { return tandem::kv_transfer::testing::Main(argc, argv); }
