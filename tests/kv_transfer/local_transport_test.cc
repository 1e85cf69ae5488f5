#include "kv_transfer/local/local_transport.h"

#include <gtest/gtest.h>

#include "tests/kv_transfer/transport_conformance.h"

namespace tandem::kv_transfer {
namespace {

TEST(LocalTransportTest, Conforms) {
  LocalFabric fabric;
  LocalTransport a(fabric), b(fabric);
  testing::CheckHostTransportConforms(a, b);
}

TEST(LocalTransportTest, CapabilitiesAndTwoSidedRefused) {
  LocalFabric fabric;
  LocalTransport a(fabric);
  EXPECT_EQ(a.Capabilities().backend, "local");
  EXPECT_TRUE(a.Capabilities().one_sided);
  EXPECT_FALSE(a.Capabilities().device_memory);
  uint8_t x = 0;
  EXPECT_EQ(a.RegisterMemory(&x, 1, MemoryKind::kDevice).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(a.PostReceives(1, {}).status().code(), StatusCode::kFailedPrecondition);
}

struct Pair {
  LocalFabric fabric;
  LocalTransport a{fabric}, b{fabric};
  std::vector<uint8_t> src = std::vector<uint8_t>(64, 7), dst = std::vector<uint8_t>(64, 0);
  RegionId local = 0, target = 0;
  PeerId peer = 0;
  RemoteRegionId remote = 0;
  Pair() {
    local = a.RegisterMemory(src.data(), src.size(), MemoryKind::kHost)->id;
    RegisteredRegion r = *b.RegisterMemory(dst.data(), dst.size(), MemoryKind::kHost);
    target = r.id;
    peer = *a.Connect(b.WorkerAddress());
    remote = *a.LoadRemoteRegion(peer, r.descriptor);
  }
  WriteOp Op() const { return WriteOp{local, 0, remote, 0, 64}; }
};

TEST(LocalTransportTest, CancelledBatchNeverWrites) {
  Pair p;
  WriteOp op = p.Op();
  TransferId id = *p.a.PostWrites(p.peer, std::span<const WriteOp>(&op, 1));
  p.a.Cancel(id);
  p.a.Cancel(id + 1000);  // unknown: ignored
  std::vector<TransferEvent> events;
  EXPECT_EQ(p.a.Poll(&events), 1u);
  EXPECT_EQ(events[0].status.code(), StatusCode::kCancelled);
  EXPECT_EQ(p.dst, std::vector<uint8_t>(64, 0));
  EXPECT_EQ(p.a.Poll(&events), 0u);  // exactly one event
}

TEST(LocalTransportTest, TargetUnregisteredMidTransferFailsCleanly) {
  Pair p;
  WriteOp op = p.Op();
  TransferId id = *p.a.PostWrites(p.peer, std::span<const WriteOp>(&op, 1));
  ASSERT_TRUE(p.b.UnregisterMemory(p.target).ok());
  std::vector<TransferEvent> events;
  p.a.Poll(&events);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].id, id);
  EXPECT_EQ(events[0].status.code(), StatusCode::kNotFound);
  EXPECT_EQ(p.dst, std::vector<uint8_t>(64, 0));
}

TEST(LocalTransportTest, DisconnectEndsInFlightBatches) {
  Pair p;
  WriteOp op = p.Op();
  ASSERT_TRUE(p.a.PostWrites(p.peer, std::span<const WriteOp>(&op, 1)).ok());
  ASSERT_TRUE(p.a.Disconnect(p.peer).ok());
  std::vector<TransferEvent> events;
  p.a.Poll(&events);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].status.code(), StatusCode::kUnavailable);
  EXPECT_EQ(p.a.PostWrites(p.peer, std::span<const WriteOp>(&op, 1)).status().code(), StatusCode::kNotFound);
}

TEST(LocalTransportTest, DescriptorOfAnotherPeerIsRefused) {
  LocalFabric fabric;
  LocalTransport a(fabric), b(fabric), c(fabric);
  uint8_t buf[8];
  RegisteredRegion on_c = *c.RegisterMemory(buf, 8, MemoryKind::kHost);
  PeerId to_b = *a.Connect(b.WorkerAddress());
  EXPECT_EQ(a.LoadRemoteRegion(to_b, on_c.descriptor).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem::kv_transfer

namespace tandem::kv_transfer {
namespace {

TEST(LocalTwoSidedTest, Conforms) {
  LocalFabric fabric;
  LocalTransport a(fabric, true), b(fabric, true);
  EXPECT_FALSE(a.Capabilities().one_sided);
  testing::CheckHostTransportConforms(a, b);
}

// The receive batch decides where the writer's byte stream lands, however
// either side splits it; discards keep the pair in step; totals must agree.
TEST(LocalTwoSidedTest, ByteStreamsPairInPostOrder) {
  LocalFabric fabric;
  LocalTransport w(fabric, true), t(fabric, true);
  std::vector<uint8_t> src(100), dst(100, 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i + 1);
  RegionId local = w.RegisterMemory(src.data(), src.size(), MemoryKind::kHost)->id;
  RegisteredRegion landing = *t.RegisterMemory(dst.data(), dst.size(), MemoryKind::kHost);
  PeerId peer = *w.Connect(t.WorkerAddress());
  RemoteRegionId remote = *w.LoadRemoteRegion(peer, landing.descriptor);
  EXPECT_EQ(t.Accept("junk").status().code(), StatusCode::kInvalidArgument);
  const std::string token = *w.ConnectionToken(peer);
  PeerId accepted = *t.Accept(token);
  EXPECT_EQ(w.PostReceives(peer, {}).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(t.PostWrites(accepted, {}).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(t.ConnectionToken(accepted).status().code(), StatusCode::kNotFound);
  // Batch 1: writes [0,10) + [50,60); lands as [20,25) + [80,95).
  std::vector<WriteOp> writes = {{local, 0, remote, 0, 10}, {local, 50, remote, 0, 10}};
  TransferId w1 = *w.PostWrites(peer, writes);
  // Batch 2: 7 bytes nobody wants. Batch 3: 4 bytes for a 5-byte receive.
  TransferId w2 = *w.PostWrites(peer, {{WriteOp{local, 90, remote, 0, 7}}});
  TransferId w3 = *w.PostWrites(peer, {{WriteOp{local, 30, remote, 0, 4}}});
  std::vector<TransferEvent> events;
  EXPECT_EQ(w.Poll(&events), 0u) << "nothing lands before its receive is posted";
  TransferId r1 = *t.PostReceives(
      accepted, {{WriteOp{landing.id, 20, kInvalidHandle, 0, 5}, WriteOp{landing.id, 80, kInvalidHandle, 0, 15}}});
  TransferId r2 = *t.PostReceives(accepted, {{WriteOp{kInvalidHandle, 0, kInvalidHandle, 0, 7}}});
  TransferId r3 = *t.PostReceives(accepted, {{WriteOp{landing.id, 0, kInvalidHandle, 0, 5}}});
  std::map<TransferId, Status> written, received;  // ids are per transport: keep them apart
  std::vector<TransferEvent> target_events;
  for (int i = 0; i < 3; ++i) {
    w.Poll(&events);
    t.Poll(&target_events);
  }
  for (const TransferEvent& e : events) EXPECT_TRUE(written.emplace(e.id, e.status).second);
  for (const TransferEvent& e : target_events) EXPECT_TRUE(received.emplace(e.id, e.status).second);
  ASSERT_EQ(written.size(), 3u);
  ASSERT_EQ(received.size(), 3u);
  EXPECT_TRUE(written[w1].ok() && received[r1].ok() && written[w2].ok() && received[r2].ok());
  EXPECT_EQ(written[w3].code(), StatusCode::kInvalidArgument) << "4 bytes met a 5-byte receive";
  EXPECT_EQ(received[r3].code(), StatusCode::kInvalidArgument);
  std::vector<uint8_t> expect(100, 0);
  for (int i = 0; i < 5; ++i) expect[20 + i] = src[i];
  for (int i = 0; i < 5; ++i) expect[80 + i] = src[5 + i];
  for (int i = 0; i < 10; ++i) expect[85 + i] = src[50 + i];
  EXPECT_EQ(dst, expect);
  // Disconnect of the writer ends the target's unmatched receives.
  TransferId r4 = *t.PostReceives(accepted, {{WriteOp{landing.id, 0, kInvalidHandle, 0, 5}}});
  ASSERT_TRUE(w.Disconnect(peer).ok());
  events.clear();
  t.Poll(&events);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].id, r4);
  EXPECT_EQ(events[0].status.code(), StatusCode::kUnavailable);
  EXPECT_EQ(t.Accept(token).status().code(), StatusCode::kUnavailable) << "the connection is closed";
}

}  // namespace
}  // namespace tandem::kv_transfer
