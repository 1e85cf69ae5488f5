// The host-staged UCX path of kv_transfer_gpu_bench: a GPU node whose transport
// cannot reach device memory (UCX with CUDA pools, or kv_staging: host) moves a
// layer as pinned D2H into its staging arena, a UCX put into the other process's
// pinned landing arena, and an H2D from there into that process's device pool,
// the three pipelined across layers. Measured against its slowest hop in the same
// run: the UCX put alone (the same KvSender/KvReceiver sessions without the
// copies), and pinned D2H / H2D (Ceilings).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "bench/kv_transfer/gpu_bench_parts.h"
#include "bench/kv_transfer/gpu_bench_util.h"
#include "common/base/clock.h"
#include "common/base/line_pipe.h"
#include "kv_transfer/kv_receiver.h"
#include "kv_transfer/kv_sender.h"
#include "kv_transfer/transport_factory.h"

namespace tandem::bench {

using namespace kv_transfer;
using line_pipe::Hex;
using line_pipe::PeerProcess;
using line_pipe::StdinLines;
using line_pipe::Unhex;

namespace {

struct PinnedHost {
  explicit PinnedHost(size_t bytes) { BENCH_CUDA(cudaHostAlloc(&ptr, bytes, cudaHostAllocPortable)); }
  ~PinnedHost() { cudaFreeHost(ptr); }
  PinnedHost(const PinnedHost&) = delete;
  PinnedHost& operator=(const PinnedHost&) = delete;
  std::byte* bytes() const { return static_cast<std::byte*>(ptr); }
  void* ptr = nullptr;
};

// CLOCK_MONOTONIC, the same in both processes.
long long NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(SteadyClock::now().time_since_epoch()).count();
}

}  // namespace

// The decode side: a KvReceiver landing in pinned host memory; with upload on,
// each landed layer goes on to the device pool (H2D). stdin "open <request>
// <upload 0|1>" -> the KvTarget (hex); "msg <hex>" -> OnControlMessage; prints
// "done <status> <ns>" once the session ended and its uploads finished.
int RunStagedChild(const std::string& ucx_transports) {
  BENCH_CUDA(cudaSetDevice(0));
  auto t = MakeTransport("ucx", TransportOptions{.ucx_transports = ucx_transports});
  if (!t.ok()) {
    std::printf("error %s\n", t.status().ToString().c_str());
    return 2;
  }
  const kv_cache::KvLayout layout = Llama8BLayout(kPromptBlocks);
  PinnedHost landing(layout.TotalBytes());
  DeviceMemory pool(0, layout.TotalBytes());
  cudaStream_t stream;
  BENCH_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  SystemClock clock;
  KvReceiver r(KvReceiverConfig{.model_id = "llama-3-8b-shape", .layout = layout}, **t, clock,
               [](RequestId, std::string) {});
  TANDEM_CHECK_OK(r.RegisterLanding(landing.ptr, MemoryKind::kHost));
  std::printf("ready\n");
  std::fflush(stdout);
  bool upload = false, ended = false;
  Status ended_with;
  StdinLines lines;
  std::string line;
  bool eof = false;
  while (!eof) {
    r.Poll();
    if (ended) {
      BENCH_CUDA(cudaStreamSynchronize(stream));
      std::printf("done %s %lld\n", ended_with.ok() ? "OK" : ended_with.ToString().c_str(), NowNs());
      std::fflush(stdout);
      ended = false;
    }
    if (!lines.Next(&line, &eof)) continue;
    if (line == "exit") break;
    if (line.rfind("msg ", 0) == 0) {
      r.OnControlMessage(Unhex(line.substr(4)));
    } else if (line.rfind("open ", 0) == 0) {
      unsigned long long request = 0;
      int up = 0;
      std::sscanf(line.c_str(), "open %llu %d", &request, &up);
      upload = up != 0;
      ReceiveParams p;
      p.request_id = request;
      p.epoch = 1;
      p.lease_ms = 60'000;
      for (int b = 0; b < kPromptBlocks; ++b) p.blocks.push_back(b);
      p.on_layer = [&](int layer) {
        if (!upload) return;
        const size_t offset = layout.BlockOffset(layer, 0);
        BENCH_CUDA(cudaMemcpyAsync(pool.bytes() + offset, landing.bytes() + offset, layout.BytesPerLayer(),
                                   cudaMemcpyHostToDevice, stream));
      };
      p.on_done = [&](const Status& s) {
        ended_with = s;
        ended = true;
      };
      auto target = r.Open(std::move(p));
      std::printf("%s\n", target.ok() ? Hex(*target).c_str() : "");
      std::fflush(stdout);
    }
  }
  cudaStreamDestroy(stream);
  return 0;
}

void StagedUcx(int reps, double d2h, double h2d, std::vector<Row>* rows) {
  const std::string transports = "shm";
  PeerProcess child(SelfPath(), {"--child", "staged", transports});
  if (child.ReadLine(60'000) != "ready") {
    std::printf("\nstaged UCX: the receiving process did not start (no UCX in this build?)\n");
    return;
  }
  BENCH_CUDA(cudaSetDevice(0));
  auto t = MakeTransport("ucx", TransportOptions{.ucx_transports = transports});
  TANDEM_CHECK_OK(t.status());
  const kv_cache::KvLayout layout = Llama8BLayout(kPromptBlocks);
  const uint64_t bytes = layout.TotalBytes();
  DeviceMemory pool(0, bytes, 0x5a);
  PinnedHost staging(bytes);
  std::memset(staging.ptr, 0x5a, bytes);
  RegionId region = (*t)->RegisterMemory(staging.ptr, bytes, MemoryKind::kHost)->id;
  cudaStream_t stream;
  BENCH_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::vector<cudaEvent_t> staged_layer(layout.num_layers);
  for (cudaEvent_t& e : staged_layer) BENCH_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  SystemClock clock;
  std::deque<std::string> outbox;
  KvSender sender(KvSenderConfig{.model_id = "llama-3-8b-shape", .layout = layout}, **t, clock,
                  [&](RequestId, std::string m) { outbox.push_back(std::move(m)); });
  auto relay = [&] {
    for (const std::string& m : outbox) child.Command("msg " + Hex(m));
    outbox.clear();
  };
  uint64_t next_id = 1;
  // One session: layers go out as their D2H completes (staged) or at once (the put
  // alone); seconds from the first D2H (or put) to the child's last H2D, < 0 on failure.
  auto session = [&](bool staged) -> double {
    const uint64_t id = next_id++;
    child.Command(fmt::format("open {} {}", id, staged ? 1 : 0));
    SendParams p;
    p.target = Unhex(child.ReadLine());
    for (int b = 0; b < kPromptBlocks; ++b) p.source_blocks.push_back(b);
    Status sent = InternalError("not done");
    bool done = false;
    p.on_done = [&](const Status& s) {
      sent = s;
      done = true;
    };
    TANDEM_CHECK_OK(sender.Open(std::move(p)));
    const long long t0 = NowNs();
    if (staged) {
      for (int l = 0; l < layout.num_layers; ++l) {
        const size_t offset = layout.BlockOffset(l, 0);
        BENCH_CUDA(cudaMemcpyAsync(staging.bytes() + offset, pool.bytes() + offset, layout.BytesPerLayer(),
                                   cudaMemcpyDeviceToHost, stream));
        BENCH_CUDA(cudaEventRecord(staged_layer[l], stream));
      }
    }
    int next = 0;
    while (!done) {
      while (next < layout.num_layers && (!staged || cudaEventQuery(staged_layer[next]) == cudaSuccess)) {
        TANDEM_CHECK_OK(sender.SendLayer(id, next, LayerSource{region, layout.BlockOffset(next, 0)}));
        ++next;
      }
      sender.Poll();
      relay();
    }
    relay();
    long long t1 = 0;
    char status[64] = {};
    const std::string reply = child.ReadLine(60'000);
    if (!sent.ok() || std::sscanf(reply.c_str(), "done %63s %lld", status, &t1) != 2 || std::string(status) != "OK") {
      std::printf("staged UCX session %llu failed: sender %s, receiver '%s'\n", static_cast<unsigned long long>(id),
                  sent.ToString().c_str(), reply.c_str());
      return -1;
    }
    return static_cast<double>(t1 - t0) * 1e-9;
  };
  auto median_rate = [&](bool staged) -> double {
    std::vector<double> rates;
    for (int rep = 0; rep <= reps; ++rep) {  // rep 0 warms up (endpoints, rkeys)
      const double s = session(staged);
      if (s <= 0) return 0;
      if (rep > 0) rates.push_back(Gbps(bytes, s));
    }
    std::sort(rates.begin(), rates.end());
    return rates[rates.size() / 2];
  };
  const double put = median_rate(false);
  const double end_to_end = median_rate(true);
  const double slowest = std::min({d2h, put, h2d});
  std::printf(
      "\nhost-staged UCX (%s), 2 processes on GPU 0, 4K prompt: pinned D2H %.1f, UCX put alone %.1f, pinned H2D "
      "%.1f GB/s; D2H -> put -> H2D pipelined %.1f GB/s (%.2f of the slowest hop)\n",
      transports.c_str(), d2h, put, h2d, end_to_end, slowest > 0 ? end_to_end / slowest : 0.0);
  rows->push_back(Row{"UCX put alone, KV sessions (staged hop 2)", bytes, put, "", 0, ""});
  rows->push_back(Row{"host-staged UCX KV 4K prompt (median)", bytes, end_to_end, "slowest hop", slowest, ">= 0.80"});
  for (cudaEvent_t e : staged_layer) cudaEventDestroy(e);
  cudaStreamDestroy(stream);
  TANDEM_CHECK_OK((*t)->UnregisterMemory(region));
}

}  // namespace tandem::bench
