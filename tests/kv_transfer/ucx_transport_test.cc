// UCX backend: two workers in one process (tcp and shared memory), sessions
// streamed over UCX, and a second process as the peer (writes land; peer killed).
#include "kv_transfer/ucx/ucx_transport.h"

#include <gtest/gtest.h>

#include <chrono>
#include <set>

#include "common/base/line_pipe.h"
#include "tests/kv_transfer/peer_plan.h"
#include "tests/kv_transfer/session_harness.h"
#include "tests/kv_transfer/transport_conformance.h"

namespace tandem::kv_transfer {
namespace {

// UCX 1.13's shared-memory transports have no peer-failure support, so shm runs
// without UCP_ERR_HANDLING_MODE_PEER (the session lease covers dead peers there).
std::unique_ptr<UcxTransport> MakeUcx(const std::string& tls) {
  auto t = UcxTransport::Create(UcxConfig{.transports = tls, .peer_error_handling = tls != "shm"});
  TANDEM_CHECK(t.ok()) << t.status().ToString();
  return std::move(*t);
}

class UcxTransportTest : public ::testing::TestWithParam<std::string> {};

TEST_P(UcxTransportTest, Conforms) {
  auto a = MakeUcx(GetParam()), b = MakeUcx(GetParam());
  EXPECT_EQ(a->Capabilities().backend, "ucx");
  EXPECT_TRUE(a->Capabilities().one_sided);
  testing::CheckHostTransportConforms(*a, *b);
}

TEST_P(UcxTransportTest, SessionsStreamLayersByteExact) {
  auto a = MakeUcx(GetParam()), b = MakeUcx(GetParam());
  SystemClock clock;
  {
    testing::SessionHarness h(*a, *b, clock, 64, 96);
    std::vector<BlockId> src = {1, 2, 3, 40, 41, 7}, dst = {90, 91, 92, 10, 11, 50};
    std::vector<BlockId> src2 = {5}, dst2 = {0};
    ASSERT_TRUE(h.Open(1, 1, src, dst, 10'000).ok());
    ASSERT_TRUE(h.Open(2, 1, src2, dst2, 10'000).ok());
    for (int layer = 0; layer < 3; ++layer) {
      ASSERT_TRUE(h.SendLayer(1, layer).ok());
      ASSERT_TRUE(h.SendLayer(2, layer).ok());
    }
    for (int i = 0; i < 100000 && (!h.recv_outcomes[1].done || !h.recv_outcomes[2].done); ++i) h.Pump(1);
    ASSERT_TRUE(h.recv_outcomes[1].done && h.recv_outcomes[2].done);
    EXPECT_TRUE(h.recv_outcomes[1].status.ok()) << h.recv_outcomes[1].status.ToString();
    EXPECT_TRUE(h.recv_outcomes[2].status.ok());
    EXPECT_TRUE(h.Landed(src, dst));
    EXPECT_TRUE(h.Landed(src2, dst2));
    std::vector<BlockId> all = dst;
    all.push_back(0);
    EXPECT_TRUE(h.UntouchedExcept(all));
    EXPECT_EQ(h.sender().stats().writes_posted, 3u * 4);  // runs: [1..3], [40,41], [7], [5]
    EXPECT_EQ(h.sender().num_sessions() + h.receiver().num_sessions(), 0u);
  }
}

TEST_P(UcxTransportTest, DeviceMemoryIsRefused) {
  auto a = MakeUcx(GetParam());
  uint8_t buf[64];
  EXPECT_EQ(a->RegisterMemory(buf, 8, MemoryKind::kDevice).status().code(), StatusCode::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(Loopback, UcxTransportTest, ::testing::Values("tcp", "shm"));

// --- two processes ------------------------------------------------------------

uint8_t PatternByte(uint32_t seed, size_t i) { return static_cast<uint8_t>((i * 131 + seed * 7 + (i >> 9)) & 0xff); }

// The helper process (ucx_peer_main.cc). mode "raw": a bare transport whose
// address and region descriptor it prints first; "session": a KvReceiver.
class Peer : public line_pipe::PeerProcess {
 public:
  Peer(const char* tls, const char* mode = "raw") : PeerProcess(TANDEM_UCX_PEER_PATH, {tls, mode}) {
    if (std::string(mode) == "raw") {
      address = line_pipe::Unhex(ReadLine());
      descriptor = line_pipe::Unhex(ReadLine());
    }
  }
  std::string address, descriptor;
};

TEST(UcxTwoProcessTest, SessionStreamsLayersIntoAnotherProcess) {
  using testing::kPeerDstBlocks;
  using testing::kPeerSrcBlocks;
  Peer decode("tcp", "session");
  std::string target = line_pipe::Unhex(decode.ReadLine());
  ASSERT_FALSE(target.empty());
  auto t = MakeUcx("tcp");
  kv_cache::KvLayout layout = testing::PeerLayout(testing::kPeerSendBlocks);
  std::vector<uint8_t> pool(layout.TotalBytes());
  for (size_t i = 0; i < pool.size(); ++i) pool[i] = testing::PeerPattern(i);
  RegionId src = t->RegisterMemory(pool.data(), pool.size(), MemoryKind::kHost)->id;
  SystemClock clock;
  Status sent = InternalError("not done");
  {
    KvSender sender(KvSenderConfig{.model_id = "peer-model", .layout = layout}, *t, clock,
                    [&](RequestId id, std::string m) {
                      EXPECT_EQ(id, 42u);
                      decode.Command("msg " + line_pipe::Hex(m));
                    });
    SendParams p;
    p.target = target;
    p.source_blocks = kPeerSrcBlocks;
    p.on_done = [&](const Status& s) { sent = s; };
    ASSERT_TRUE(sender.Open(std::move(p)).ok());
    for (int layer = 0; layer < layout.num_layers; ++layer) {
      ASSERT_TRUE(sender.SendLayer(42, layer, LayerSource{src, layout.BlockOffset(layer, 0)}).ok());
      for (int i = 0; i < 50; ++i) sender.Poll();  // layer-wise: stream while "computing"
    }
    auto start = std::chrono::steady_clock::now();
    while (sender.num_sessions() > 0 && std::chrono::steady_clock::now() - start < std::chrono::seconds(30)) {
      sender.Poll();
    }
    ASSERT_EQ(sender.num_sessions(), 0u);
  }
  EXPECT_TRUE(sent.ok()) << sent.ToString();
  EXPECT_EQ(decode.ReadLine(), "done OK");
  EXPECT_EQ(decode.ReadLine(), "landed ok");
  ASSERT_TRUE(t->UnregisterMemory(src).ok());
}

TEST(UcxTwoProcessTest, WritesLandInAnotherProcess) {
  Peer peer("tcp");
  ASSERT_FALSE(peer.address.empty());
  auto t = MakeUcx("tcp");
  std::vector<uint8_t> src(4 << 20);
  for (size_t i = 0; i < src.size(); ++i) src[i] = PatternByte(5, i);
  RegionId local = t->RegisterMemory(src.data(), src.size(), MemoryKind::kHost)->id;
  PeerId p = *t->Connect(peer.address);
  RemoteRegionId remote = *t->LoadRemoteRegion(p, peer.descriptor);
  std::vector<WriteOp> ops;  // four 1 MiB writes, posted out of order
  for (uint64_t k : {3, 0, 2, 1}) ops.push_back(WriteOp{local, k << 20, remote, k << 20, 1 << 20});
  auto id = t->PostWrites(p, ops);
  ASSERT_TRUE(id.ok());
  std::vector<TransferEvent> events;
  auto start = std::chrono::steady_clock::now();
  while (events.empty() && std::chrono::steady_clock::now() - start < std::chrono::seconds(20)) t->Poll(&events);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_TRUE(events[0].status.ok()) << events[0].status.ToString();
  peer.Command("check 5 " + std::to_string(src.size()));
  EXPECT_EQ(peer.ReadLine(), "ok");
  peer.Command("check 6 16");  // the oracle can say no
  EXPECT_EQ(peer.ReadLine(), "bad");
  ASSERT_TRUE(t->UnloadRemoteRegion(remote).ok());
  ASSERT_TRUE(t->Disconnect(p).ok());
  ASSERT_TRUE(t->UnregisterMemory(local).ok());
}

TEST(UcxTwoProcessTest, KilledPeerEndsTransfersWithAnErrorNotAHang) {
  Peer peer("tcp");
  auto t = MakeUcx("tcp");
  std::vector<uint8_t> src(1 << 20, 1);
  RegionId local = t->RegisterMemory(src.data(), src.size(), MemoryKind::kHost)->id;
  PeerId p = *t->Connect(peer.address);
  RemoteRegionId remote = *t->LoadRemoteRegion(p, peer.descriptor);
  WriteOp op{local, 0, remote, 0, src.size()};
  EXPECT_FALSE(t->PeerGone(p));
  peer.Kill();
  // Keep posting until the failure surfaces; every batch must end (no hang).
  auto start = std::chrono::steady_clock::now();
  bool failed = false;
  while (!failed && std::chrono::steady_clock::now() - start < std::chrono::seconds(30)) {
    auto id = t->PostWrites(p, std::span<const WriteOp>(&op, 1));
    if (!id.ok()) {
      EXPECT_EQ(id.status().code(), StatusCode::kUnavailable) << id.status().ToString();
      failed = true;
      break;
    }
    std::vector<TransferEvent> events;
    while (events.empty() && std::chrono::steady_clock::now() - start < std::chrono::seconds(30)) t->Poll(&events);
    ASSERT_EQ(events.size(), 1u) << "a batch to a dead peer never completed";
    failed = !events[0].status.ok();
  }
  EXPECT_TRUE(failed);
  // The endpoint's failure is what KvSender::DropGonePeers acts on.
  EXPECT_TRUE(t->PeerGone(p));
  EXPECT_FALSE(t->PeerGone(p + 1000));
  ASSERT_TRUE(t->Disconnect(p).ok());
  ASSERT_TRUE(t->UnregisterMemory(local).ok());
}

}  // namespace
}  // namespace tandem::kv_transfer
