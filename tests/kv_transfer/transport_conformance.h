// Conformance checks every Transport backend must pass (local, fault(local),
// two-sided local, ucx, cuda_ipc, nccl): batches of writes land byte-exact and
// nothing outside them changes, bounds are refused before anything is posted,
// every batch yields exactly one event (also after Cancel and Disconnect),
// malformed addresses and descriptors are refused. The oracle is a plain memcpy
// into a copy of the target's initial contents.
//
// The sender is always a transport of this process writing from a
// ConformanceSource (host or device memory); the target is a ConformanceTarget:
// a transport of this process (InProcessTarget) or of a helper process (the GPU
// backends: CUDA IPC handles do not open in the exporting process, NCCL puts one
// rank per process). Two-sided targets get the mirror receive of every batch.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "kv_transfer/transport.h"

namespace tandem::kv_transfer::testing {

// The sender's memory.
class ConformanceSource {
 public:
  virtual ~ConformanceSource() = default;
  virtual void* data() = 0;
  virtual size_t size() const = 0;
  virtual MemoryKind kind() const = 0;
  // Sets the contents (bytes.size() == size()).
  virtual void Write(const std::vector<uint8_t>& bytes) = 0;
};

class HostSource final : public ConformanceSource {
 public:
  explicit HostSource(size_t size) : bytes_(size) {}
  void* data() override { return bytes_.data(); }
  size_t size() const override { return bytes_.size(); }
  MemoryKind kind() const override { return MemoryKind::kHost; }
  void Write(const std::vector<uint8_t>& bytes) override {
    TANDEM_CHECK(bytes.size() == bytes_.size());
    std::memcpy(bytes_.data(), bytes.data(), bytes.size());  // the registered address stays
  }

 private:
  std::vector<uint8_t> bytes_;
};

// The side that owns the destination region.
class ConformanceTarget {
 public:
  virtual ~ConformanceTarget() = default;
  virtual std::string Address() = 0;     // the target transport's WorkerAddress
  virtual std::string Descriptor() = 0;  // its registered region of size() bytes
  virtual size_t size() const = 0;
  virtual bool two_sided() const = 0;
  virtual std::vector<uint8_t> Contents() = 0;  // the region's bytes now
  // Polls the target's transport; appends the ids of receive batches that ended
  // (two-sided) with their status.
  virtual void Progress(std::map<uint64_t, Status>* receive_events) = 0;
  // Two-sided only: joins the sender's connection (once per token).
  virtual Status Accept(const std::string& token) = 0;
  // Two-sided only: posts the receive batch for one write batch: the region
  // ranges (offset, length) the writes target, in op order. Returns its id.
  virtual StatusOr<uint64_t> PostReceives(const std::vector<std::pair<uint64_t, uint64_t>>& ranges) = 0;
};

// A target transport of this process with host memory filled with `fill`.
class InProcessTarget final : public ConformanceTarget {
 public:
  InProcessTarget(Transport& t, size_t size, uint8_t fill = 0) : t_(t), bytes_(size, fill) {
    auto reg = t_.RegisterMemory(bytes_.data(), bytes_.size(), MemoryKind::kHost);
    TANDEM_CHECK_OK(reg.status());
    region_ = *reg;
  }
  ~InProcessTarget() override { t_.UnregisterMemory(region_.id).IgnoreError(); }
  std::string Address() override { return t_.WorkerAddress(); }
  std::string Descriptor() override { return region_.descriptor; }
  size_t size() const override { return bytes_.size(); }
  bool two_sided() const override { return !t_.Capabilities().one_sided; }
  std::vector<uint8_t> Contents() override { return bytes_; }
  void Progress(std::map<uint64_t, Status>* receive_events) override {
    std::vector<TransferEvent> events;
    t_.Poll(&events);
    for (TransferEvent& e : events) (*receive_events)[e.id] = std::move(e.status);
  }
  Status Accept(const std::string& token) override {
    if (peers_.count(token) > 0) return Status::Ok();
    TANDEM_ASSIGN_OR_RETURN(PeerId peer, t_.Accept(token));
    peers_[token] = peer;
    last_peer_ = peer;
    return Status::Ok();
  }
  StatusOr<uint64_t> PostReceives(const std::vector<std::pair<uint64_t, uint64_t>>& ranges) override {
    std::vector<WriteOp> ops;
    for (auto [offset, length] : ranges) ops.push_back(WriteOp{region_.id, offset, kInvalidHandle, 0, length});
    return t_.PostReceives(last_peer_, ops);
  }
  Transport& transport() { return t_; }
  RegionId region() const { return region_.id; }

 private:
  Transport& t_;
  std::vector<uint8_t> bytes_;
  RegisteredRegion region_;
  std::map<std::string, PeerId> peers_;
  PeerId last_peer_ = kInvalidHandle;
};

// One connection from `sender` to a target, plus the loaded region.
struct ConformanceLink {
  ConformanceLink(Transport& s, ConformanceTarget& t) : sender(s), target(t) {}
  Transport& sender;
  ConformanceTarget& target;
  RegionId local = kInvalidHandle;
  PeerId peer = kInvalidHandle;
  RemoteRegionId remote = kInvalidHandle;
  std::map<uint64_t, Status> receive_events;  // two-sided: receive batches that ended

  // Posts one batch (and its mirror receives on a two-sided target).
  StatusOr<TransferId> Post(const std::vector<WriteOp>& ops, std::optional<uint64_t>* receive_id) {
    TANDEM_ASSIGN_OR_RETURN(TransferId id, sender.PostWrites(peer, ops));
    if (target.two_sided()) {
      std::vector<std::pair<uint64_t, uint64_t>> ranges;
      for (const WriteOp& op : ops) ranges.emplace_back(op.remote_offset, op.length);
      TANDEM_ASSIGN_OR_RETURN(uint64_t rid, target.PostReceives(ranges));
      *receive_id = rid;
    }
    return id;
  }
  // Polls both sides until `id` ended (and its receive, if any); its event.
  TransferEvent Wait(TransferId id, std::optional<uint64_t> receive_id, int seconds = 30) {
    std::vector<TransferEvent> events;
    std::optional<TransferEvent> mine;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while (std::chrono::steady_clock::now() < deadline) {
      sender.Poll(&events);
      target.Progress(&receive_events);
      for (const TransferEvent& e : events) {
        if (e.id == id) {
          EXPECT_FALSE(mine.has_value()) << "two events for batch " << id;
          mine = e;
        }
      }
      events.clear();
      if (mine && (!receive_id || receive_events.count(*receive_id) > 0)) {
        if (receive_id) {
          EXPECT_EQ(receive_events[*receive_id].code(), mine->status.code())
              << "receive: " << receive_events[*receive_id].ToString();
        }
        return *mine;
      }
    }
    return TransferEvent{kInvalidHandle, DeadlineExceededError("no event"), 0};
  }
};

// Connects `sender` to `target` and loads its region; `source` is registered.
inline Status OpenLink(ConformanceLink& link, ConformanceSource& source) {
  TANDEM_ASSIGN_OR_RETURN(RegisteredRegion local,
                          link.sender.RegisterMemory(source.data(), source.size(), source.kind()));
  link.local = local.id;
  TANDEM_ASSIGN_OR_RETURN(link.peer, link.sender.Connect(link.target.Address()));
  TANDEM_ASSIGN_OR_RETURN(link.remote, link.sender.LoadRemoteRegion(link.peer, link.target.Descriptor()));
  if (link.target.two_sided()) {
    TANDEM_ASSIGN_OR_RETURN(std::string token, link.sender.ConnectionToken(link.peer));
    TANDEM_RETURN_IF_ERROR(link.target.Accept(token));
  }
  return Status::Ok();
}

inline void CloseLink(ConformanceLink& link) {
  EXPECT_TRUE(link.sender.UnloadRemoteRegion(link.remote).ok());
  EXPECT_TRUE(link.sender.Disconnect(link.peer).ok());
  EXPECT_TRUE(link.sender.UnregisterMemory(link.local).ok());
}

// Random disjoint-or-not batches, a batch of many tiny ops and one of long ops
// land byte-exact; the whole target region is compared after every batch.
// REQUIRES: source.size() >= 1 MiB, target.size() >= 1.5 MiB.
inline void CheckBatchesLandByteExact(Transport& sender, ConformanceSource& source, ConformanceTarget& target) {
  std::mt19937 rng(99);
  std::vector<uint8_t> src(source.size());
  for (auto& b : src) b = static_cast<uint8_t>(rng());
  source.Write(src);
  std::vector<uint8_t> expect = target.Contents();
  const size_t dst_size = expect.size();
  ASSERT_GE(src.size(), size_t{1} << 20);
  ASSERT_GE(dst_size, size_t{3} << 19);
  ConformanceLink link{sender, target};
  Status opened = OpenLink(link, source);
  ASSERT_TRUE(opened.ok()) << opened.ToString();
  auto run = [&](const std::vector<WriteOp>& ops, const char* what) {
    std::optional<uint64_t> rid;
    auto id = link.Post(ops, &rid);
    ASSERT_TRUE(id.ok()) << what << ": " << id.status().ToString();
    TransferEvent e = link.Wait(*id, rid);
    ASSERT_TRUE(e.status.ok()) << what << ": " << e.status.ToString();
    uint64_t total = 0;
    for (const WriteOp& op : ops) {
      total += op.length;
      std::memcpy(expect.data() + op.remote_offset, src.data() + op.local_offset, op.length);
    }
    EXPECT_EQ(e.bytes, total) << what;
    std::vector<uint8_t> got = target.Contents();
    ASSERT_EQ(got.size(), expect.size());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i], expect[i]) << what << ": first difference at byte " << i;
    }
  };
  for (int round = 0; round < 5; ++round) {
    std::vector<WriteOp> ops;
    std::vector<bool> used(dst_size, false);
    bool overlap = false;
    for (int i = 0; i < 16; ++i) {
      uint64_t len = 1 + rng() % 40000;
      uint64_t lo = rng() % (src.size() - len), ro = rng() % (dst_size - len);
      ops.push_back(WriteOp{link.local, lo, link.remote, ro, len});
      for (uint64_t k = ro; k < ro + len; ++k) {
        overlap = overlap || used[k];
        used[k] = true;
      }
    }
    if (overlap) {  // writes within one batch have no defined order: one op per batch
      for (const WriteOp& op : ops) run({op}, "single op");
    } else {
      run(ops, "random batch");
    }
  }
  std::vector<WriteOp> tiny;  // more ops than one run-copy launch takes
  for (uint64_t i = 0; i < 1500; ++i) tiny.push_back(WriteOp{link.local, i * 131 + 7, link.remote, i * 97 + 3, 64});
  run(tiny, "1500 tiny ops");
  run({WriteOp{link.local, 16, link.remote, 4096, 768 << 10},
       WriteOp{link.local, 800 << 10, link.remote, 1 << 20, 200 << 10},
       WriteOp{link.local, 5, link.remote, 1000, 3000}},
      "long and short ops");
  run({}, "empty batch");
  // Bounds and handles: InvalidArgument, nothing posted.
  const std::vector<WriteOp> refused = {
      WriteOp{link.local, 0, link.remote, dst_size - 10, 11},  // past the remote end
      WriteOp{link.local, src.size(), link.remote, 0, 1},      // past the local end
      WriteOp{link.local, 0, link.remote, ~0ull - 2, 8},       // wraps around
      WriteOp{link.local, 0, link.remote, 0, 0},               // empty
      WriteOp{link.local + 1000, 0, link.remote, 0, 8},        // unknown local region
      WriteOp{link.local, 0, link.remote + 1000, 0, 8},        // unknown remote region
  };
  for (const WriteOp& op : refused) {
    EXPECT_EQ(sender.PostWrites(link.peer, std::span<const WriteOp>(&op, 1)).status().code(),
              StatusCode::kInvalidArgument)
        << op.local_offset << " " << op.remote_offset << " " << op.length;
  }
  EXPECT_EQ(sender.PostWrites(link.peer + 1000, {}).status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(target.Contents() == expect) << "a refused write changed the target";
  CloseLink(link);
}

// Every batch ends exactly once after Cancel and Disconnect; the peer is gone after.
inline void CheckCancelAndDisconnectEndEveryBatch(Transport& sender, ConformanceSource& source,
                                                  ConformanceTarget& target) {
  ConformanceLink link{sender, target};
  Status opened = OpenLink(link, source);
  ASSERT_TRUE(opened.ok()) << opened.ToString();
  std::set<TransferId> ids;
  for (uint64_t i = 0; i < 8; ++i) {
    std::optional<uint64_t> rid;
    auto id = link.Post({WriteOp{link.local, i << 17, link.remote, i << 17, 1 << 17}}, &rid);
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    ids.insert(*id);
  }
  sender.Cancel(*ids.begin());
  sender.Cancel(*ids.rbegin() + 1000);  // unknown: ignored
  ASSERT_TRUE(sender.Disconnect(link.peer).ok());
  std::map<TransferId, Status> ended;
  std::vector<TransferEvent> events;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (ended.size() < ids.size() && std::chrono::steady_clock::now() < deadline) {
    sender.Poll(&events);
    target.Progress(&link.receive_events);
    for (const TransferEvent& e : events) {
      EXPECT_EQ(ids.count(e.id), 1u) << "event for an unknown batch";
      EXPECT_TRUE(ended.emplace(e.id, e.status).second) << "two events for batch " << e.id;
    }
    events.clear();
  }
  ASSERT_EQ(ended.size(), ids.size()) << "a batch never ended after Cancel + Disconnect";
  EXPECT_NE(ended[*ids.begin()].code(), StatusCode::kOk) << "the cancelled batch reported success";
  for (int i = 0; i < 100; ++i) {
    sender.Poll(&events);
    target.Progress(&link.receive_events);
  }
  EXPECT_TRUE(events.empty()) << "events after the last batch ended";
  EXPECT_EQ(sender.PostWrites(link.peer, {}).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(sender.LoadRemoteRegion(link.peer, target.Descriptor()).status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(sender.UnregisterMemory(link.local).ok());
}

// Malformed and truncated addresses, descriptors and registrations are refused.
inline void CheckMalformedInputRefused(Transport& sender, ConformanceTarget& target) {
  const std::string address = target.Address(), descriptor = target.Descriptor();
  EXPECT_FALSE(sender.Connect("junk").ok());
  for (size_t n = 0; n < address.size(); ++n) {
    EXPECT_FALSE(sender.Connect(address.substr(0, n)).ok()) << "address cut at " << n;
  }
  EXPECT_FALSE(sender.Connect(address + "x").ok()) << "address with a trailing byte";
  auto peer = sender.Connect(address);
  ASSERT_TRUE(peer.ok()) << peer.status().ToString();
  EXPECT_FALSE(sender.LoadRemoteRegion(*peer, "junk").ok());
  for (size_t n = 0; n < descriptor.size(); ++n) {
    EXPECT_FALSE(sender.LoadRemoteRegion(*peer, descriptor.substr(0, n)).ok()) << "descriptor cut at " << n;
  }
  EXPECT_FALSE(sender.LoadRemoteRegion(*peer, descriptor + "x").ok());
  EXPECT_EQ(sender.LoadRemoteRegion(*peer + 1000, descriptor).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(sender.UnloadRemoteRegion(123456).code(), StatusCode::kNotFound);
  EXPECT_EQ(sender.UnregisterMemory(123456).code(), StatusCode::kNotFound);
  EXPECT_EQ(sender.RegisterMemory(nullptr, 8, MemoryKind::kHost).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(sender.Disconnect(*peer).ok());
  EXPECT_EQ(sender.Disconnect(*peer).code(), StatusCode::kNotFound);
}

// All of the above with host memory on both sides, the target in this process.
inline void CheckHostTransportConforms(Transport& sender, Transport& receiver) {
  HostSource source(1 << 20);
  {
    InProcessTarget target(receiver, 3 << 19, 0x5a);
    CheckBatchesLandByteExact(sender, source, target);
  }
  {
    InProcessTarget target(receiver, 1 << 20);
    CheckCancelAndDisconnectEndEveryBatch(sender, source, target);
  }
  InProcessTarget target(receiver, 64);
  CheckMalformedInputRefused(sender, target);
}

}  // namespace tandem::kv_transfer::testing
