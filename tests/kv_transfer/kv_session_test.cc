// Sender/receiver sessions over the local transport, with and without faults.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "kv_transfer/fault/fault_transport.h"
#include "kv_transfer/local/local_transport.h"
#include "tests/kv_transfer/session_harness.h"
#include "tests/testing/log_capture.h"

namespace tandem::kv_transfer {
namespace {

using testing::SessionHarness;

class KvSessionTest : public ::testing::Test {
 protected:
  KvSessionTest() : send_t_(std::make_unique<LocalTransport>(fabric_), FaultConfig{}, clock_), recv_t_(fabric_) {}
  FakeClock clock_;
  LocalFabric fabric_;
  FaultTransport send_t_;  // faults off unless a test sets them
  LocalTransport recv_t_;
};

TEST_F(KvSessionTest, StreamsEveryLayerByteExact) {
  SessionHarness h(send_t_, recv_t_, clock_);
  std::vector<BlockId> src = {3, 9, 4, 17, 0}, dst = {40, 2, 11, 5, 30};
  ASSERT_TRUE(h.Open(7, 1, src, dst).ok());
  for (int layer = 2; layer >= 0; --layer) {  // any order
    ASSERT_TRUE(h.SendLayer(7, layer).ok());
    h.Pump();
    EXPECT_EQ(h.recv_outcomes[7].done, layer == 0) << "done only after the last layer";
  }
  h.Pump();
  ASSERT_TRUE(h.recv_outcomes[7].done);
  EXPECT_TRUE(h.recv_outcomes[7].status.ok()) << h.recv_outcomes[7].status.ToString();
  EXPECT_TRUE(h.send_outcomes[7].status.ok());
  EXPECT_EQ(h.recv_outcomes[7].layers, (std::vector<int>{2, 1, 0}));
  EXPECT_TRUE(h.Landed(src, dst));
  EXPECT_TRUE(h.UntouchedExcept(dst));
  EXPECT_EQ(h.sender().num_sessions(), 0u);
  EXPECT_EQ(h.receiver().num_sessions(), 0u);
  EXPECT_EQ(h.sender().stats().bytes_sent, 3u * 5 * testing::OracleBlockBytes(h.send_layout()));
}

// A cached connection whose peer's transport is gone (its process died) is
// dropped at the next Poll: it would keep the peer's memory mapped.
TEST(KvSenderPeersTest, AGonePeersCachedConnectionIsDropped) {
  FakeClock clock;
  LocalFabric fabric;
  LocalTransport send_t(fabric);
  auto recv_t = std::make_unique<LocalTransport>(fabric);
  SessionHarness h(send_t, *recv_t, clock);
  ASSERT_TRUE(h.Open(1, 1, {0, 1}, {5, 6}).ok());
  ASSERT_TRUE(h.SendAllLayers(1).ok());
  h.Pump();
  ASSERT_TRUE(h.send_outcomes[1].status.ok());
  EXPECT_EQ(h.sender().num_peers(), 1u) << "an idle connection is cached for reuse";
  h.sender().Poll();
  EXPECT_EQ(h.sender().num_peers(), 1u) << "a live peer stays cached";
  h.DropReceiver();
  recv_t.reset();
  h.sender().Poll();
  EXPECT_EQ(h.sender().num_peers(), 0u);
}

TEST_F(KvSessionTest, CoalescesContiguousRuns) {
  SessionHarness h(send_t_, recv_t_, clock_);
  // Runs where both sides are consecutive: [10,11,12]->[20,21,22], [13]->[30], [5,6]->[31,32], [8]->[33].
  std::vector<BlockId> src = {10, 11, 12, 13, 5, 6, 8}, dst = {20, 21, 22, 30, 31, 32, 33};
  ASSERT_TRUE(h.Open(1, 1, src, dst).ok());
  ASSERT_TRUE(h.SendAllLayers(1).ok());
  h.Pump();
  EXPECT_EQ(h.sender().stats().writes_posted, 4u * 3);  // 4 runs x 3 layers
  EXPECT_TRUE(h.recv_outcomes[1].status.ok());
  EXPECT_TRUE(h.Landed(src, dst));
  EXPECT_TRUE(h.UntouchedExcept(dst));
}

TEST_F(KvSessionTest, ManyRandomSessionsLandByteExact) {
  SessionHarness h(send_t_, recv_t_, clock_, 64, 96);
  std::mt19937 rng(7);
  std::vector<BlockId> all_dst;
  std::map<RequestId, std::pair<std::vector<BlockId>, std::vector<BlockId>>> plans;
  std::vector<int> free_dst(96);
  std::iota(free_dst.begin(), free_dst.end(), 0);
  std::shuffle(free_dst.begin(), free_dst.end(), rng);
  for (RequestId id = 1; id <= 8; ++id) {
    size_t n = 1 + rng() % 10;
    std::vector<BlockId> src, dst;
    for (size_t i = 0; i < n; ++i) {
      src.push_back(static_cast<BlockId>(rng() % 64));
      dst.push_back(free_dst.back());
      free_dst.pop_back();
    }
    all_dst.insert(all_dst.end(), dst.begin(), dst.end());
    ASSERT_TRUE(h.Open(id, 3, src, dst).ok());
    plans[id] = {src, dst};
  }
  for (int layer = 0; layer < 3; ++layer) {
    for (auto& [id, plan] : plans) ASSERT_TRUE(h.SendLayer(id, layer).ok());
    h.Pump(3);
  }
  h.Pump();
  for (auto& [id, plan] : plans) {
    EXPECT_TRUE(h.recv_outcomes[id].status.ok()) << id;
    EXPECT_TRUE(h.Landed(plan.first, plan.second)) << id;
  }
  EXPECT_TRUE(h.UntouchedExcept(all_dst));
}

TEST_F(KvSessionTest, LayoutMismatchRefusedWithClearError) {
  tandem::testing::LogCapture logs;
  SessionHarness h(send_t_, recv_t_, clock_, 32, 48, "other-model");
  Status st = h.Open(5, 1, {1}, {2});
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(st.message().find("model id mismatch"), std::string::npos) << st.message();
  h.Pump();
  ASSERT_TRUE(h.recv_outcomes[5].done);  // told through Abort, not by lease
  EXPECT_NE(h.recv_outcomes[5].status.message().find("model id mismatch"), std::string::npos);
  EXPECT_EQ(h.receiver().num_sessions(), 0u);
  EXPECT_EQ(h.sender().num_sessions(), 0u);
  EXPECT_EQ(h.TouchedBytes(), 0u);
  // Both sides log the reason once: the refusing sender, and the receiver told by Abort.
  EXPECT_EQ(logs.Count({"kv sender: refused the KV handshake of request 5", "model id mismatch"}), 1);
  EXPECT_EQ(logs.Count({"kv receiver: the peer refused the KV handshake of request 5", "model id mismatch"}), 1);
  // Another refusal for the same reason within the interval is held back, then counted.
  ASSERT_FALSE(h.Open(6, 1, {1}, {2}).ok());
  h.Pump();
  EXPECT_EQ(logs.Count({"KV handshake", "model id mismatch"}), 2) << ::testing::PrintToString(logs.Lines());
  clock_.AdvanceMs(kRefusalLogIntervalMs);
  ASSERT_FALSE(h.Open(7, 1, {1}, {2}).ok());
  h.Pump();
  EXPECT_EQ(logs.Count({"refused the KV handshake of request 7", "(1 more since the last report)"}), 2)
      << ::testing::PrintToString(logs.Lines());
}

TEST_F(KvSessionTest, ReceiverRefusesIncompatibleHello) {
  // A sender whose layout differs (head_dim) but that does not check: forge its Hello.
  tandem::testing::LogCapture logs;
  SessionHarness h(send_t_, recv_t_, clock_);
  ReceiveParams rp;
  rp.request_id = 9;
  rp.epoch = 1;
  rp.blocks = {1};
  Status done;
  rp.on_done = [&](const Status& s) { done = s; };
  ASSERT_TRUE(h.receiver().Open(std::move(rp)).ok());
  ControlMessage hello = MakeMessage(MessageType::kHello, 9, 1);
  hello.model_id = "tiny";
  hello.layout = h.recv_layout();
  hello.layout.head_dim = 16;
  h.receiver().OnControlMessage(EncodeControlMessage(hello));
  EXPECT_EQ(done.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(done.message().find("layout mismatch"), std::string::npos) << done.message();
  EXPECT_EQ(logs.Count({"kv receiver: refused the KV handshake of request 9", "layout mismatch"}), 1);
  EXPECT_EQ(h.receiver().num_sessions(), 0u);
  ASSERT_EQ(h.to_sender.size(), 1u);  // Abort goes back
  h.to_sender.clear();
}

TEST_F(KvSessionTest, LeaseExpiryEndsBothSides) {
  SessionHarness h(send_t_, recv_t_, clock_);
  ASSERT_TRUE(h.Open(4, 1, {1, 2}, {3, 4}, /*lease_ms=*/500).ok());
  ASSERT_TRUE(h.SendLayer(4, 0).ok());
  h.Pump();
  clock_.AdvanceMs(499);
  h.Pump();
  EXPECT_FALSE(h.recv_outcomes[4].done);
  clock_.AdvanceMs(1);
  h.Pump();
  ASSERT_TRUE(h.recv_outcomes[4].done);
  EXPECT_EQ(h.recv_outcomes[4].status.code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(h.recv_outcomes[4].status.message().find("1 of 3 layers"), std::string::npos)
      << h.recv_outcomes[4].status.message();
  ASSERT_TRUE(h.send_outcomes[4].done);
  EXPECT_FALSE(h.send_outcomes[4].status.ok());
  EXPECT_EQ(h.sender().num_sessions(), 0u);
  EXPECT_EQ(h.receiver().num_sessions(), 0u);
  EXPECT_FALSE(h.SendLayer(4, 1).ok());
}

TEST_F(KvSessionTest, StaleEpochMessagesAreIgnored) {
  SessionHarness h(send_t_, recv_t_, clock_);
  ASSERT_TRUE(h.Open(8, 1, {1}, {1}).ok());
  // The receiver re-reserves the request at epoch 2 (e.g. after a prefill retry).
  ReceiveParams rp;
  rp.request_id = 8;
  rp.epoch = 2;
  rp.blocks = {6};
  Status epoch2 = InternalError("not done");
  rp.on_done = [&](const Status& s) { epoch2 = s; };
  ASSERT_TRUE(h.receiver().Open(std::move(rp)).ok());
  EXPECT_EQ(h.recv_outcomes[8].status.code(), StatusCode::kCancelled);  // epoch 1 superseded
  // The epoch-1 sender keeps streaming; its messages must not complete epoch 2.
  ASSERT_TRUE(h.SendAllLayers(8).ok());
  h.Pump();
  EXPECT_EQ(epoch2.code(), StatusCode::kInternal) << "stale epoch completed the new session";
  EXPECT_GT(h.receiver().stats().stale_messages, 0u);
  EXPECT_EQ(h.receiver().num_sessions(), 1u);
  // Equal or older epochs cannot reopen.
  ReceiveParams old;
  old.request_id = 8;
  old.epoch = 2;
  old.blocks = {7};
  EXPECT_EQ(h.receiver().Open(std::move(old)).status().code(), StatusCode::kAlreadyExists);
  h.receiver().Cancel(8, CancelledError("test over"));
  EXPECT_EQ(epoch2.code(), StatusCode::kCancelled);
  h.Pump();
  EXPECT_EQ(h.sender().num_sessions(), 0u);
}

TEST_F(KvSessionTest, CancelFromReceiverMidTransfer) {
  SessionHarness h(send_t_, recv_t_, clock_);
  ASSERT_TRUE(h.Open(2, 1, {1, 2, 3}, {4, 5, 6}).ok());
  ASSERT_TRUE(h.SendLayer(2, 0).ok());
  h.Pump();
  h.receiver().Cancel(2, CancelledError("client went away"));
  h.Pump();
  EXPECT_EQ(h.recv_outcomes[2].status.code(), StatusCode::kCancelled);
  ASSERT_TRUE(h.send_outcomes[2].done);
  EXPECT_EQ(h.send_outcomes[2].status.code(), StatusCode::kCancelled);
  EXPECT_NE(h.send_outcomes[2].status.message().find("client went away"), std::string::npos);
  EXPECT_EQ(h.SendLayer(2, 1).code(), StatusCode::kNotFound);
  EXPECT_EQ(h.sender().num_sessions(), 0u);
  EXPECT_EQ(h.receiver().num_sessions(), 0u);
}

TEST_F(KvSessionTest, CancelFromSenderWithBatchInFlight) {
  SessionHarness h(send_t_, recv_t_, clock_);
  send_t_.SetConfig(FaultConfig{.drop_every_nth = 2});  // layer 1's batch never completes
  ASSERT_TRUE(h.Open(3, 1, {1}, {2}).ok());
  ASSERT_TRUE(h.SendLayer(3, 0).ok());
  ASSERT_TRUE(h.SendLayer(3, 1).ok());
  h.Pump();
  EXPECT_EQ(h.recv_outcomes[3].layers, (std::vector<int>{0}));
  h.sender().Cancel(3, CancelledError("prefill preempted"));
  h.Pump();
  ASSERT_TRUE(h.send_outcomes[3].done);  // the dropped batch was cancelled and drained
  EXPECT_EQ(h.send_outcomes[3].status.code(), StatusCode::kCancelled);
  EXPECT_EQ(h.recv_outcomes[3].status.code(), StatusCode::kCancelled);
  EXPECT_EQ(h.sender().num_sessions(), 0u);
  EXPECT_EQ(h.receiver().num_sessions(), 0u);
}

TEST_F(KvSessionTest, FailEveryNthFailsOnlyAffectedSessions) {
  SessionHarness h(send_t_, recv_t_, clock_, 64, 96);
  send_t_.SetConfig(FaultConfig{.fail_every_nth = 5});
  // 6 sessions x 3 layers = 18 batches, posted session by session: batches 5, 10, 15
  // fail, i.e. session 2 (layer 1), session 4 (layer 0), session 5 (layer 2).
  for (RequestId id = 1; id <= 6; ++id) {
    ASSERT_TRUE(h.Open(id, 1, {static_cast<BlockId>(id)}, {static_cast<BlockId>(10 + id)}).ok());
  }
  for (RequestId id = 1; id <= 6; ++id) {
    for (int layer = 0; layer < 3; ++layer) h.SendLayer(id, layer).IgnoreError();
  }
  h.Pump();
  for (RequestId id = 1; id <= 6; ++id) {
    bool affected = id == 2 || id == 4 || id == 5;
    ASSERT_TRUE(h.recv_outcomes[id].done) << id;
    ASSERT_TRUE(h.send_outcomes[id].done) << id;
    EXPECT_EQ(h.recv_outcomes[id].status.ok(), !affected) << id << h.recv_outcomes[id].status.ToString();
    EXPECT_EQ(h.send_outcomes[id].status.ok(), !affected) << id;
    if (affected) {
      EXPECT_EQ(h.send_outcomes[id].status.code(), StatusCode::kUnavailable);
    } else {
      EXPECT_TRUE(h.Landed({static_cast<BlockId>(id)}, {static_cast<BlockId>(10 + id)}));
    }
  }
  EXPECT_EQ(send_t_.stats().batches_failed, 3u);
  EXPECT_EQ(h.sender().num_sessions(), 0u);
  EXPECT_EQ(h.receiver().num_sessions(), 0u);
}

TEST_F(KvSessionTest, DropIsEndedByTheLease) {
  SessionHarness h(send_t_, recv_t_, clock_);
  send_t_.SetConfig(FaultConfig{.drop_every_nth = 1});  // silent peer
  ASSERT_TRUE(h.Open(6, 1, {1}, {1}, /*lease_ms=*/200).ok());
  ASSERT_TRUE(h.SendAllLayers(6).ok());
  h.Pump();
  EXPECT_FALSE(h.recv_outcomes[6].done);
  EXPECT_FALSE(h.send_outcomes[6].done);
  clock_.AdvanceMs(200);
  h.Pump();
  EXPECT_EQ(h.recv_outcomes[6].status.code(), StatusCode::kDeadlineExceeded);
  ASSERT_TRUE(h.send_outcomes[6].done);
  EXPECT_EQ(h.sender().num_sessions(), 0u);
  EXPECT_EQ(h.receiver().num_sessions(), 0u);
  EXPECT_EQ(h.TouchedBytes(), 0u);
}

TEST_F(KvSessionTest, HungPeerIsDisconnectedAfterTheDrainTimeout) {
  SessionHarness h(send_t_, recv_t_, clock_);
  send_t_.SetConfig(FaultConfig{.drop_every_nth = 2, .cancel_ignored = true});
  ASSERT_TRUE(h.Open(1, 1, {1}, {1}, 300).ok());
  ASSERT_TRUE(h.Open(2, 1, {2}, {2}, 10'000).ok());
  ASSERT_TRUE(h.SendLayer(1, 0).ok());  // batch 1 lands
  ASSERT_TRUE(h.SendLayer(1, 1).ok());  // batch 2 hangs
  h.Pump();
  clock_.AdvanceMs(300);  // lease: cancel is ignored, the batch stays in flight
  h.Pump();
  EXPECT_FALSE(h.send_outcomes[1].done) << "done while the transport may still read the source";
  EXPECT_EQ(h.recv_outcomes[1].status.code(), StatusCode::kDeadlineExceeded);
  clock_.AdvanceMs(2000);  // drain timeout (default 2000 ms)
  h.Pump();
  ASSERT_TRUE(h.send_outcomes[1].done);
  EXPECT_EQ(h.send_outcomes[1].status.code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(h.sender().stats().forced_disconnects, 1u);
  // Session 2 shared the hung connection: it ends too, and decode hears of it.
  EXPECT_EQ(h.send_outcomes[2].status.code(), StatusCode::kUnavailable);
  EXPECT_EQ(h.recv_outcomes[2].status.code(), StatusCode::kUnavailable);
  // A new session reconnects.
  send_t_.SetConfig(FaultConfig{});
  ASSERT_TRUE(h.Open(3, 1, {3}, {3}).ok());
  ASSERT_TRUE(h.SendAllLayers(3).ok());
  h.Pump();
  EXPECT_TRUE(h.recv_outcomes[3].status.ok());
  EXPECT_TRUE(h.Landed({3}, {3}));
  EXPECT_EQ(h.sender().num_sessions() + h.receiver().num_sessions(), 0u);
}

TEST_F(KvSessionTest, CancelAllDrainsEverySession) {
  SessionHarness h(send_t_, recv_t_, clock_);
  for (RequestId id = 1; id <= 4; ++id) {
    ASSERT_TRUE(h.Open(id, 1, {static_cast<BlockId>(id)}, {static_cast<BlockId>(id)}).ok());
    ASSERT_TRUE(h.SendLayer(id, 0).ok());
  }
  h.sender().CancelAll(CancelledError("shutdown"));
  h.Pump();
  for (RequestId id = 1; id <= 4; ++id) {
    EXPECT_EQ(h.send_outcomes[id].status.code(), StatusCode::kCancelled);
    EXPECT_EQ(h.recv_outcomes[id].status.code(), StatusCode::kCancelled);
  }
  EXPECT_EQ(h.sender().num_sessions() + h.receiver().num_sessions(), 0u);
}

TEST_F(KvSessionTest, PartitionFailsByDeadlineAndHeals) {
  SessionHarness h(send_t_, recv_t_, clock_);
  ASSERT_TRUE(h.Open(1, 1, {1}, {1}, 100).ok());  // connected before the partition
  h.Pump();
  send_t_.SetPartitioned(true);
  ASSERT_TRUE(h.SendAllLayers(1).ok());
  // A new peer cannot be reached during the partition: refused at once, decode told.
  LocalTransport other_decode(fabric_);
  KvReceiverConfig rc{.model_id = "tiny", .layout = h.recv_layout()};
  std::vector<uint8_t> pool(h.recv_layout().TotalBytes());
  std::vector<std::string> to_sender;
  {
    KvReceiver other(rc, other_decode, clock_, [&](RequestId, std::string m) { to_sender.push_back(m); });
    ASSERT_TRUE(other.RegisterLanding(pool.data(), MemoryKind::kHost).ok());
    ReceiveParams rp;
    rp.request_id = 77;
    rp.blocks = {1};
    Status other_done;
    rp.on_done = [&](const Status& s) { other_done = s; };
    SendParams sp;
    sp.target = *other.Open(std::move(rp));
    sp.source_blocks = {1};
    EXPECT_EQ(h.sender().Open(std::move(sp)).code(), StatusCode::kUnavailable);
    ASSERT_EQ(h.to_receiver.size(), 1u);  // the Abort for request 77
    other.OnControlMessage(h.to_receiver.front().second);
    h.to_receiver.pop_front();
    EXPECT_EQ(other_done.code(), StatusCode::kUnavailable);
    EXPECT_EQ(other.num_sessions(), 0u);
  }
  h.Pump();
  clock_.AdvanceMs(100);
  h.Pump();
  EXPECT_EQ(h.recv_outcomes[1].status.code(), StatusCode::kDeadlineExceeded);
  send_t_.SetPartitioned(false);
  ASSERT_TRUE(h.Open(2, 1, {2}, {2}, 100).ok());
  ASSERT_TRUE(h.SendAllLayers(2).ok());
  h.Pump();
  EXPECT_TRUE(h.recv_outcomes[2].status.ok());
  EXPECT_TRUE(h.Landed({2}, {2}));
  EXPECT_EQ(h.sender().num_sessions() + h.receiver().num_sessions(), 0u);
}

TEST_F(KvSessionTest, DelayedCompletionsStillLand) {
  SessionHarness h(send_t_, recv_t_, clock_);
  send_t_.SetConfig(FaultConfig{.delay_ms = 50});
  ASSERT_TRUE(h.Open(1, 1, {1, 2}, {5, 6}).ok());
  ASSERT_TRUE(h.SendAllLayers(1).ok());
  h.Pump();
  EXPECT_FALSE(h.recv_outcomes[1].done);
  clock_.AdvanceMs(50);
  h.Pump();
  EXPECT_TRUE(h.recv_outcomes[1].status.ok());
}

TEST_F(KvSessionTest, FailAfterBytes) {
  SessionHarness h(send_t_, recv_t_, clock_);
  uint64_t layer_bytes = testing::OracleBlockBytes(h.send_layout());
  send_t_.SetConfig(FaultConfig{.fail_after_bytes = 4 * layer_bytes});
  ASSERT_TRUE(h.Open(1, 1, {1}, {1}).ok());
  ASSERT_TRUE(h.Open(2, 1, {2}, {2}).ok());
  ASSERT_TRUE(h.SendAllLayers(1).ok());  // 3 blocks-layers: fits
  h.Pump();
  for (int layer = 0; layer < 3; ++layer) h.SendLayer(2, layer).IgnoreError();  // the 2nd fails
  h.Pump();
  EXPECT_TRUE(h.recv_outcomes[1].status.ok());
  EXPECT_EQ(h.recv_outcomes[2].status.code(), StatusCode::kUnavailable);
  EXPECT_EQ(h.sender().num_sessions() + h.receiver().num_sessions(), 0u);
}

TEST_F(KvSessionTest, ProtocolViolationsEndTheSession) {
  SessionHarness h(send_t_, recv_t_, clock_);
  ReceiveParams rp;
  rp.request_id = 1;
  rp.epoch = 1;
  rp.blocks = {1};
  Status done;
  rp.on_done = [&](const Status& s) { done = s; };
  ASSERT_TRUE(h.receiver().Open(std::move(rp)).ok());
  ControlMessage kv_done = MakeMessage(MessageType::kKvDone, 1, 1);
  kv_done.num_layers = 3;
  h.receiver().OnControlMessage(EncodeControlMessage(kv_done));  // KvDone before Hello
  EXPECT_EQ(done.code(), StatusCode::kFailedPrecondition);
  h.receiver().OnControlMessage("garbage");
  EXPECT_EQ(h.receiver().stats().bad_messages, 1u);
  EXPECT_EQ(h.receiver().num_sessions(), 0u);
  h.to_sender.clear();
}

TEST_F(KvSessionTest, SenderRefusesBadInputs) {
  SessionHarness h(send_t_, recv_t_, clock_);
  SendParams sp;
  sp.target = "not a target";
  EXPECT_EQ(h.sender().Open(std::move(sp)).code(), StatusCode::kInvalidArgument);
  // Mismatched block counts are refused and decode is told.
  EXPECT_EQ(h.Open(1, 1, {1, 2}, {1}).code(), StatusCode::kInvalidArgument);
  h.Pump();
  EXPECT_EQ(h.recv_outcomes[1].status.code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(h.Open(2, 1, {1}, {1}).ok());
  EXPECT_EQ(h.SendLayer(2, 3).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(h.SendLayer(2, 0).ok());
  EXPECT_EQ(h.SendLayer(2, 0).code(), StatusCode::kInvalidArgument);
  h.sender().Cancel(2, Status::Ok());
  h.Pump();
  EXPECT_EQ(h.sender().num_sessions() + h.receiver().num_sessions(), 0u);
}

}  // namespace
}  // namespace tandem::kv_transfer
