// Sender and receiver on separate threads, each owning its transport, joined by
// LocalFabric (the one thread-safe piece) and mutex-protected control queues, as
// on two nodes. Meant for the TSan build as much as for the result.
#include <gtest/gtest.h>

#include <atomic>
#include <deque>
#include <mutex>
#include <random>
#include <thread>

#include "kv_transfer/kv_receiver.h"
#include "kv_transfer/kv_sender.h"
#include "kv_transfer/local/local_transport.h"
#include "tests/kv_transfer/session_harness.h"

namespace tandem::kv_transfer {
namespace {

struct Mailbox {
  std::mutex mu;
  std::deque<std::string> items;
  void Put(std::string s) {
    std::lock_guard<std::mutex> lock(mu);
    items.push_back(std::move(s));
  }
  std::deque<std::string> TakeAll() {
    std::lock_guard<std::mutex> lock(mu);
    return std::exchange(items, {});
  }
};

TEST(KvThreadsTest, SenderAndReceiverOnTheirOwnThreads) {
  constexpr int kRequests = 16;
  LocalFabric fabric;
  SystemClock clock;
  kv_cache::KvLayout send_layout = testing::SmallLayout(64), recv_layout = testing::SmallLayout(kRequests * 2);
  std::vector<uint8_t> send_pool(send_layout.TotalBytes()), recv_pool(recv_layout.TotalBytes(), 0);
  std::mt19937 rng(5);
  for (auto& b : send_pool) b = static_cast<uint8_t>(rng());
  Mailbox targets, to_receiver, to_sender;  // targets: "id:encoded KvTarget"
  std::atomic<int> recv_ok{0}, recv_failed{0};
  std::atomic<bool> sender_done{false};

  std::thread decode([&] {
    LocalTransport t(fabric);
    KvReceiver r(KvReceiverConfig{.model_id = "tiny", .layout = recv_layout}, t, clock,
                 [&](RequestId, std::string m) { to_sender.Put(std::move(m)); });
    TANDEM_CHECK_OK(r.RegisterLanding(recv_pool.data(), MemoryKind::kHost));
    for (int id = 0; id < kRequests; ++id) {
      ReceiveParams p;
      p.request_id = id;
      p.epoch = 1;
      p.blocks = {2 * id, 2 * id + 1};
      p.lease_ms = 30'000;
      p.on_done = [&](const Status& s) { (s.ok() ? recv_ok : recv_failed)++; };
      targets.Put(*r.Open(std::move(p)));
    }
    while (r.num_sessions() > 0) {
      r.Poll();
      for (std::string& m : to_receiver.TakeAll()) r.OnControlMessage(m);
      std::this_thread::yield();
    }
  });
  std::thread prefill([&] {
    LocalTransport t(fabric);
    KvSender s(KvSenderConfig{.model_id = "tiny", .layout = send_layout}, t, clock,
               [&](RequestId, std::string m) { to_receiver.Put(std::move(m)); });
    RegionId src = t.RegisterMemory(send_pool.data(), send_pool.size(), MemoryKind::kHost)->id;
    int opened = 0, done = 0;
    while (done < kRequests) {
      for (std::string& target : targets.TakeAll()) {
        RequestId id = DecodeKvTarget(target)->request_id;
        SendParams p;
        p.target = std::move(target);
        p.source_blocks = {static_cast<BlockId>(id), static_cast<BlockId>(63 - id)};
        p.on_done = [&](const Status&) { ++done; };
        TANDEM_CHECK_OK(s.Open(std::move(p)));
        for (int layer = 0; layer < send_layout.num_layers; ++layer) {
          TANDEM_CHECK_OK(s.SendLayer(id, layer, LayerSource{src, send_layout.BlockOffset(layer, 0)}));
        }
        ++opened;
      }
      s.Poll();
      for (std::string& m : to_sender.TakeAll()) s.OnControlMessage(m);
      std::this_thread::yield();
    }
    TANDEM_CHECK_OK(t.UnregisterMemory(src));
    sender_done = true;
  });
  prefill.join();
  decode.join();
  EXPECT_TRUE(sender_done);
  EXPECT_EQ(recv_ok.load(), kRequests);
  EXPECT_EQ(recv_failed.load(), 0);
  size_t n = testing::OracleBlockBytes(send_layout);
  for (int id = 0; id < kRequests; ++id) {
    for (int layer = 0; layer < send_layout.num_layers; ++layer) {
      EXPECT_EQ(std::memcmp(&send_pool[testing::OracleOffset(send_layout, layer, id)],
                            &recv_pool[testing::OracleOffset(recv_layout, layer, 2 * id)], n),
                0);
      EXPECT_EQ(std::memcmp(&send_pool[testing::OracleOffset(send_layout, layer, 63 - id)],
                            &recv_pool[testing::OracleOffset(recv_layout, layer, 2 * id + 1)], n),
                0);
    }
  }
}

}  // namespace
}  // namespace tandem::kv_transfer
