// Sender/receiver sessions over a two-sided transport (the local backend in
// two-sided mode, which pairs batches like NCCL): receives posted in each
// connection's sequence order whatever order the announcements arrive in, layers
// landing on receive events, discards that keep a connection in step after a
// session failed, connection resets.
#include <gtest/gtest.h>

#include "kv_transfer/fault/fault_transport.h"
#include "kv_transfer/local/local_transport.h"
#include "tests/kv_transfer/session_harness.h"

namespace tandem::kv_transfer {
namespace {

using testing::SessionHarness;

class KvTwoSidedTest : public ::testing::Test {
 protected:
  KvTwoSidedTest()
      : send_t_(std::make_unique<LocalTransport>(fabric_, true), FaultConfig{}, clock_), recv_t_(fabric_, true) {}
  // Delivers queued receiver-bound messages, `first` request's first.
  static void DeliverFirst(SessionHarness& h, RequestId first) {
    std::stable_partition(h.to_receiver.begin(), h.to_receiver.end(),
                          [first](const auto& m) { return m.first == first; });
  }
  FakeClock clock_;
  LocalFabric fabric_;
  FaultTransport send_t_;
  LocalTransport recv_t_;
};

TEST_F(KvTwoSidedTest, InterleavedSessionsLandByteExact) {
  SessionHarness h(send_t_, recv_t_, clock_);
  std::vector<BlockId> src1 = {3, 4, 5, 17, 0}, dst1 = {40, 2, 3, 5, 30};
  std::vector<BlockId> src2 = {20, 21}, dst2 = {10, 11};
  ASSERT_TRUE(h.Open(1, 1, src1, dst1).ok());
  ASSERT_TRUE(h.Open(2, 1, src2, dst2).ok());
  for (int layer : {2, 0, 1}) {  // any layer order, the two sessions interleaved
    ASSERT_TRUE(h.SendLayer(1, layer).ok());
    ASSERT_TRUE(h.SendLayer(2, layer).ok());
  }
  DeliverFirst(h, 2);  // announcements of session 2 arrive first: receives still follow seq order
  h.Pump();
  ASSERT_TRUE(h.recv_outcomes[1].done && h.recv_outcomes[2].done);
  EXPECT_TRUE(h.recv_outcomes[1].status.ok()) << h.recv_outcomes[1].status.ToString();
  EXPECT_TRUE(h.recv_outcomes[2].status.ok()) << h.recv_outcomes[2].status.ToString();
  EXPECT_TRUE(h.send_outcomes[1].status.ok() && h.send_outcomes[2].status.ok());
  EXPECT_EQ(h.recv_outcomes[1].layers, (std::vector<int>{2, 0, 1}));
  EXPECT_TRUE(h.Landed(src1, dst1));
  EXPECT_TRUE(h.Landed(src2, dst2));
  std::vector<BlockId> all = dst1;
  all.insert(all.end(), dst2.begin(), dst2.end());
  EXPECT_TRUE(h.UntouchedExcept(all));
  EXPECT_EQ(h.receiver().stats().receives_posted, 6u);
  EXPECT_EQ(h.receiver().stats().receives_discarded, 0u);
  EXPECT_EQ(h.sender().num_sessions() + h.receiver().num_sessions(), 0u);
}

TEST_F(KvTwoSidedTest, LayersLandOnReceiveEventsNotOnLayerDone) {
  SessionHarness h(send_t_, recv_t_, clock_);
  std::vector<BlockId> src = {1, 2}, dst = {7, 8};
  ASSERT_TRUE(h.Open(1, 1, src, dst).ok());
  ASSERT_TRUE(h.SendAllLayers(1).ok());
  // Only the announcements travel; LayerDone/KvDone are held back.
  h.sender().Poll();
  h.receiver().Poll();
  for (int round = 0; round < 5; ++round) {
    while (!h.to_receiver.empty()) {
      auto m = h.to_receiver.front();
      h.to_receiver.pop_front();
      auto decoded = DecodeControlMessage(m.second);
      if (decoded->type == MessageType::kHello || decoded->type == MessageType::kLayerPosted) {
        h.receiver().OnControlMessage(m.second);
      }
    }
    h.receiver().Poll();
    h.sender().Poll();
  }
  EXPECT_EQ(h.recv_outcomes[1].layers.size(), 3u) << "landed by receive events alone";
  EXPECT_FALSE(h.recv_outcomes[1].done) << "the session ends on KvDone";
}

TEST_F(KvTwoSidedTest, ReceiverCancelDiscardsTheRestAndKeepsTheConnectionInStep) {
  SessionHarness h(send_t_, recv_t_, clock_);
  std::vector<BlockId> src1 = {1, 2, 3}, dst1 = {10, 11, 12};
  std::vector<BlockId> src2 = {5}, dst2 = {20};
  ASSERT_TRUE(h.Open(1, 1, src1, dst1).ok());
  ASSERT_TRUE(h.Open(2, 1, src2, dst2).ok());
  ASSERT_TRUE(h.SendLayer(1, 0).ok());
  h.Pump();
  h.receiver().Cancel(1, CancelledError("client went away"));
  // The sender has not seen the Abort yet: its next layers are announced for a dead session.
  ASSERT_TRUE(h.SendLayer(1, 1).ok());
  ASSERT_TRUE(h.SendLayer(2, 0).ok());
  ASSERT_TRUE(h.SendLayer(2, 1).ok());
  ASSERT_TRUE(h.SendLayer(2, 2).ok());
  h.Pump();
  EXPECT_EQ(h.recv_outcomes[1].status.code(), StatusCode::kCancelled);
  EXPECT_FALSE(h.send_outcomes[1].status.ok());
  EXPECT_TRUE(h.recv_outcomes[2].status.ok()) << h.recv_outcomes[2].status.ToString();
  EXPECT_TRUE(h.Landed(src2, dst2)) << "session 2 landed in the right place after a discard";
  EXPECT_EQ(h.receiver().stats().receives_discarded, 1u);
  EXPECT_EQ(h.receiver().stats().connections_reset, 0u);
  std::vector<BlockId> all = dst1;
  all.push_back(20);
  EXPECT_TRUE(h.UntouchedExcept(all));
  EXPECT_EQ(h.sender().num_sessions() + h.receiver().num_sessions(), 0u);
}

TEST_F(KvTwoSidedTest, AnnouncementOfTheWrongSizeFailsTheSessionOnly) {
  SessionHarness h(send_t_, recv_t_, clock_);
  ASSERT_TRUE(h.Open(1, 1, {1, 2}, {10, 11}).ok());
  ASSERT_TRUE(h.Open(2, 1, {5}, {20}).ok());
  h.Pump();
  // A forged announcement (session 1's, of the wrong size) takes the place of session
  // 2's first post: the receiver fails session 1 and discards the announced 3 bytes;
  // the sender's real batch meets that 3-byte receive, so both end with a size
  // mismatch, nothing lands, and the connection stays in step.
  ASSERT_TRUE(h.SendLayer(2, 0).ok());
  auto posted = std::find_if(h.to_receiver.begin(), h.to_receiver.end(), [](const auto& m) {
    return DecodeControlMessage(m.second)->type == MessageType::kLayerPosted;
  });
  ASSERT_NE(posted, h.to_receiver.end());
  ControlMessage m = *DecodeControlMessage(posted->second);
  m.request_id = 1;
  m.bytes = 3;  // session 1's layers are 2 blocks
  posted->second = EncodeControlMessage(m);
  posted->first = 1;
  h.Pump();
  EXPECT_EQ(h.recv_outcomes[1].status.code(), StatusCode::kInvalidArgument) << h.recv_outcomes[1].status.ToString();
  EXPECT_EQ(h.receiver().stats().receives_discarded, 1u);
  // Session 2's batch met a 3-byte discard: both ended with a size mismatch, nothing landed.
  EXPECT_FALSE(h.send_outcomes[2].status.ok());
  EXPECT_TRUE(h.UntouchedExcept({}));
  h.Pump();
  EXPECT_EQ(h.sender().num_sessions() + h.receiver().num_sessions(), 0u);
}

TEST_F(KvTwoSidedTest, StuckReceiveResetsTheConnectionAndFailsItsSessions) {
  SessionHarness h(send_t_, recv_t_, clock_);
  ASSERT_TRUE(h.Open(1, 1, {1, 2}, {10, 11}, 60'000).ok());
  send_t_.SetConfig(FaultConfig{.drop_every_nth = 2});  // the 2nd batch never reaches the wire
  ASSERT_TRUE(h.SendLayer(1, 0).ok());
  ASSERT_TRUE(h.SendLayer(1, 1).ok());
  h.Pump();
  EXPECT_FALSE(h.recv_outcomes[1].done);
  clock_.AdvanceMs(5000);  // receive_timeout_ms
  h.Pump();
  ASSERT_TRUE(h.recv_outcomes[1].done);
  EXPECT_EQ(h.recv_outcomes[1].status.code(), StatusCode::kUnavailable) << h.recv_outcomes[1].status.ToString();
  EXPECT_EQ(h.receiver().stats().connections_reset, 1u);
  clock_.AdvanceMs(3000);  // the sender's drain of the dropped batch
  h.Pump();
  EXPECT_TRUE(h.send_outcomes[1].done);
  EXPECT_FALSE(h.send_outcomes[1].status.ok());
  // A later session reconnects: the sender marked the peer broken, the old token is dead.
  send_t_.SetConfig(FaultConfig{});
  ASSERT_TRUE(h.Open(2, 1, {3}, {30}).ok());
  ASSERT_TRUE(h.SendAllLayers(2).ok());
  h.Pump();
  EXPECT_TRUE(h.recv_outcomes[2].status.ok()) << h.recv_outcomes[2].status.ToString();
  EXPECT_TRUE(h.Landed({3}, {30}));
}

TEST_F(KvTwoSidedTest, OneSidedReceiverRefusesAnnouncements) {
  LocalFabric fabric;
  LocalTransport one_sided(fabric);
  SessionHarness h(one_sided, one_sided, clock_);
  ASSERT_TRUE(h.Open(1, 1, {1}, {2}).ok());
  ControlMessage m = MakeMessage(MessageType::kLayerPosted, 1, 1);
  m.bytes = 8;
  m.connection = "token";
  h.receiver().OnControlMessage(EncodeControlMessage(m));
  EXPECT_EQ(h.receiver().stats().bad_messages, 1u);
  h.receiver().Cancel(1, CancelledError("done"));
  h.Pump();
}

}  // namespace
}  // namespace tandem::kv_transfer
