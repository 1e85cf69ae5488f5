// nccl backend: what it refuses (on one GPU), and with two GPUs the conformance
// suite, KV sessions both ways, kill -9 of either process mid-transfer and
// cancel mid-transfer, this process on GPU 0 and the helper process on GPU 1
// (or TANDEM_TEST_PEER_GPU; gpu_transport_testing.h).
// NCCL refuses two ranks on one GPU, so the two-process tests skip below 2 GPUs.
#include "kv_transfer/nccl/nccl_transport.h"

#include <gtest/gtest.h>

#include "kv_transfer/nccl/nccl_wire.h"
#include "tests/kv_transfer/gpu_session_checks.h"

namespace tandem::kv_transfer {
namespace {

// The helper's GPU (0 would fail the two-process tests: NCCL refuses two ranks on one GPU).
int Peer() { return testing::PeerGpu(1); }

std::unique_ptr<NcclTransport> MakeNccl(int device = 0) {
  NcclConfig config;
  config.device = device;
  auto t = NcclTransport::Create(config);
  TANDEM_CHECK(t.ok()) << t.status().ToString();
  return std::move(*t);
}

TEST(NcclTransportTest, RefusesWhatItCannotServe) {
  TANDEM_SKIP_WITHOUT_GPUS(1);
  auto t = MakeNccl();
  EXPECT_EQ(t->Capabilities().backend, "nccl");
  EXPECT_TRUE(t->Capabilities().device_memory);
  EXPECT_FALSE(t->Capabilities().one_sided);
  testing::DeviceSource dev(4096);
  uint8_t host[64];
  EXPECT_EQ(t->RegisterMemory(host, sizeof(host), MemoryKind::kDevice).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(t->RegisterMemory(dev.data(), 64, MemoryKind::kHost).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(t->Connect(t->WorkerAddress()).status().code(), StatusCode::kFailedPrecondition) << "itself";
  NcclAddress same_gpu = *DecodeNcclAddress(t->WorkerAddress());
  same_gpu.nonce += 1;
  same_gpu.process.pid += 1;
  auto refused = t->Connect(EncodeNcclAddress(same_gpu));
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("two ranks on one GPU"), std::string::npos) << refused.status().ToString();
  NcclToken token{.writer_nonce = 77,
                  .target_nonce = same_gpu.nonce - 1,
                  .writer = same_gpu.process,
                  .writer_device_uuid = same_gpu.device_uuid,
                  .unique_id = std::string(kNcclUniqueIdBytes, 'x'),
                  .chunk_bytes = NcclConfig{}.chunk_bytes};
  EXPECT_EQ(t->Accept(EncodeNcclToken(token)).status().code(), StatusCode::kFailedPrecondition) << "same GPU";
  token.chunk_bytes = 1 << 20;
  EXPECT_EQ(t->Accept(EncodeNcclToken(token)).status().code(), StatusCode::kFailedPrecondition) << "chunk size";
  token.target_nonce += 5;
  EXPECT_EQ(t->Accept(EncodeNcclToken(token)).status().code(), StatusCode::kInvalidArgument) << "another target";
  EXPECT_EQ(t->PostReceives(12345, {}).status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(t->Health().ok());
}

TEST(NcclTransportTest, ConformsAcrossProcesses) {
  TANDEM_SKIP_WITHOUT_GPUS(Peer() + 1);
  auto t = MakeNccl();
  testing::DeviceSource source(1 << 20);
  {
    testing::PeerTarget target("nccl", Peer(), 3 << 19, 0x5a);
    testing::CheckBatchesLandByteExact(*t, source, target);
  }
  {
    testing::PeerTarget target("nccl", Peer(), 1 << 20, 0);
    testing::CheckCancelAndDisconnectEndEveryBatch(*t, source, target);
  }
  testing::PeerTarget target("nccl", Peer(), 64, 0);
  testing::CheckMalformedInputRefused(*t, target);
  EXPECT_TRUE(t->Health().ok()) << t->Health().ToString();
}

TEST(NcclTransportTest, SessionStreamsLayersIntoAnotherProcess) {
  TANDEM_SKIP_WITHOUT_GPUS(Peer() + 1);
  testing::CheckSessionIntoPeer(*MakeNccl(), "nccl", Peer());
}

TEST(NcclTransportTest, SessionLandsFromAnotherProcess) {
  TANDEM_SKIP_WITHOUT_GPUS(Peer() + 1);
  testing::CheckSessionFromPeer(*MakeNccl(), "nccl", Peer(), 0, -1);
}

// Sends whose receives never come are in flight when the target dies: the
// connection is aborted (pidfd) and they end with Unavailable.
TEST(NcclTransportTest, KilledTargetEndsBatchesWithAnError) {
  TANDEM_SKIP_WITHOUT_GPUS(Peer() + 1);
  testing::CheckKilledTargetEndsBatches(*MakeNccl(), "nccl", Peer());
}

TEST(NcclTransportTest, KilledWriterEndsTheSessionWithinFiveSeconds) {
  TANDEM_SKIP_WITHOUT_GPUS(Peer() + 1);
  testing::CheckSessionFromPeer(*MakeNccl(), "nccl", Peer(), 400, 1);
}

TEST(NcclTransportTest, CancelMidTransferEndsBothSides) {
  TANDEM_SKIP_WITHOUT_GPUS(Peer() + 1);
  testing::CheckCancelMidTransfer(*MakeNccl(), "nccl", Peer());
}

}  // namespace
}  // namespace tandem::kv_transfer
