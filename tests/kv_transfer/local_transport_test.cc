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

