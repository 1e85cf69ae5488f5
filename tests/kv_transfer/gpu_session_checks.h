// Two-process checks every GPU backend (cuda_ipc, nccl) must pass, with the
// helper process (gpu_peer_main.cc) on `peer_device` and this process's
// transport `t`: KV sessions both ways land byte-exact with every other block
// untouched; kill -9 of either process mid-transfer ends the survivor's batches
// or session with an error within 5 s; cancel mid-transfer ends both sides.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <string>
#include <vector>

#include "common/base/clock.h"
#include "kv_transfer/kv_receiver.h"
#include "kv_transfer/kv_sender.h"
#include "tests/kv_transfer/gpu_transport_testing.h"
#include "tests/kv_transfer/peer_plan.h"

namespace tandem::kv_transfer::testing {

using SteadyClock = std::chrono::steady_clock;

inline double SecondsSince(SteadyClock::time_point t) {
  return std::chrono::duration<double>(SteadyClock::now() - t).count();
}

// The sender pool of peer_plan.h on this process's device.
inline std::vector<uint8_t> PeerPatternPool(const kv_cache::KvLayout& layout) {
  std::vector<uint8_t> pattern(layout.TotalBytes());
  for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = PeerPattern(i);
  return pattern;
}

// True when `got` (a receiver pool of kPeerRecvBlocks) holds the sender's
// pattern in kPeerDstBlocks and `fill` everywhere else (only the fill check
// when `landed` is false).
inline ::testing::AssertionResult PoolIs(const std::vector<uint8_t>& got, const kv_cache::KvLayout& layout, bool landed,
                                         uint8_t fill = 0xEE) {
  const size_t n = layout.BytesPerBlockLayer();
  for (int layer = 0; layer < layout.num_layers; ++layer) {
    for (int b = 0; b < layout.num_blocks; ++b) {
      int i = -1;
      for (size_t k = 0; k < kPeerDstBlocks.size(); ++k) {
        if (kPeerDstBlocks[k] == b) i = static_cast<int>(k);
      }
      if (i >= 0 && !landed) continue;
      for (size_t k = 0; k < n; ++k) {
        const size_t src = (static_cast<size_t>(layer) * kPeerSendBlocks + (i < 0 ? 0 : kPeerSrcBlocks[i])) * n;
        const uint8_t want = i < 0 ? fill : PeerPattern(src + k);
        if (got[layout.BlockOffset(layer, b) + k] != want) {
          return ::testing::AssertionFailure() << "layer " << layer << " block " << b << " byte " << k;
        }
      }
    }
  }
  return ::testing::AssertionSuccess();
}

// This process sends a session's layers into a KvReceiver in the helper.
inline void CheckSessionIntoPeer(Transport& t, const std::string& backend, int peer_device) {
  SessionPeer decode("recv-session", backend, peer_device, "30000");
  std::string target = Unhex(decode.process().ReadLine());
  ASSERT_FALSE(target.empty()) << "the helper did not open a session";
  kv_cache::KvLayout layout = PeerLayout(kPeerSendBlocks);
  DeviceSource pool(layout.TotalBytes());
  pool.Write(PeerPatternPool(layout));
  RegionId src = t.RegisterMemory(pool.data(), pool.size(), MemoryKind::kDevice)->id;
  SystemClock clock;
  Status sent = InternalError("not done");
  {
    KvSender sender(KvSenderConfig{.model_id = "peer-model", .layout = layout}, t, clock,
                    [&](RequestId, std::string m) { decode.Send(m); });
    SendParams p;
    p.target = target;
    p.source_blocks = kPeerSrcBlocks;
    p.on_done = [&](const Status& s) { sent = s; };
    ASSERT_TRUE(sender.Open(std::move(p)).ok());
    for (int layer = 0; layer < layout.num_layers; ++layer) {
      ASSERT_TRUE(sender.SendLayer(42, layer, LayerSource{src, layout.BlockOffset(layer, 0)}).ok());
      sender.Poll();
    }
    auto start = SteadyClock::now();
    while (sender.num_sessions() > 0 && SecondsSince(start) < 30) sender.Poll();
    ASSERT_EQ(sender.num_sessions(), 0u);
    EXPECT_EQ(sender.stats().writes_posted, 4u * 4);  // per layer: [0..3], [20,21], [9], [33]
  }
  EXPECT_TRUE(sent.ok()) << sent.ToString();
  EXPECT_EQ(decode.Pump(20'000, [](const std::string&) {}).value_or(""), "done OK");
  EXPECT_EQ(decode.process().ReadLine(), "landed ok");
  EXPECT_EQ(decode.process().ReadLine(), "untouched ok");
  EXPECT_TRUE(t.UnregisterMemory(src).ok());
  EXPECT_TRUE(t.Health().ok()) << t.Health().ToString();
}

// The helper runs a KvSender (a layer every `layer_delay_ms`) into a KvReceiver
// of this process; returns when the session ended or, with `kill_after_layer`
// >= 0, kills the helper once that many layers landed and expects the session
// to end with an error within 5 s (a 3 s lease; the receiver's connection
// reset on a two-sided backend).
inline void CheckSessionFromPeer(Transport& t, const std::string& backend, int peer_device, int layer_delay_ms,
                                 int kill_after_layers) {
  SessionPeer prefill("send-session", backend, peer_device, std::to_string(layer_delay_ms));
  kv_cache::KvLayout layout = PeerLayout(kPeerRecvBlocks);
  DeviceSource pool(layout.TotalBytes(), 0xEE);
  SystemClock clock;
  Status received = InternalError("not done");
  bool done = false;
  std::vector<int> layers;
  KvReceiver receiver(KvReceiverConfig{.model_id = "peer-model", .layout = layout}, t, clock,
                      [&](RequestId, std::string m) { prefill.Send(m); });
  ASSERT_TRUE(receiver.RegisterLanding(pool.data(), MemoryKind::kDevice).ok());
  ReceiveParams p;
  p.request_id = 42;
  p.epoch = 3;
  p.blocks = kPeerDstBlocks;
  p.lease_ms = kill_after_layers >= 0 ? 3000 : 30'000;
  p.on_layer = [&](int layer) { layers.push_back(layer); };
  p.on_done = [&](const Status& s) {
    received = s;
    done = true;
  };
  auto target = receiver.Open(std::move(p));
  ASSERT_TRUE(target.ok());
  prefill.process().Command("target " + Hex(*target));
  auto start = SteadyClock::now();
  bool killed = false;
  SteadyClock::time_point killed_at;
  while (!done && SecondsSince(start) < 30) {
    receiver.Poll();
    if (!killed) prefill.Pump(1, [&](const std::string& m) { receiver.OnControlMessage(m); });
    if (!killed && kill_after_layers >= 0 && static_cast<int>(layers.size()) >= kill_after_layers) {
      prefill.process().Kill();
      killed = true;
      killed_at = SteadyClock::now();
    }
  }
  ASSERT_TRUE(done);
  EXPECT_EQ(receiver.num_sessions(), 0u);
  std::vector<uint8_t> got = pool.Read();
  if (kill_after_layers < 0) {
    EXPECT_TRUE(received.ok()) << received.ToString();
    EXPECT_EQ(layers, (std::vector<int>{0, 1, 2, 3}));
    EXPECT_TRUE(PoolIs(got, layout, true));
  } else {
    ASSERT_TRUE(killed);
    EXPECT_FALSE(received.ok());
    EXPECT_LT(SecondsSince(killed_at), 5.0) << received.ToString();
    EXPECT_TRUE(PoolIs(got, layout, false)) << "a block it did not ask for changed";
  }
}

// kill -9 of the process owning the target memory mid-transfer: this writer's
// batches in flight end with Unavailable within 5 s, each exactly once.
inline void CheckKilledTargetEndsBatches(Transport& t, const std::string& backend, int peer_device) {
  constexpr uint64_t kBatch = 16 << 20;
  PeerTarget target(backend, peer_device, 4 * kBatch, 0);
  DeviceSource source(4 * kBatch, 1);
  ConformanceLink link(t, target);
  Status opened = OpenLink(link, source);
  ASSERT_TRUE(opened.ok()) << opened.ToString();
  std::set<TransferId> open;
  for (uint64_t i = 0; i < 8; ++i) {  // healthy batches first (two-sided: with their receives)
    std::optional<uint64_t> rid;
    auto id = link.Post({WriteOp{link.local, (i % 4) * kBatch, link.remote, (i % 4) * kBatch, kBatch}}, &rid);
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    if (i < 4) {
      ASSERT_TRUE(link.Wait(*id, rid).status.ok());
    } else {
      open.insert(*id);
    }
  }
  if (target.two_sided()) {  // writes whose receives never come: in flight until the abort
    for (uint64_t i = 0; i < 4; ++i) {
      open.insert(*t.PostWrites(link.peer, {{WriteOp{link.local, 0, link.remote, 0, kBatch}}}));
    }
  }
  target.process().Kill();
  auto killed_at = SteadyClock::now();
  bool failed = false;
  std::vector<TransferEvent> events;
  while (SecondsSince(killed_at) < 10 && (!failed || !open.empty())) {
    if (!target.two_sided() && !failed) {  // one-sided: keep writing until it notices
      auto id = t.PostWrites(link.peer, {{WriteOp{link.local, 0, link.remote, 0, kBatch}}});
      if (id.ok()) {
        open.insert(*id);
      } else {
        EXPECT_EQ(id.status().code(), StatusCode::kUnavailable) << id.status().ToString();
        failed = true;
      }
    }
    t.Poll(&events);
    for (const TransferEvent& e : events) {
      EXPECT_EQ(open.erase(e.id), 1u) << "an event for no open batch";
      if (!e.status.ok()) {
        EXPECT_EQ(e.status.code(), StatusCode::kUnavailable) << e.status.ToString();
        if (!failed) {
          EXPECT_LT(SecondsSince(killed_at), 5.0);
        }
        failed = true;
      }
    }
    events.clear();
  }
  EXPECT_TRUE(failed) << "no error after the target was killed";
  EXPECT_TRUE(open.empty()) << open.size() << " batches never ended";
  EXPECT_TRUE(t.Disconnect(link.peer).ok());
  EXPECT_TRUE(t.UnregisterMemory(link.local).ok());
  EXPECT_TRUE(t.Health().ok()) << t.Health().ToString();
}

// Cancel after two layers: the sender's session ends Cancelled once its posted
// batches let go, the receiver is told, nothing outside its blocks changed.
inline void CheckCancelMidTransfer(Transport& t, const std::string& backend, int peer_device) {
  SessionPeer decode("recv-session", backend, peer_device, "30000");
  std::string target = Unhex(decode.process().ReadLine());
  ASSERT_FALSE(target.empty());
  kv_cache::KvLayout layout = PeerLayout(kPeerSendBlocks);
  DeviceSource pool(layout.TotalBytes(), 3);
  RegionId src = t.RegisterMemory(pool.data(), pool.size(), MemoryKind::kDevice)->id;
  SystemClock clock;
  Status sent = InternalError("not done");
  {
    KvSender sender(KvSenderConfig{.model_id = "peer-model", .layout = layout}, t, clock,
                    [&](RequestId, std::string m) { decode.Send(m); });
    SendParams p;
    p.target = target;
    p.source_blocks = kPeerSrcBlocks;
    p.on_done = [&](const Status& s) { sent = s; };
    ASSERT_TRUE(sender.Open(std::move(p)).ok());
    ASSERT_TRUE(sender.SendLayer(42, 0, LayerSource{src, layout.BlockOffset(0, 0)}).ok());
    ASSERT_TRUE(sender.SendLayer(42, 1, LayerSource{src, layout.BlockOffset(1, 0)}).ok());
    sender.Cancel(42, CancelledError("client went away"));
    auto start = SteadyClock::now();
    while (sender.num_sessions() > 0 && SecondsSince(start) < 5) sender.Poll();
    ASSERT_EQ(sender.num_sessions(), 0u) << "the cancelled session did not end";
  }
  EXPECT_EQ(sent.code(), StatusCode::kCancelled) << sent.ToString();
  auto line = decode.Pump(5'000, [](const std::string&) {});
  ASSERT_TRUE(line.has_value());
  EXPECT_EQ(line->rfind("done CANCELLED", 0), 0u) << *line;
  EXPECT_EQ(decode.process().ReadLine(), "landed bad");
  EXPECT_EQ(decode.process().ReadLine(), "untouched ok");
  EXPECT_TRUE(t.UnregisterMemory(src).ok());
}

}  // namespace tandem::kv_transfer::testing
