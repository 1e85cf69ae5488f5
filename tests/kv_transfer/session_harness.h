// Test harness: one KvSender and one KvReceiver over a given pair of transports,
// with the control plane modelled as two in-order queues the test can inspect,
// drop or hold. Pools are filled with random bytes; the oracle for "landed
// byte-exact" is an independent offset formula, not KvLayout::BlockOffset.
#pragma once

#include <cstring>
#include <deque>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "common/base/clock.h"
#include "kv_transfer/kv_receiver.h"
#include "kv_transfer/kv_sender.h"

namespace tandem::kv_transfer::testing {

inline kv_cache::KvLayout SmallLayout(int num_blocks) {
  kv_cache::KvLayout l;
  l.num_layers = 3;
  l.num_kv_heads = 2;
  l.head_dim = 8;
  l.block_size = 4;
  l.num_blocks = num_blocks;
  l.dtype = DType::kBF16;
  return l;
}

// Bytes of (layer, block) computed from first principles:
// pool [layers, blocks, 2, heads, block_size, head_dim] of 2-byte elements.
inline size_t OracleOffset(const kv_cache::KvLayout& l, int layer, int block) {
  size_t block_bytes = 2ull * l.num_kv_heads * l.block_size * l.head_dim * 2;
  return (static_cast<size_t>(layer) * l.num_blocks + block) * block_bytes;
}
inline size_t OracleBlockBytes(const kv_cache::KvLayout& l) {
  return 2ull * l.num_kv_heads * l.block_size * l.head_dim * 2;
}

struct Outcome {
  bool done = false;
  Status status;
  std::vector<int> layers;  // receiver: on_layer order
};

class SessionHarness {
 public:
  SessionHarness(Transport& send_transport, Transport& recv_transport, Clock& clock, int send_blocks = 32,
                 int recv_blocks = 48, std::string recv_model = "tiny")
      : send_layout_(SmallLayout(send_blocks)),
        recv_layout_(SmallLayout(recv_blocks)),
        send_pool_(send_layout_.TotalBytes()),
        recv_pool_(recv_layout_.TotalBytes(), 0xEE),
        send_t_(send_transport) {
    std::mt19937 rng(1234);
    for (auto& b : send_pool_) b = static_cast<uint8_t>(rng());
    KvSenderConfig sc{.model_id = "tiny", .layout = send_layout_};
    sender_.emplace(sc, send_transport, clock,
                    [this](RequestId id, std::string m) { to_receiver.emplace_back(id, std::move(m)); });
    KvReceiverConfig rc{.model_id = std::move(recv_model), .layout = recv_layout_};
    receiver_.emplace(rc, recv_transport, clock,
                      [this](RequestId id, std::string m) { to_sender.emplace_back(id, std::move(m)); });
    TANDEM_CHECK_OK(receiver_->RegisterLanding(recv_pool_.data(), MemoryKind::kHost));
    auto reg = send_transport.RegisterMemory(send_pool_.data(), send_pool_.size(), MemoryKind::kHost);
    TANDEM_CHECK_OK(reg.status());
    source_region_ = reg->id;
  }
  ~SessionHarness() { TANDEM_CHECK_OK(send_t_.UnregisterMemory(source_region_)); }

  KvSender& sender() { return *sender_; }
  KvReceiver& receiver() { return *receiver_; }
  // Ends the receiving side (its transport may go next, as a dead process's would).
  void DropReceiver() { receiver_.reset(); }
  const kv_cache::KvLayout& send_layout() const { return send_layout_; }
  const kv_cache::KvLayout& recv_layout() const { return recv_layout_; }
  std::vector<uint8_t>& recv_pool() { return recv_pool_; }

  // Opens both ends; returns the receiver's status if the receiver refused.
  Status Open(RequestId id, Epoch epoch, std::vector<BlockId> src, std::vector<BlockId> dst, uint32_t lease_ms = 1000) {
    ReceiveParams rp;
    rp.request_id = id;
    rp.epoch = epoch;
    rp.blocks = dst;
    rp.lease_ms = lease_ms;
    rp.on_layer = [this, id](int layer) { recv_outcomes[id].layers.push_back(layer); };
    rp.on_done = [this, id](const Status& s) { Record(recv_outcomes[id], s); };
    StatusOr<std::string> target = receiver_->Open(std::move(rp));
    TANDEM_RETURN_IF_ERROR(target.status());
    SendParams sp;
    sp.target = *target;
    sp.source_blocks = std::move(src);
    sp.on_done = [this, id](const Status& s) { Record(send_outcomes[id], s); };
    return sender_->Open(std::move(sp));
  }
  Status SendLayer(RequestId id, int layer) {
    return sender_->SendLayer(id, layer, LayerSource{source_region_, send_layout_.BlockOffset(layer, 0)});
  }
  Status SendAllLayers(RequestId id) {
    for (int l = 0; l < send_layout_.num_layers; ++l) TANDEM_RETURN_IF_ERROR(SendLayer(id, l));
    return Status::Ok();
  }
  // Polls both ends and delivers control messages until nothing moves or `rounds` pass.
  void Pump(int rounds = 200) {
    for (int i = 0; i < rounds; ++i) {
      sender_->Poll();
      receiver_->Poll();
      bool moved = false;
      while (!to_receiver.empty()) {
        auto m = std::move(to_receiver.front());
        to_receiver.pop_front();
        if (!drop_to_receiver) receiver_->OnControlMessage(m.second);
        moved = true;
      }
      while (!to_sender.empty()) {
        auto m = std::move(to_sender.front());
        to_sender.pop_front();
        sender_->OnControlMessage(m.second);
        moved = true;
      }
      if (!moved && i > 20) break;
    }
  }
  // True when every byte of src layer/block pairs landed at the dst blocks.
  bool Landed(const std::vector<BlockId>& src, const std::vector<BlockId>& dst) const {
    size_t n = OracleBlockBytes(send_layout_);
    for (int layer = 0; layer < send_layout_.num_layers; ++layer) {
      for (size_t i = 0; i < src.size(); ++i) {
        const uint8_t* a = send_pool_.data() + OracleOffset(send_layout_, layer, src[i]);
        const uint8_t* b = recv_pool_.data() + OracleOffset(recv_layout_, layer, dst[i]);
        if (std::memcmp(a, b, n) != 0) return false;
      }
    }
    return true;
  }
  // True when no landing byte outside the given blocks changed from the 0xEE fill.
  bool UntouchedExcept(const std::vector<BlockId>& dst) const {
    std::vector<bool> mine(recv_layout_.num_blocks, false);
    for (BlockId b : dst) mine[b] = true;
    size_t n = OracleBlockBytes(recv_layout_);
    for (int layer = 0; layer < recv_layout_.num_layers; ++layer) {
      for (int b = 0; b < recv_layout_.num_blocks; ++b) {
        if (mine[b]) continue;
        const uint8_t* p = recv_pool_.data() + OracleOffset(recv_layout_, layer, b);
        for (size_t i = 0; i < n; ++i) {
          if (p[i] != 0xEE) return false;
        }
      }
    }
    return true;
  }
  // Count of landing-pool bytes changed from the 0xEE fill.
  size_t TouchedBytes() const {
    size_t n = 0;
    for (uint8_t b : recv_pool_) n += b != 0xEE;
    return n;
  }

  std::deque<std::pair<RequestId, std::string>> to_receiver, to_sender;
  bool drop_to_receiver = false;
  std::map<RequestId, Outcome> send_outcomes, recv_outcomes;

 private:
  static void Record(Outcome& o, const Status& s) {
    TANDEM_CHECK(!o.done) << "session ended twice";
    o.done = true;
    o.status = s;
  }
  kv_cache::KvLayout send_layout_, recv_layout_;
  std::vector<uint8_t> send_pool_, recv_pool_;
  Transport& send_t_;
  RegionId source_region_ = kInvalidHandle;
  std::optional<KvSender> sender_;
  std::optional<KvReceiver> receiver_;
};

}  // namespace tandem::kv_transfer::testing
