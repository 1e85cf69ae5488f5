// UCX put bandwidth on loopback: a second process holds the target memory (it
// only progresses its worker, as decode's transport thread would), this process
// posts batches of one put + flush each, up to `window` batches in flight, at
// message sizes 64 KiB .. 16 MiB. Prints GB/s and the ratio to single-thread
// memcpy of the same size measured in the same run (the copy a loopback put
// cannot beat). Usage: kv_transfer_ucx_put_bench [tls ...] (default: tcp shm).
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "kv_transfer/ucx/ucx_transport.h"

using namespace tandem::kv_transfer;
using Clock = std::chrono::steady_clock;

namespace {

constexpr size_t kMaxBytes = 16 << 20;
constexpr int kWindow = 4;

bool WriteBlob(int fd, const std::string& s) {
  uint32_t n = static_cast<uint32_t>(s.size());
  return write(fd, &n, 4) == 4 && write(fd, s.data(), n) == static_cast<ssize_t>(n);
}
bool ReadAll(int fd, void* p, size_t n) {
  auto* c = static_cast<char*>(p);
  while (n > 0) {
    ssize_t r = read(fd, c, n);
    if (r <= 0) return false;
    c += r;
    n -= r;
  }
  return true;
}
std::string ReadBlob(int fd) {
  uint32_t n = 0;
  if (!ReadAll(fd, &n, 4) || n > (1 << 20)) return "";
  std::string s(n, '\0');
  return ReadAll(fd, s.data(), n) ? s : "";
}

UcxConfig ConfigFor(const std::string& tls) {
  return UcxConfig{.transports = tls, .peer_error_handling = tls == "tcp"};
}

// The target process: registers memory, publishes it, progresses until told to stop.
int RunTarget(const std::string& tls, int to_parent, int from_parent) {
  auto t = UcxTransport::Create(ConfigFor(tls));
  if (!t.ok()) return 2;
  std::vector<uint8_t> mem(kMaxBytes * kWindow, 0);
  auto reg = (*t)->RegisterMemory(mem.data(), mem.size(), MemoryKind::kHost);
  if (!reg.ok() || !WriteBlob(to_parent, (*t)->WorkerAddress()) || !WriteBlob(to_parent, reg->descriptor)) return 3;
  std::vector<TransferEvent> events;
  for (;;) {
    for (int i = 0; i < 64; ++i) (*t)->Poll(&events);
    pollfd pfd{from_parent, POLLIN, 0};
    if (::poll(&pfd, 1, 0) > 0) break;
  }
  (void)(*t)->UnregisterMemory(reg->id);
  return 0;
}

double MemcpyGbps(size_t size) {
  std::vector<uint8_t> a(size, 1), b(size, 2);
  size_t reps = std::max<size_t>(4, (512u << 20) / size);
  auto t0 = Clock::now();
  for (size_t i = 0; i < reps; ++i) {
    a[i % size] = static_cast<uint8_t>(i);
    std::memcpy(b.data(), a.data(), size);
  }
  double s = std::chrono::duration<double>(Clock::now() - t0).count();
  volatile uint8_t sink = b[reps % size];
  (void)sink;
  return static_cast<double>(size) * reps / s / 1e9;
}

void RunInitiator(const std::string& tls, int from_target) {
  std::string address = ReadBlob(from_target), descriptor = ReadBlob(from_target);
  auto t = UcxTransport::Create(ConfigFor(tls));
  if (address.empty() || !t.ok()) {
    std::printf("%-5s | target did not start\n", tls.c_str());
    return;
  }
  std::vector<uint8_t> src(kMaxBytes * kWindow);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 2654435761u >> 13);
  RegionId local = (*t)->RegisterMemory(src.data(), src.size(), MemoryKind::kHost)->id;
  PeerId peer = *(*t)->Connect(address);
  RemoteRegionId remote = *(*t)->LoadRemoteRegion(peer, descriptor);
  for (size_t size = 64 << 10; size <= kMaxBytes; size *= 4) {
    size_t target_bytes = std::max<size_t>(size * 16, 256u << 20);
    size_t posted = 0, done = 0, batches = 0;
    int in_flight = 0;
    std::vector<TransferEvent> events;
    bool failed = false;
    auto t0 = Clock::now();
    while (done < target_bytes && !failed) {
      while (in_flight < kWindow && posted < target_bytes) {
        uint64_t slot = (batches++ % kWindow) * kMaxBytes;
        WriteOp op{local, slot, remote, slot, size};
        if (!(*t)->PostWrites(peer, std::span<const WriteOp>(&op, 1)).ok()) failed = true;
        posted += size;
        ++in_flight;
      }
      events.clear();
      (*t)->Poll(&events);
      for (const TransferEvent& e : events) {
        failed = failed || !e.status.ok();
        done += e.bytes;
        --in_flight;
      }
    }
    double s = std::chrono::duration<double>(Clock::now() - t0).count();
    double gbps = static_cast<double>(done) / s / 1e9, ceiling = MemcpyGbps(size);
    std::printf("%-5s | %8zu KiB | %7.2f GB/s | memcpy %6.2f GB/s | ratio %.2f%s\n", tls.c_str(), size >> 10, gbps,
                ceiling, gbps / ceiling, failed ? " | FAILED" : "");
  }
  (void)(*t)->UnloadRemoteRegion(remote);
  (void)(*t)->Disconnect(peer);
  (void)(*t)->UnregisterMemory(local);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> tls_list;
  for (int i = 1; i < argc; ++i) tls_list.push_back(argv[i]);
  if (tls_list.empty()) tls_list = {"tcp", "shm"};
  std::printf("UCX put bandwidth, loopback, 2 processes, %d batches in flight, 1 put + flush per batch\n", kWindow);
  std::printf("tls   | message      | put          | ceiling            | put/memcpy\n");
  for (const std::string& tls : tls_list) {
    int up[2], down[2];
    if (pipe(up) != 0 || pipe(down) != 0) return 1;
    std::fflush(stdout);
    pid_t pid = fork();  // before this process touches UCX
    if (pid == 0) {
      close(up[0]);
      close(down[1]);
      _exit(RunTarget(tls, up[1], down[0]));
    }
    close(up[1]);
    close(down[0]);
    RunInitiator(tls, up[0]);
    (void)!write(down[1], "x", 1);
    waitpid(pid, nullptr, 0);
    close(up[0]);
    close(down[1]);
  }
  return 0;
}
