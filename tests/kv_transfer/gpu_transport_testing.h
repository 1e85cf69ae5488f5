// What the GPU transport tests (cuda_ipc, nccl) share: device memory as a
// conformance source, the helper process (gpu_peer_main.cc) as a conformance
// target, and a relay of control messages to a session in the helper.
//
// The test process works on GPU 0; the helper on PeerGpu(): the test's own
// default (cuda_ipc 0, nccl 1) unless TANDEM_TEST_PEER_GPU names another
// (tools/gpu/two_gpu_check.sh sets 1 to run the cuda_ipc tests across two
// GPUs). The helper binary is the one the build names, or the
// kv_transfer_gpu_peer next to this test binary when that path is gone (the
// binaries were built elsewhere and carried: tools/gpu/pack_prebuilt.sh).
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "common/base/line_pipe.h"
#include "common/cuda/cuda_status.h"
#include "tests/kv_transfer/transport_conformance.h"

namespace tandem::kv_transfer::testing {

using line_pipe::Hex;
using line_pipe::PeerProcess;
using line_pipe::Unhex;

#define TANDEM_SKIP_WITHOUT_GPUS(n)                                                                \
  do {                                                                                             \
    const int _have = ::tandem::cuda::DeviceCount();                                               \
    if (_have < (n))                                                                               \
      GTEST_SKIP() << "SKIPPED: needs " << (n) << " CUDA GPU(s), this machine has " << _have       \
                   << ((n) > 1 ? " (NCCL refuses two ranks on one GPU)" : " (gpu-labelled test)"); \
  } while (0)

// The helper process's GPU: TANDEM_TEST_PEER_GPU when set, else `fallback`.
inline int PeerGpu(int fallback) {
  const char* env = std::getenv("TANDEM_TEST_PEER_GPU");
  return env != nullptr && *env != '\0' ? std::atoi(env) : fallback;
}

// The helper binary: the build's path, or kv_transfer_gpu_peer beside this binary.
inline std::string PeerPath() {
  namespace fs = std::filesystem;
  std::error_code error;
  if (fs::exists(TANDEM_GPU_PEER_PATH, error)) return TANDEM_GPU_PEER_PATH;
  return (fs::read_symlink("/proc/self/exe", error).parent_path() / "kv_transfer_gpu_peer").string();
}

// Device memory on the current device.
class DeviceSource final : public ConformanceSource {
 public:
  explicit DeviceSource(size_t size, int fill = 0) : size_(size) {
    TANDEM_CHECK(cudaMalloc(&data_, size) == cudaSuccess);
    TANDEM_CHECK(cudaMemset(data_, fill, size) == cudaSuccess);
  }
  ~DeviceSource() override { cudaFree(data_); }
  void* data() override { return data_; }
  size_t size() const override { return size_; }
  MemoryKind kind() const override { return MemoryKind::kDevice; }
  void Write(const std::vector<uint8_t>& bytes) override {
    TANDEM_CHECK(bytes.size() == size_);
    TANDEM_CHECK(cudaMemcpy(data_, bytes.data(), size_, cudaMemcpyHostToDevice) == cudaSuccess);
  }
  std::vector<uint8_t> Read() const {
    std::vector<uint8_t> host(size_);
    TANDEM_CHECK(cudaMemcpy(host.data(), data_, size_, cudaMemcpyDeviceToHost) == cudaSuccess);
    return host;
  }

 private:
  void* data_ = nullptr;
  size_t size_;
};

// The helper process in "raw" mode: a transport with a device region.
class PeerTarget final : public ConformanceTarget {
 public:
  PeerTarget(const std::string& backend, int device, size_t size, int fill)
      : process_(PeerPath(), {"raw", backend, std::to_string(device), std::to_string(size), std::to_string(fill)}),
        size_(size),
        two_sided_(backend == "nccl") {
    address_ = Unhex(process_.ReadLine());
    descriptor_ = Unhex(process_.ReadLine());
    TANDEM_CHECK(!address_.empty() && !descriptor_.empty()) << "the GPU peer process did not start";
  }
  std::string Address() override { return address_; }
  std::string Descriptor() override { return descriptor_; }
  size_t size() const override { return size_; }
  bool two_sided() const override { return two_sided_; }
  std::vector<uint8_t> Contents() override {
    const std::string path = ::testing::TempDir() + "gpu_peer_dump_" + std::to_string(getpid());
    process_.Command("dump " + path);
    EXPECT_EQ(process_.ReadLine(), "ok");
    std::ifstream in(path, std::ios::binary);
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::remove(path.c_str());
    return bytes;
  }
  void Progress(std::map<uint64_t, Status>* receive_events) override {
    if (!two_sided_) return;
    process_.Command("events");
    for (std::string line = process_.ReadLine(); line != "end" && !line.empty(); line = process_.ReadLine()) {
      std::istringstream in(line);
      std::string word, message;
      uint64_t id = 0;
      int code = 0;
      in >> word >> id >> code;
      std::getline(in, message);
      (*receive_events)[id] = code == 0 ? Status::Ok() : Status(static_cast<StatusCode>(code), message);
    }
  }
  Status Accept(const std::string& token) override {
    process_.Command("accept " + Hex(token));
    std::string reply = process_.ReadLine();
    return reply == "ok" ? Status::Ok() : InternalError("peer accept: " + reply);
  }
  StatusOr<uint64_t> PostReceives(const std::vector<std::pair<uint64_t, uint64_t>>& ranges) override {
    std::string cmd = "recv " + std::to_string(ranges.size());
    for (auto [offset, length] : ranges) cmd += " " + std::to_string(offset) + " " + std::to_string(length);
    process_.Command(cmd);
    std::string reply = process_.ReadLine();
    if (reply.rfind("posted ", 0) != 0) return InternalError("peer recv: " + reply);
    return std::stoull(reply.substr(7));
  }
  PeerProcess& process() { return process_; }

 private:
  PeerProcess process_;
  size_t size_;
  bool two_sided_;
  std::string address_, descriptor_;
};

// A KvSender/KvReceiver session in the helper process: control messages of this
// side go out as "msg <hex>"; Pump delivers the helper's to `deliver`.
class SessionPeer {
 public:
  SessionPeer(const std::string& mode, const std::string& backend, int device, const std::string& arg)
      : process_(PeerPath(), {mode, backend, std::to_string(device), arg}) {}
  void Send(const std::string& message) { process_.Command("msg " + Hex(message)); }
  // Reads the helper's lines for up to timeout_ms: messages go to `deliver`,
  // anything else is returned.
  template <typename Deliver>
  std::optional<std::string> Pump(int timeout_ms, Deliver deliver) {
    for (;;) {
      std::optional<std::string> line = process_.TryReadLine(timeout_ms);
      if (!line) return std::nullopt;
      if (line->rfind("msg ", 0) == 0) {
        deliver(Unhex(line->substr(4)));
        continue;
      }
      return line;
    }
  }
  PeerProcess& process() { return process_; }

 private:
  PeerProcess process_;
};

}  // namespace tandem::kv_transfer::testing
