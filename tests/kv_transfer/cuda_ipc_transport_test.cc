// cuda_ipc backend on a GPU: the conformance suite with the target in a helper
// process (IPC handles do not open in the exporting process), KV sessions both
// ways between two processes, what the backend refuses, kill -9 of either
// process mid-transfer and cancel mid-transfer. Skips without a GPU. The helper
// runs on GPU 0 beside this process, or on TANDEM_TEST_PEER_GPU (GPU 0 -> 1
// over NVLink with two; gpu_transport_testing.h).
#include "kv_transfer/cuda_ipc/cuda_ipc_transport.h"

#include <gtest/gtest.h>

#include "kv_transfer/cuda_ipc/cuda_ipc_wire.h"
#include "tests/kv_transfer/gpu_session_checks.h"

namespace tandem::kv_transfer {
namespace {

// The helper's GPU, and the GPUs a two-process test needs for it.
int Peer() { return testing::PeerGpu(0); }
int GpusNeeded() { return Peer() + 1; }

std::unique_ptr<CudaIpcTransport> MakeIpc() {
  auto t = CudaIpcTransport::Create(CudaIpcConfig{});
  TANDEM_CHECK(t.ok()) << t.status().ToString();
  return std::move(*t);
}

TEST(CudaIpcTransportTest, ConformsAcrossProcesses) {
  TANDEM_SKIP_WITHOUT_GPUS(GpusNeeded());
  auto t = MakeIpc();
  EXPECT_EQ(t->Capabilities().backend, "cuda_ipc");
  EXPECT_TRUE(t->Capabilities().device_memory);
  EXPECT_TRUE(t->Capabilities().one_sided);
  testing::DeviceSource source(1 << 20);
  {
    testing::PeerTarget target("cuda_ipc", Peer(), 3 << 19, 0x5a);
    testing::CheckBatchesLandByteExact(*t, source, target);
  }
  {
    testing::PeerTarget target("cuda_ipc", Peer(), 1 << 20, 0);
    testing::CheckCancelAndDisconnectEndEveryBatch(*t, source, target);
  }
  testing::PeerTarget target("cuda_ipc", Peer(), 64, 0);
  testing::CheckMalformedInputRefused(*t, target);
  EXPECT_TRUE(t->Health().ok());
}

TEST(CudaIpcTransportTest, RefusesWhatItCannotServe) {
  TANDEM_SKIP_WITHOUT_GPUS(1);
  auto t = MakeIpc();
  testing::DeviceSource dev(4096);
  uint8_t host[64];
  EXPECT_EQ(t->RegisterMemory(host, sizeof(host), MemoryKind::kDevice).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(t->RegisterMemory(dev.data(), 64, MemoryKind::kHost).status().code(), StatusCode::kInvalidArgument);
  auto* inside = static_cast<std::byte*>(dev.data()) + 4000;
  EXPECT_EQ(t->RegisterMemory(inside, 200, MemoryKind::kDevice).status().code(), StatusCode::kInvalidArgument)
      << "a region leaving its allocation";
  EXPECT_TRUE(t->RegisterMemory(inside, 96, MemoryKind::kDevice).ok()) << "a region inside an allocation";
  EXPECT_EQ(t->Connect(t->WorkerAddress()).status().code(), StatusCode::kFailedPrecondition) << "itself";
  CudaIpcAddress other = *DecodeCudaIpcAddress(t->WorkerAddress());
  other.nonce += 1;
  other.process.pid += 1;
  CudaIpcAddress elsewhere = other;
  elsewhere.process.boot_id = "00000000-0000-0000-0000-000000000000";
  auto refused = t->Connect(EncodeCudaIpcAddress(elsewhere));
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("another host"), std::string::npos) << refused.status().ToString();
  CudaIpcAddress unseen = other;
  unseen.device_uuid = std::string(kDeviceUuidBytes, '\x7f');
  refused = t->Connect(EncodeCudaIpcAddress(unseen));
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("not visible"), std::string::npos) << refused.status().ToString();
  EXPECT_EQ(t->PostReceives(1, {}).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(t->Accept("x").status().code(), StatusCode::kFailedPrecondition);
}

TEST(CudaIpcTransportTest, SessionStreamsLayersIntoAnotherProcess) {
  TANDEM_SKIP_WITHOUT_GPUS(GpusNeeded());
  testing::CheckSessionIntoPeer(*MakeIpc(), "cuda_ipc", Peer());
}

TEST(CudaIpcTransportTest, SessionLandsFromAnotherProcess) {
  TANDEM_SKIP_WITHOUT_GPUS(GpusNeeded());
  testing::CheckSessionFromPeer(*MakeIpc(), "cuda_ipc", Peer(), 0, -1);
}

// The target's pidfd ends this writer's batches with Unavailable.
TEST(CudaIpcTransportTest, KilledTargetEndsBatchesWithAnError) {
  TANDEM_SKIP_WITHOUT_GPUS(GpusNeeded());
  testing::CheckKilledTargetEndsBatches(*MakeIpc(), "cuda_ipc", Peer());
}

// One-sided IPC leaves the receiver nothing in flight: its lease ends the session.
TEST(CudaIpcTransportTest, KilledWriterEndsTheSessionWithinFiveSeconds) {
  TANDEM_SKIP_WITHOUT_GPUS(GpusNeeded());
  testing::CheckSessionFromPeer(*MakeIpc(), "cuda_ipc", Peer(), 400, 1);
}

TEST(CudaIpcTransportTest, CancelMidTransferEndsBothSides) {
  TANDEM_SKIP_WITHOUT_GPUS(GpusNeeded());
  testing::CheckCancelMidTransfer(*MakeIpc(), "cuda_ipc", Peer());
}

}  // namespace
}  // namespace tandem::kv_transfer
