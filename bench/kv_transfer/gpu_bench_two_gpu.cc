// kv_transfer_gpu_bench, two GPUs: GPU 0 -> GPU 1 through the transports and
// through the raw CUDA / NCCL calls they are built on, at 1..512 MiB.
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "bench/kv_transfer/gpu_bench_parts.h"
#include "common/base/line_pipe.h"
#include "kv_transfer/transport_factory.h"

namespace tandem::bench {
namespace {

using namespace kv_transfer;
using line_pipe::Hex;
using line_pipe::PeerProcess;
using line_pipe::StdinLines;
using line_pipe::Unhex;

constexpr uint64_t kRegionBytes = 512 << 20;
constexpr uint64_t kPiece = 64 << 10;  // one (layer, block) of the 8B shape
const uint64_t kSizes[] = {1 << 20, 16 << 20, 64 << 20, 256 << 20, 512 << 20};

// (offset, length) pieces of one batch of `size` bytes: one range, or 64 KiB
// pieces at scattered 64 KiB slots of the region.
std::vector<std::pair<uint64_t, uint64_t>> Pieces(uint64_t size, bool scattered) {
  if (!scattered) return {{0, size}};
  std::vector<int32_t> slots = Scattered(static_cast<int>(size / kPiece), static_cast<int>(kRegionBytes / kPiece), 11);
  std::vector<std::pair<uint64_t, uint64_t>> out;
  for (int32_t s : slots) out.emplace_back(static_cast<uint64_t>(s) * kPiece, kPiece);
  return out;
}

// Batches per measurement: at least 1 GiB in all, at least 4.
int BatchesFor(uint64_t size) { return static_cast<int>(std::max<uint64_t>(4, (1ull << 30) / size)); }

}  // namespace

int RunRawChild(const std::string& backend, int device, uint64_t bytes) {
  BENCH_CUDA(cudaSetDevice(device));
  auto t = MakeTransport(backend, TransportOptions{.ucx_transports = "", .cuda_device = device});
  if (!t.ok()) {
    std::printf("error %s\n", t.status().ToString().c_str());
    return 2;
  }
  DeviceMemory region(device, bytes);
  auto reg = (*t)->RegisterMemory(region.ptr, bytes, MemoryKind::kDevice);
  TANDEM_CHECK_OK(reg.status());
  std::printf("%s\n%s\n", Hex((*t)->WorkerAddress()).c_str(), Hex(reg->descriptor).c_str());
  std::fflush(stdout);
  PeerId peer = kInvalidHandle;
  std::set<TransferId> open;
  int failures = 0;
  bool report = false;
  StdinLines lines;
  std::string line;
  bool eof = false;
  std::vector<TransferEvent> events;
  while (!eof) {
    (*t)->Poll(&events);
    for (const TransferEvent& e : events) {
      failures += open.erase(e.id) == 1 && !e.status.ok();
    }
    events.clear();
    if (report && open.empty()) {
      std::printf("received %d\n", failures);
      std::fflush(stdout);
      report = false;
      failures = 0;
    }
    if (!lines.Next(&line, &eof)) continue;
    if (line == "exit") break;
    if (line.rfind("accept ", 0) == 0) {
      auto accepted = (*t)->Accept(Unhex(line.substr(7)));
      if (accepted.ok()) peer = *accepted;
      std::printf("%s\n", accepted.ok() ? "ok" : accepted.status().ToString().c_str());
      std::fflush(stdout);
    } else if (line.rfind("recvplan ", 0) == 0) {  // recvplan <batches> <size> <0|1 scattered>
      int batches = 0, scattered = 0;
      unsigned long long size = 0;
      std::sscanf(line.c_str(), "recvplan %d %llu %d", &batches, &size, &scattered);
      std::vector<WriteOp> ops;
      for (auto [offset, length] : Pieces(size, scattered != 0)) {
        ops.push_back(WriteOp{reg->id, offset, kInvalidHandle, 0, length});
      }
      for (int b = 0; b < batches; ++b) {
        auto id = (*t)->PostReceives(peer, ops);
        TANDEM_CHECK_OK(id.status());
        open.insert(*id);
      }
      report = true;
    }
  }
  (void)(*t)->UnregisterMemory(reg->id);
  return 0;
}

void TwoGpuCudaIpc(int reps, std::vector<Row>* rows) {
  PeerProcess child(SelfPath(), {"--child", "raw", "cuda_ipc", "1", std::to_string(kRegionBytes)});
  std::string address = Unhex(child.ReadLine(60'000)), descriptor = Unhex(child.ReadLine());
  if (address.empty()) {
    std::printf("cuda_ipc child on GPU 1 did not start\n");
    return;
  }
  BENCH_CUDA(cudaSetDevice(0));
  auto t = MakeTransport("cuda_ipc", TransportOptions{.ucx_transports = "", .cuda_device = 0});
  TANDEM_CHECK_OK(t.status());
  DeviceMemory src(0, kRegionBytes, 5), peer_dst(1, kRegionBytes, 0);
  BENCH_CUDA(cudaSetDevice(0));
  RegionId local = (*t)->RegisterMemory(src.ptr, kRegionBytes, MemoryKind::kDevice)->id;
  auto peer = (*t)->Connect(address);
  if (!peer.ok()) {
    std::printf("cuda_ipc GPU 0 -> GPU 1: %s\n", peer.status().ToString().c_str());
    return;
  }
  RemoteRegionId remote = *(*t)->LoadRemoteRegion(*peer, descriptor);
  cudaStream_t s;
  BENCH_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  std::printf("\nGPU 0 -> GPU 1      | size     | cuda_ipc GB/s | cudaMemcpyPeer (contiguous) GB/s | ratio\n");
  for (bool scattered : {false, true}) {
    for (uint64_t size : kSizes) {
      std::vector<WriteOp> ops;
      uint64_t src_offset = 0;
      for (auto [offset, length] : Pieces(size, scattered)) {
        ops.push_back(WriteOp{local, src_offset, remote, offset, length});
        src_offset += length;
      }
      const int batches = BatchesFor(size);
      double best = 0, peer_best = 0;
      for (int rep = 0; rep <= reps; ++rep) {
        std::set<TransferId> open;
        std::vector<TransferEvent> events;
        auto t0 = SteadyClock::now();
        for (int b = 0; b < batches; ++b) open.insert(*(*t)->PostWrites(*peer, ops));
        while (!open.empty()) {
          (*t)->Poll(&events);
          for (const TransferEvent& e : events) {
            TANDEM_CHECK(e.status.ok()) << e.status.ToString();
            open.erase(e.id);
          }
          events.clear();
        }
        double gbps = Gbps(size * batches, Seconds(t0, SteadyClock::now()));
        t0 = SteadyClock::now();
        for (int b = 0; b < batches; ++b) {  // the link's ceiling: one contiguous copy per batch
          BENCH_CUDA(cudaMemcpyPeerAsync(peer_dst.ptr, 1, src.ptr, 0, size, s));
        }
        BENCH_CUDA(cudaStreamSynchronize(s));
        double peer_gbps = Gbps(size * batches, Seconds(t0, SteadyClock::now()));
        if (rep > 0) {
          best = std::max(best, gbps);
          peer_best = std::max(peer_best, peer_gbps);
        }
      }
      const char* kind = scattered ? "scattered 64 KiB" : "contiguous";
      std::printf("%-19s | %4llu MiB | %13.1f | %32.1f | %.2f\n", kind, static_cast<unsigned long long>(size >> 20),
                  best, peer_best, best / peer_best);
      rows->push_back(Row{"GPU0->GPU1 cuda_ipc " + std::string(kind) + " " + std::to_string(size >> 20) + " MiB",
                          size * batches, best, "cudaMemcpyPeer", peer_best, ""});
    }
  }
  cudaStreamDestroy(s);
  (void)(*t)->UnloadRemoteRegion(remote);
  (void)(*t)->Disconnect(*peer);
  (void)(*t)->UnregisterMemory(local);
}

#ifndef TANDEM_HAVE_NCCL
void TwoGpuNccl(int, std::vector<Row>*) {
  std::printf("\nnccl: this build has no NCCL transport; skipping GPU 0 -> GPU 1 over nccl\n");
}
#endif

}  // namespace tandem::bench
