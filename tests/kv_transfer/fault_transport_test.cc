#include "kv_transfer/fault/fault_transport.h"

#include <gtest/gtest.h>

#include "kv_transfer/local/local_transport.h"
#include "tests/kv_transfer/transport_conformance.h"

namespace tandem::kv_transfer {
namespace {

class FaultTransportTest : public ::testing::Test {
 protected:
  FaultTransportTest() : a_(std::make_unique<LocalTransport>(fabric_), FaultConfig{}, clock_), b_(fabric_) {
    local_ = a_.RegisterMemory(src_.data(), src_.size(), MemoryKind::kHost)->id;
    RegisteredRegion r = *b_.RegisterMemory(dst_.data(), dst_.size(), MemoryKind::kHost);
    peer_ = *a_.Connect(b_.WorkerAddress());
    remote_ = *a_.LoadRemoteRegion(peer_, r.descriptor);
  }
  // Posts one 8-byte write to slot i (of 8).
  TransferId Post(int i) {
    WriteOp op{local_, static_cast<uint64_t>(i) * 8, remote_, static_cast<uint64_t>(i) * 8, 8};
    auto id = a_.PostWrites(peer_, std::span<const WriteOp>(&op, 1));
    TANDEM_CHECK_OK(id.status());
    return *id;
  }
  std::map<TransferId, Status> Drain() {
    std::vector<TransferEvent> events;
    a_.Poll(&events);
    std::map<TransferId, Status> out;
    for (auto& e : events) {
      EXPECT_TRUE(out.emplace(e.id, e.status).second) << "two events for one batch";
    }
    return out;
  }
  bool SlotLanded(int i) const { return std::memcmp(&src_[i * 8], &dst_[i * 8], 8) == 0; }

  FakeClock clock_;
  LocalFabric fabric_;
  FaultTransport a_;
  LocalTransport b_;
  std::vector<uint8_t> src_ = [] {
    std::vector<uint8_t> v(64);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<uint8_t>(i + 1);
    return v;
  }();
  std::vector<uint8_t> dst_ = std::vector<uint8_t>(64, 0);
  RegionId local_ = 0;
  PeerId peer_ = 0;
  RemoteRegionId remote_ = 0;
};

TEST_F(FaultTransportTest, PassesThroughWhenOff) {
  LocalFabric fabric;
  FaultTransport a(std::make_unique<LocalTransport>(fabric), FaultConfig{}, clock_);
  LocalTransport b(fabric);
  EXPECT_EQ(a.Capabilities().backend, "fault(local)");
  testing::CheckHostTransportConforms(a, b);
}

TEST_F(FaultTransportTest, FailEveryThird) {
  a_.SetConfig(FaultConfig{.fail_every_nth = 3});
  std::vector<TransferId> ids;
  for (int i = 0; i < 7; ++i) ids.push_back(Post(i));
  auto events = Drain();
  ASSERT_EQ(events.size(), 7u);
  for (int i = 0; i < 7; ++i) {
    bool fails = (i + 1) % 3 == 0;
    EXPECT_EQ(events[ids[i]].code(), fails ? StatusCode::kUnavailable : StatusCode::kOk) << i;
    EXPECT_EQ(SlotLanded(i), !fails) << i;
  }
}

TEST_F(FaultTransportTest, DropNeverCompletesUntilCancel) {
  a_.SetConfig(FaultConfig{.drop_every_nth = 2});
  TransferId ok = Post(0), dropped = Post(1);
  auto events = Drain();
  EXPECT_EQ(events.size(), 1u);
  EXPECT_TRUE(events.count(ok));
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(Drain().empty());
  a_.Cancel(dropped);
  events = Drain();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[dropped].code(), StatusCode::kCancelled);
  EXPECT_FALSE(SlotLanded(1));
  EXPECT_EQ(a_.stats().batches_dropped, 1u);
}

TEST_F(FaultTransportTest, DelayHoldsEventsOnTheClock) {
  a_.SetConfig(FaultConfig{.delay_ms = 10});
  TransferId id = Post(0);
  EXPECT_TRUE(Drain().empty());
  clock_.AdvanceMs(9);
  EXPECT_TRUE(Drain().empty());
  clock_.AdvanceMs(1);
  auto events = Drain();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_TRUE(events[id].ok());
}

TEST_F(FaultTransportTest, ShorterDelayIsNotBlockedByAnEarlierLongerOne) {
  a_.SetConfig(FaultConfig{.delay_ms = 100});
  TransferId slow = Post(0);
  EXPECT_TRUE(Drain().empty());
  a_.SetConfig(FaultConfig{.delay_ms = 0});
  TransferId fast = Post(1);
  auto events = Drain();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_TRUE(events.count(fast));
  clock_.AdvanceMs(100);
  events = Drain();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_TRUE(events.count(slow));
}

TEST_F(FaultTransportTest, FailAfterBytes) {
  a_.SetConfig(FaultConfig{.fail_after_bytes = 20});
  TransferId a = Post(0), b = Post(1), c = Post(2), d = Post(3);
  auto events = Drain();
  EXPECT_TRUE(events[a].ok());
  EXPECT_TRUE(events[b].ok());
  EXPECT_FALSE(events[c].ok());  // 24 > 20
  EXPECT_FALSE(events[d].ok());
}

TEST_F(FaultTransportTest, PartitionDropsAndRefusesConnectsThenHeals) {
  a_.SetPartitioned(true);
  TransferId lost = Post(0);
  EXPECT_TRUE(Drain().empty());
  EXPECT_EQ(a_.Connect(b_.WorkerAddress()).status().code(), StatusCode::kUnavailable);
  a_.SetPartitioned(false);
  TransferId fine = Post(1);
  auto events = Drain();
  EXPECT_EQ(events.size(), 1u);
  EXPECT_TRUE(events[fine].ok());
  ASSERT_TRUE(a_.Disconnect(peer_).ok());  // ends the dropped batch too
  events = Drain();
  EXPECT_EQ(events[lost].code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace tandem::kv_transfer
