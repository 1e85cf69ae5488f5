// Conformance checks every Transport backend must pass (local, ucx): batches of
// writes land byte-exact, bounds are refused before anything is posted, every
// batch yields exactly one event. The oracle is a plain memcpy into a copy.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "kv_transfer/transport.h"

namespace tandem::kv_transfer::testing {

// Polls both transports until `a` reports `id` (or gives up); returns its event.
inline TransferEvent WaitEvent(Transport& a, Transport& b, TransferId id, int max_rounds = 200000) {
  std::vector<TransferEvent> events;
  for (int i = 0; i < max_rounds; ++i) {
    a.Poll(&events);
    b.Poll(&events);
    for (const TransferEvent& e : events) {
      if (e.id == id) return e;
    }
  }
  return TransferEvent{kInvalidHandle, DeadlineExceededError("no event"), 0};
}

inline void CheckBatchesLandByteExact(Transport& sender, Transport& receiver) {
  std::mt19937 rng(99);
  std::vector<uint8_t> src(1 << 20), dst(3 << 19, 0), expect(3 << 19, 0);
  for (auto& b : src) b = static_cast<uint8_t>(rng());
  auto local = sender.RegisterMemory(src.data(), src.size(), MemoryKind::kHost);
  auto remote_reg = receiver.RegisterMemory(dst.data(), dst.size(), MemoryKind::kHost);
  ASSERT_TRUE(local.ok() && remote_reg.ok());
  auto peer = sender.Connect(receiver.WorkerAddress());
  ASSERT_TRUE(peer.ok()) << peer.status().ToString();
  auto remote = sender.LoadRemoteRegion(*peer, remote_reg->descriptor);
  ASSERT_TRUE(remote.ok()) << remote.status().ToString();
  for (int round = 0; round < 5; ++round) {
    std::vector<WriteOp> ops;
    for (int i = 0; i < 16; ++i) {
      uint64_t len = 1 + rng() % 40000;
      uint64_t lo = rng() % (src.size() - len), ro = rng() % (dst.size() - len);
      ops.push_back(WriteOp{local->id, lo, *remote, ro, len});
      std::memcpy(expect.data() + ro, src.data() + lo, len);  // later ops win, as posted
    }
    // Overlapping writes within a batch have no defined order: keep them disjoint by
    // re-running the oracle only where no two ops overlap.
    std::vector<int> owner(dst.size(), -1);
    bool overlap = false;
    for (size_t i = 0; i < ops.size(); ++i) {
      for (uint64_t k = ops[i].remote_offset; k < ops[i].remote_offset + ops[i].length; ++k) {
        if (owner[k] >= 0) overlap = true;
        owner[k] = static_cast<int>(i);
      }
    }
    if (overlap) {  // redo this round with a single op per batch, in order
      for (const WriteOp& op : ops) {
        auto id = sender.PostWrites(*peer, std::span<const WriteOp>(&op, 1));
        ASSERT_TRUE(id.ok());
        TransferEvent e = WaitEvent(sender, receiver, *id);
        ASSERT_TRUE(e.status.ok()) << e.status.ToString();
      }
    } else {
      auto id = sender.PostWrites(*peer, ops);
      ASSERT_TRUE(id.ok()) << id.status().ToString();
      TransferEvent e = WaitEvent(sender, receiver, *id);
      ASSERT_TRUE(e.status.ok()) << e.status.ToString();
      uint64_t total = 0;
      for (const WriteOp& op : ops) total += op.length;
      EXPECT_EQ(e.bytes, total);
    }
    ASSERT_EQ(std::memcmp(dst.data(), expect.data(), dst.size()), 0) << "round " << round;
  }
  // Bounds: nothing posted, InvalidArgument.
  WriteOp past{local->id, 0, *remote, dst.size() - 10, 11};
  EXPECT_EQ(sender.PostWrites(*peer, std::span<const WriteOp>(&past, 1)).status().code(),
            StatusCode::kInvalidArgument);
  WriteOp local_past{local->id, src.size(), *remote, 0, 1};
  EXPECT_EQ(sender.PostWrites(*peer, std::span<const WriteOp>(&local_past, 1)).status().code(),
            StatusCode::kInvalidArgument);
  WriteOp wrap{local->id, 0, *remote, ~0ull - 2, 8};
  EXPECT_EQ(sender.PostWrites(*peer, std::span<const WriteOp>(&wrap, 1)).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_FALSE(sender.LoadRemoteRegion(*peer, "junk").ok());
  EXPECT_FALSE(sender.Connect("junk").ok());
  EXPECT_TRUE(sender.UnloadRemoteRegion(*remote).ok());
  EXPECT_TRUE(sender.Disconnect(*peer).ok());
  EXPECT_TRUE(sender.UnregisterMemory(local->id).ok());
  EXPECT_TRUE(receiver.UnregisterMemory(remote_reg->id).ok());
  EXPECT_EQ(receiver.UnregisterMemory(remote_reg->id).code(), StatusCode::kNotFound);
}

}  // namespace tandem::kv_transfer::testing
