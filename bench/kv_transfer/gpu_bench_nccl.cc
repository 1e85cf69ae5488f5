// kv_transfer_gpu_bench, two GPUs over NCCL: the nccl transport (this process
// rank 0 on GPU 0 writes, a child process rank 1 on GPU 1 receives) against raw
// ncclSend/ncclRecv of the same bytes between GPU 0 and GPU 1 in this process
// (ncclCommInitAll): the link's ceiling through NCCL.
#include <nccl.h>

#include <cstdio>
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
using line_pipe::Unhex;

constexpr uint64_t kRegionBytes = 512 << 20;
constexpr uint64_t kPiece = 64 << 10;
const uint64_t kSizes[] = {1 << 20, 16 << 20, 64 << 20, 256 << 20, 512 << 20};

#define BENCH_NCCL(expr) TANDEM_CHECK((expr) == ncclSuccess) << #expr

// Raw ncclSend (GPU 0) / ncclRecv (GPU 1) of `size`, `batches` times: GB/s.
double RawNccl(ncclComm_t comms[2], cudaStream_t streams[2], void* src, void* dst, uint64_t size, int batches) {
  auto t0 = SteadyClock::now();
  for (int b = 0; b < batches; ++b) {
    BENCH_NCCL(ncclGroupStart());
    BENCH_NCCL(ncclSend(src, size, ncclUint8, 1, comms[0], streams[0]));
    BENCH_NCCL(ncclRecv(dst, size, ncclUint8, 0, comms[1], streams[1]));
    BENCH_NCCL(ncclGroupEnd());
  }
  for (int d = 0; d < 2; ++d) {
    BENCH_CUDA(cudaSetDevice(d));
    BENCH_CUDA(cudaStreamSynchronize(streams[d]));
  }
  return Gbps(size * batches, Seconds(t0, SteadyClock::now()));
}

// Posts `batches` write batches of `ops` and polls until every one ended.
double TransportRate(Transport& t, PeerId peer, const std::vector<WriteOp>& ops, uint64_t size, int batches,
                     PeerProcess& child, bool* ok) {
  auto t0 = SteadyClock::now();
  std::set<TransferId> open;
  for (int b = 0; b < batches; ++b) {
    auto id = t.PostWrites(peer, ops);
    TANDEM_CHECK_OK(id.status());
    open.insert(*id);
  }
  std::vector<TransferEvent> events;
  while (!open.empty()) {
    t.Poll(&events);
    for (const TransferEvent& e : events) {
      *ok = *ok && e.status.ok();
      open.erase(e.id);
    }
    events.clear();
  }
  double gbps = Gbps(size * batches, Seconds(t0, SteadyClock::now()));
  *ok = *ok && child.ReadLine(60'000) == "received 0";
  return gbps;
}

}  // namespace

void TwoGpuNccl(int reps, std::vector<Row>* rows) {
  PeerProcess child(SelfPath(), {"--child", "raw", "nccl", "1", std::to_string(kRegionBytes)});
  std::string address = Unhex(child.ReadLine(60'000)), descriptor = Unhex(child.ReadLine());
  if (address.empty()) {
    std::printf("\nnccl child on GPU 1 did not start\n");
    return;
  }
  BENCH_CUDA(cudaSetDevice(0));
  auto t = MakeTransport("nccl", TransportOptions{.ucx_transports = "", .cuda_device = 0});
  TANDEM_CHECK_OK(t.status());
  DeviceMemory src(0, kRegionBytes, 9);
  RegionId local = (*t)->RegisterMemory(src.ptr, kRegionBytes, MemoryKind::kDevice)->id;
  PeerId peer = *(*t)->Connect(address);
  RemoteRegionId remote = *(*t)->LoadRemoteRegion(peer, descriptor);
  child.Command("accept " + Hex(*(*t)->ConnectionToken(peer)));
  if (child.ReadLine() != "ok") {
    std::printf("\nnccl child refused the connection\n");
    return;
  }
  bool ok = true;
  std::vector<WriteOp> warm = {WriteOp{local, 0, remote, 0, 1 << 20}};
  child.Command("recvplan 1 1048576 0");  // the first batch also waits for init and warm-up
  TransportRate(**t, peer, warm, 1 << 20, 1, child, &ok);
  ncclComm_t comms[2];
  cudaStream_t streams[2];
  int devs[2] = {0, 1};
  BENCH_NCCL(ncclCommInitAll(comms, 2, devs));
  DeviceMemory raw_dst(1, kRegionBytes, 0);
  for (int d = 0; d < 2; ++d) {
    BENCH_CUDA(cudaSetDevice(d));
    BENCH_CUDA(cudaStreamCreateWithFlags(&streams[d], cudaStreamNonBlocking));
  }
  BENCH_CUDA(cudaSetDevice(0));
  std::printf("\nGPU 0 -> GPU 1 nccl  | size     | transport GB/s | ncclSend/ncclRecv (contiguous) GB/s | ratio\n");
  for (bool scattered : {false, true}) {
    for (uint64_t size : kSizes) {
      std::vector<WriteOp> ops;
      if (!scattered) {
        ops.push_back(WriteOp{local, 0, remote, 0, size});
      } else {
        std::vector<int32_t> slots =
            Scattered(static_cast<int>(size / kPiece), static_cast<int>(kRegionBytes / kPiece), 11);
        for (size_t i = 0; i < slots.size(); ++i) {
          ops.push_back(WriteOp{local, i * kPiece, remote, static_cast<uint64_t>(slots[i]) * kPiece, kPiece});
        }
      }
      const int batches = static_cast<int>(std::max<uint64_t>(4, (1ull << 30) / size));
      double best = 0, raw_best = 0;
      for (int rep = 0; rep <= reps; ++rep) {
        // The receiver's batches: one range, or the same 64 KiB slots (recvplan uses the same seed).
        child.Command("recvplan " + std::to_string(batches) + " " + std::to_string(size) + " " +
                      (scattered ? "1" : "0"));
        double gbps = TransportRate(**t, peer, ops, size, batches, child, &ok);
        double raw = RawNccl(comms, streams, src.ptr, raw_dst.ptr, size, batches);
        BENCH_CUDA(cudaSetDevice(0));
        if (rep > 0) {
          best = std::max(best, gbps);
          raw_best = std::max(raw_best, raw);
        }
      }
      const char* kind = scattered ? "scattered 64 KiB" : "contiguous";
      std::printf("%-20s | %4llu MiB | %14.1f | %35.1f | %.2f%s\n", kind, static_cast<unsigned long long>(size >> 20),
                  best, raw_best, best / raw_best, ok ? "" : " FAILED");
      rows->push_back(Row{"GPU0->GPU1 nccl " + std::string(kind) + " " + std::to_string(size >> 20) + " MiB",
                          size * batches, best, "ncclSend/Recv", raw_best, ""});
    }
  }
  for (int d = 0; d < 2; ++d) {
    ncclCommDestroy(comms[d]);
    cudaStreamDestroy(streams[d]);
  }
  (void)(*t)->UnloadRemoteRegion(remote);
  (void)(*t)->Disconnect(peer);
  (void)(*t)->UnregisterMemory(local);
}

}  // namespace tandem::bench
