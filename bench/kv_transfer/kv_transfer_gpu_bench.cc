// GPU KV transfer benchmark. Moves the KV of a 4K-token prompt of the
// Llama-3-8B shape (32 layers x 256 blocks x 64 KiB = 512 MiB) layer by layer
// from a KvSender in this process to a KvReceiver in a second process on the
// same GPU over cuda_ipc, exactly as the nodes do (one SendLayer per layer, the
// sender's coalesced runs, events polled), with the destination blocks
// contiguous and scattered (a random permutation), and compares it with
// cudaMemcpyAsync device-to-device of the same bytes measured in the same run.
// Also prints pinned D2H and H2D (the host-staged path's hops), the copy-engine
// vs run-copy-kernel rate per run length (the cuda_ipc threshold), the
// host-staged UCX path against its slowest hop (gpu_bench_staged.cc), and with two
// GPUs GPU0 -> GPU1 over cuda_ipc vs cudaMemcpyPeer and over nccl vs raw
// ncclSend/ncclRecv at 1..512 MiB. A compact table comes last.
// Convention: bytes moved once (a 512 MiB transfer counts 512 MiB), host wall
// time from the first post to the last completion.
// Usage: kv_transfer_gpu_bench [--reps N]
#include <cstdio>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "bench/kv_transfer/gpu_bench_parts.h"
#include "bench/kv_transfer/gpu_bench_util.h"
#include "common/base/clock.h"
#include "common/base/line_pipe.h"
#include "common/kernels/kv_run_copy.h"
#include "kv_transfer/kv_receiver.h"
#include "kv_transfer/kv_sender.h"
#include "kv_transfer/transport_factory.h"

namespace tandem::bench {
namespace {

using namespace kv_transfer;
using line_pipe::Hex;
using line_pipe::PeerProcess;
using line_pipe::StdinLines;
using line_pipe::Unhex;

// The decode side of the KV benchmark: a KvReceiver over a device pool.
// stdin "open <request> contiguous|scattered" -> the KvTarget (hex);
// "msg <hex>" -> OnControlMessage; prints "done <status>" per session.
int RunKvChild(const std::string& backend, int device) {
  BENCH_CUDA(cudaSetDevice(device));
  auto t = MakeTransport(backend, TransportOptions{.ucx_transports = "", .cuda_device = device});
  if (!t.ok()) {
    std::printf("error %s\n", t.status().ToString().c_str());
    return 2;
  }
  kv_cache::KvLayout layout = Llama8BLayout(kPoolBlocks);
  DeviceMemory pool(device, layout.TotalBytes());
  SystemClock clock;
  KvReceiver r(KvReceiverConfig{.model_id = "llama-3-8b-shape", .layout = layout}, **t, clock,
               [](RequestId, std::string) {});
  TANDEM_CHECK_OK(r.RegisterLanding(pool.ptr, MemoryKind::kDevice));
  std::printf("ready\n");
  std::fflush(stdout);
  StdinLines lines;
  std::string line;
  bool eof = false;
  while (!eof) {
    r.Poll();
    if (!lines.Next(&line, &eof)) continue;
    if (line == "exit") break;
    if (line.rfind("msg ", 0) == 0) {
      r.OnControlMessage(Unhex(line.substr(4)));
    } else if (line.rfind("open ", 0) == 0) {
      char mode[32] = {};
      unsigned long long request = 0;
      std::sscanf(line.c_str(), "open %llu %31s", &request, mode);
      ReceiveParams p;
      p.request_id = request;
      p.epoch = 1;
      p.lease_ms = 60'000;
      if (std::string(mode) == "scattered") {
        p.blocks = Scattered(kPromptBlocks, kPoolBlocks, static_cast<uint32_t>(request));
      } else {
        for (int b = 0; b < kPromptBlocks; ++b) p.blocks.push_back(b);
      }
      p.on_done = [](const Status& s) {
        std::printf("done %s\n", s.ToString().c_str());
        std::fflush(stdout);
      };
      auto target = r.Open(std::move(p));
      std::printf("%s\n", target.ok() ? Hex(*target).c_str() : "");
      std::fflush(stdout);
    }
  }
  return 0;
}

// One KV session per rep through KvSender; returns the best and median GB/s.
struct KvResult {
  double best = 0, median = 0;
  bool ok = true;
};

KvResult RunKvSessions(const std::string& mode, int reps) {
  PeerProcess child(SelfPath(), {"--child", "kv", "cuda_ipc", "0"});
  if (child.ReadLine(60'000) != "ready") {
    std::printf("kv child did not start\n");
    return KvResult{0, 0, false};
  }
  BENCH_CUDA(cudaSetDevice(0));
  auto t = MakeTransport("cuda_ipc", TransportOptions{.ucx_transports = "", .cuda_device = 0});
  TANDEM_CHECK_OK(t.status());
  kv_cache::KvLayout layout = Llama8BLayout(kPoolBlocks);
  DeviceMemory pool(0, layout.TotalBytes(), 0x3c);
  RegionId region = (*t)->RegisterMemory(pool.ptr, pool.size, MemoryKind::kDevice)->id;
  SystemClock clock;
  std::deque<std::string> outbox;  // the node's sink queues to its RPC thread; so does this
  KvSender sender(KvSenderConfig{.model_id = "llama-3-8b-shape", .layout = layout}, **t, clock,
                  [&](RequestId, std::string m) { outbox.push_back(std::move(m)); });
  std::vector<double> rates;
  KvResult result;
  for (int rep = 0; rep <= reps; ++rep) {  // rep 0 warms up (connect, IPC open, first launches)
    child.Command("open " + std::to_string(rep + 1) + " " + mode);
    std::string target = Unhex(child.ReadLine());
    Status sent = InternalError("not done");
    bool done = false;
    SendParams p;
    p.target = target;
    for (int b = 0; b < kPromptBlocks; ++b) p.source_blocks.push_back(b);
    p.on_done = [&](const Status& s) {
      sent = s;
      done = true;
    };
    TANDEM_CHECK_OK(sender.Open(std::move(p)));
    auto t0 = SteadyClock::now();
    for (int layer = 0; layer < layout.num_layers; ++layer) {
      TANDEM_CHECK_OK(sender.SendLayer(rep + 1, layer, LayerSource{region, layout.BlockOffset(layer, 0)}));
    }
    auto posted = SteadyClock::now();
    while (!done) sender.Poll();
    auto t1 = SteadyClock::now();
    if (rep == reps) {
      std::printf("cuda_ipc %s: posting the 32 layers took %.0f us of the %.0f us transfer (host cost per layer)\n",
                  mode.c_str(), Seconds(t0, posted) * 1e6, Seconds(t0, t1) * 1e6);
    }
    for (const std::string& m : outbox) child.Command("msg " + Hex(m));
    outbox.clear();
    std::string reply = child.ReadLine(60'000);
    if (!sent.ok() || reply != "done OK") {
      std::printf("kv %s rep %d failed: sender %s, receiver '%s'\n", mode.c_str(), rep, sent.ToString().c_str(),
                  reply.c_str());
      result.ok = false;
      break;
    }
    const uint64_t bytes = layout.BytesPerBlockLayer() * kPromptBlocks * layout.num_layers;
    if (rep > 0) rates.push_back(Gbps(bytes, Seconds(t0, t1)));
  }
  TANDEM_CHECK_OK((*t)->UnregisterMemory(region));
  if (rates.empty()) return result;
  std::sort(rates.begin(), rates.end());
  result.best = rates.back();
  result.median = rates[rates.size() / 2];
  return result;
}

// Host-clock rate of `copy` (queued on `stream`) moving `bytes`: best of `reps`.
template <typename Copy>
double BestRate(uint64_t bytes, int reps, cudaStream_t stream, Copy copy) {
  double best = 0;
  for (int rep = 0; rep <= reps; ++rep) {
    BENCH_CUDA(cudaStreamSynchronize(stream));
    auto t0 = SteadyClock::now();
    copy();
    BENCH_CUDA(cudaStreamSynchronize(stream));
    double gbps = Gbps(bytes, Seconds(t0, SteadyClock::now()));
    if (rep > 0) best = std::max(best, gbps);
  }
  return best;
}

// Device-to-device, pinned D2H and pinned H2D of the prompt's bytes on GPU 0.
void Ceilings(uint64_t bytes, int reps, std::vector<Row>* rows, double* d2d, double* d2h, double* h2d) {
  BENCH_CUDA(cudaSetDevice(0));
  cudaStream_t s;
  BENCH_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  DeviceMemory a(0, bytes, 1), b(0, bytes, 2);
  void* host = nullptr;
  BENCH_CUDA(cudaHostAlloc(&host, bytes, cudaHostAllocPortable));
  auto copy = [&](void* dst, const void* src, cudaMemcpyKind kind) {
    return BestRate(bytes, reps, s, [&] { BENCH_CUDA(cudaMemcpyAsync(dst, src, bytes, kind, s)); });
  };
  *d2d = copy(b.ptr, a.ptr, cudaMemcpyDeviceToDevice);
  *d2h = copy(host, a.ptr, cudaMemcpyDeviceToHost);
  *h2d = copy(a.ptr, host, cudaMemcpyHostToDevice);
  std::printf("GPU 0, %llu MiB: D2D cudaMemcpyAsync %.1f GB/s, pinned D2H %.1f GB/s, pinned H2D %.1f GB/s\n",
              static_cast<unsigned long long>(bytes >> 20), *d2d, *d2h, *h2d);
  rows->push_back(Row{"D2D cudaMemcpyAsync (GPU 0)", bytes, *d2d, "", 0, ""});
  rows->push_back(Row{"pinned D2H (host-staged hop 1)", bytes, *d2h, "", 0, ""});
  rows->push_back(Row{"pinned H2D (host-staged hop 3)", bytes, *h2d, "", 0, ""});
  cudaFreeHost(host);
  cudaStreamDestroy(s);
}

// One cudaMemcpyAsync per run vs run-copy kernel launches, runs scattered over
// the destination: where cuda_ipc's copy_engine_min_bytes belongs.
void ThresholdSweep(int reps) {
  constexpr uint64_t kBytes = 256 << 20;
  BENCH_CUDA(cudaSetDevice(0));
  cudaStream_t s;
  BENCH_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  DeviceMemory src(0, kBytes, 1), dst(0, kBytes, 2);
  auto params = std::make_unique<kernels::RunCopyParams>();
  std::printf("\nrun length | one cudaMemcpyAsync per run | run-copy kernel (<= %d runs per launch) | faster\n",
              kernels::kRunCopyMaxRuns);
  for (uint64_t run = 64 << 10; run <= (4u << 20); run *= 2) {
    const int n = static_cast<int>(kBytes / run);
    std::vector<int32_t> slot = Scattered(n, n, 7);
    double engines = BestRate(kBytes, reps, s, [&] {
      for (int i = 0; i < n; ++i) {
        BENCH_CUDA(
            cudaMemcpyAsync(dst.bytes() + slot[i] * run, src.bytes() + i * run, run, cudaMemcpyDeviceToDevice, s));
      }
    });
    double kernel = BestRate(kBytes, reps, s, [&] {
      params->count = 0;
      for (int i = 0; i < n; ++i) {
        params->src[params->count] = src.bytes() + i * run;
        params->dst[params->count] = dst.bytes() + slot[i] * run;
        params->bytes[params->count] = static_cast<int64_t>(run);
        if (++params->count == kernels::kRunCopyMaxRuns || i == n - 1) {
          TANDEM_CHECK_OK(kernels::LaunchRunCopy(*params, s));
          params->count = 0;
        }
      }
    });
    std::printf("%7llu KiB | %27.1f | %39.1f | %s\n", static_cast<unsigned long long>(run >> 10), engines, kernel,
                engines > kernel ? "copy engines" : "kernel");
  }
  cudaStreamDestroy(s);
}

// Host cost of one run-copy launch by run count (the scattered layer's 256 runs
// travel as ~7 KB of kernel parameters): where a burst of layers spends its posting.
void LaunchCost() {
  constexpr int kLaunches = 200;
  constexpr uint64_t kRun = 64 << 10;
  BENCH_CUDA(cudaSetDevice(0));
  cudaStream_t s;
  BENCH_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  DeviceMemory src(0, kRun * kernels::kRunCopyMaxRuns, 1), dst(0, kRun * kernels::kRunCopyMaxRuns, 2);
  auto params = std::make_unique<kernels::RunCopyParams>();
  std::printf("\nruns per launch | host us per launch (64 KiB runs, %d launches queued back to back)\n", kLaunches);
  for (int runs : {1, 32, 256, 1024}) {
    params->count = runs;
    for (int i = 0; i < runs; ++i) {
      params->src[i] = src.bytes() + i * kRun;
      params->dst[i] = dst.bytes() + i * kRun;
      params->bytes[i] = static_cast<int64_t>(kRun);
    }
    TANDEM_CHECK_OK(kernels::LaunchRunCopy(*params, s));
    BENCH_CUDA(cudaStreamSynchronize(s));
    auto t0 = SteadyClock::now();
    for (int l = 0; l < kLaunches; ++l) TANDEM_CHECK_OK(kernels::LaunchRunCopy(*params, s));
    const double us = Seconds(t0, SteadyClock::now()) * 1e6 / kLaunches;
    BENCH_CUDA(cudaStreamSynchronize(s));
    std::printf("%15d | %.2f\n", runs, us);
  }
  cudaStreamDestroy(s);
}

int Main(int argc, char** argv) {
  if (argc > 2 && std::string(argv[1]) == "--child") {
    const std::string mode = argv[2];
    if (mode == "kv" && argc > 4) return RunKvChild(argv[3], std::stoi(argv[4]));
#ifdef TANDEM_HAVE_UCX
    if (mode == "staged" && argc > 3) return RunStagedChild(argv[3]);
#endif
    if (mode == "raw" && argc > 5) return RunRawChild(argv[3], std::stoi(argv[4]), std::stoull(argv[5]));
    return 2;
  }
  int reps = 5;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--reps") reps = std::max(1, std::stoi(argv[i + 1]));
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("kv_transfer_gpu_bench: no CUDA GPU on this machine; nothing to measure\n");
    return 0;
  }
  std::vector<Row> rows;
  kv_cache::KvLayout layout = Llama8BLayout(kPoolBlocks);
  const uint64_t prompt_bytes = layout.BytesPerBlockLayer() * kPromptBlocks * layout.num_layers;
  std::printf("KV of a 4K-token prompt, Llama-3-8B shape: %d layers x %d blocks x %zu KiB = %llu MiB; %d reps\n",
              layout.num_layers, kPromptBlocks, layout.BytesPerBlockLayer() >> 10,
              static_cast<unsigned long long>(prompt_bytes >> 20), reps);
  double d2d = 0, d2h = 0, h2d = 0;
  Ceilings(prompt_bytes, reps, &rows, &d2d, &d2h, &h2d);
  for (const char* mode : {"contiguous", "scattered"}) {
    KvResult r = RunKvSessions(mode, reps);
    std::printf(
        "cuda_ipc KvSender -> KvReceiver, 2 processes on GPU 0, %s destination blocks: best %.1f GB/s, "
        "median %.1f GB/s (%.2f / %.2f of D2D)%s\n",
        mode, r.best, r.median, r.best / d2d, r.median / d2d, r.ok ? "" : " FAILED");
    rows.push_back(Row{std::string("cuda_ipc KV 4K prompt, ") + mode + " (median)", prompt_bytes, r.median,
                       "D2D memcpy", d2d, std::string(mode) == "contiguous" ? ">= 0.80" : ">= 0.50"});
  }
#ifdef TANDEM_HAVE_UCX
  StagedUcx(reps, d2h, h2d, &rows);
#else
  std::printf("\nno UCX in this build: skipping the host-staged UCX path\n");
#endif
  ThresholdSweep(reps);
  LaunchCost();
  if (devices >= 2) {
    TwoGpuCudaIpc(reps, &rows);
    TwoGpuNccl(reps, &rows);
  } else {
    std::printf("\none GPU: skipping GPU0 -> GPU1 (cuda_ipc vs cudaMemcpyPeer, nccl vs ncclSend/ncclRecv)\n");
  }
  PrintTable(rows);
  return 0;
}

}  // namespace
}  // namespace tandem::bench

int main(int argc, char** argv) { return tandem::bench::Main(argc, argv); }
