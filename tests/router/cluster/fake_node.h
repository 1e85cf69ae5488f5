// FakeNode: a scripted node for router cluster tests. It dials the router's
// control address, registers (role, address, capacity), heartbeats on its own
// thread, records every request the router sends, and streams scripted Tokens:
//   decode:  Reserve -> ReserveReply (needed runs, or none = whole prompt
//            cached); PrefillRequest without reservation (local path) -> Ack
//            and stream; StartStream() (called when a fake prefill "finished")
//            streams for a remote prefill; Cancel/Release -> Ack (+ ABORT entry;
//            with SetCancelFailsHandoff, an ERROR entry at once for a reservation).
//            RefuseForNoRoom(n) answers the next n of them "no room";
//            SetRefuseAsDraining answers them Unavailable("draining"), as a
//            draining node does before its heartbeat says so.
//   prefill: PrefillRequest -> Ack (or refusal), then on_prefill once it has the
//            reservation (in the request, or in the PrefillTarget that follows one sent
//            beside the Reserve: Ack, or NotFound for a request it does not hold);
//            a Cancel of a request it does not hold refuses that epoch when it comes.
//   both:    Drain -> Ack, and its heartbeats say draining from then on.
// Kill() closes the connection (a crash as the router sees it);
// StopHeartbeats() keeps it open but silent. SetCacheReport() rides the next
// heartbeat (registered block size: kFakeBlockSize, model "tiny").
// Thread rule: thread-safe; handlers on I/O threads, streams on own threads.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <thread>
#include <vector>

#include "common/base/ids.h"
#include "common/net/event_loop.h"
#include "common/net/rpc_client.h"
#include "common/proto/messages.h"

namespace tandem::router::cluster::testing {

inline constexpr char kToken[] = "router-cluster-test-token-0123456789";
inline constexpr int32_t kFakeBlockSize = 4;  // tokens per KV block the fake nodes register

struct NodeScript {
  std::vector<TokenId> tokens;  // emitted one per step
  proto::FinishReason finish = proto::FINISH_REASON_STOP;
  int32_t cached_tokens = 0;  // on the finishing entry
  int hold_after = -1;        // stop emitting after this many tokens (>= 0)
  int step_ms = 5;
};

// NodeCapacity.max_running_requests of every fake node.
inline constexpr int kFakeMaxRunning = 64;

class FakeNode {
 public:
  FakeNode(net::EventLoop& loop, const std::string& router_address, proto::NodeRole role, std::string name,
           int64_t free_blocks = 100)
      : role_(role), name_(std::move(name)) {
    net::RpcClientConfig config;
    config.rpc.cluster_token = kToken;
    config.rpc.peer_name = name_;
    net::RpcHandlers handlers;
    handlers.on_request = [this](const std::shared_ptr<net::RpcConnection>&, net::MessagePtr m, net::Responder r) {
      OnRequest(std::move(m), std::move(r));
    };
    auto client = net::RpcClient::Create(loop, config, handlers);
    TANDEM_CHECK(client.ok()) << client.status().ToString();
    client_ = std::move(*client);
    auto conn = client_->Connect(router_address);
    TANDEM_CHECK(conn.ok()) << conn.status().ToString();
    conn_ = *conn;
    proto::RegisterRequest reg;
    reg.set_role(role);
    reg.set_address("127.0.0.1:" + std::to_string(40000 + (std::hash<std::string>()(name_) % 1000)));
    reg.set_node_name(name_);
    reg.set_model_id("tiny");
    reg.mutable_kv_layout()->set_block_size(kFakeBlockSize);
    reg.mutable_capacity()->set_num_gpu_blocks(free_blocks);
    reg.mutable_capacity()->set_max_running_requests(kFakeMaxRunning);
    reg.set_kv_transport("local");
    auto reply = conn_->CallAndWaitFor<proto::RegisterReply>(reg, 3000);
    TANDEM_CHECK(reply.ok()) << reply.status().ToString();
    node_id_ = reply->node_id();
    interval_ms_ = static_cast<int>(reply->heartbeat_interval_ms());
    address_ = reg.address();
    free_blocks_ = free_blocks;
    heartbeat_thread_ = std::thread([this] { HeartbeatLoop(); });
  }

  ~FakeNode() {
    Kill();
    std::vector<std::thread> streams;
    {
      std::lock_guard<std::mutex> lock(mu_);
      streams.swap(streams_);
    }
    for (auto& t : streams) t.join();
  }

  // ---- behaviour ----
  void SetScript(NodeScript script) {
    std::lock_guard<std::mutex> lock(mu_);
    script_ = std::move(script);
  }
  void SetReserveNeedsNothing(bool v) { reserve_needs_nothing_ = v; }
  void SetRefusePrefill(bool v) { refuse_prefill_ = v; }
  // Prefill: the next `n` PrefillRequests fail with ResourceExhausted ("prefill queue full").
  void RefusePrefills(int n) { refuse_prefills_ = n; }
  // Decode: Reserves are answered this late.
  void SetReserveDelayMs(int ms) { reserve_delay_ms_ = ms; }
  // Decode: the next `n` Reserves or local PrefillRequests fail with ResourceExhausted
  // (a full batch); they are still recorded.
  void RefuseForNoRoom(int n) { refuse_no_room_ = n; }
  // Decode: Reserves and local PrefillRequests fail with Unavailable("draining") (recorded).
  void SetRefuseAsDraining(bool v) { refuse_draining_ = v; }
  // Decode: a Cancel of a reservation is answered at once with an ERROR entry, as a real
  // decode node's failed KV handoff (its receiver session cancelled) is.
  void SetCancelFailsHandoff(bool v) { cancel_fails_handoff_ = v; }
  // Decode: the Ack of a local PrefillRequest leaves this late (the stream starts at once);
  // for the next `count` of them only when count >= 0.
  void SetLocalAckDelayMs(int ms, int count = -1) {
    local_ack_delay_ms_ = ms;
    local_ack_delays_left_ = count;
  }
  void SetLoad(int running, int waiting, int64_t free_blocks, int64_t queued_prefill_tokens) {
    std::lock_guard<std::mutex> lock(mu_);
    running_ = running;
    waiting_ = waiting;
    free_blocks_ = free_blocks;
    queued_prefill_ = queued_prefill_tokens;
  }
  void SetDraining(bool v) { draining_ = v; }
  // Sent with the next heartbeat only.
  void SetCacheReport(proto::CacheReport report) {
    std::lock_guard<std::mutex> lock(mu_);
    cache_report_ = std::move(report);
  }
  // The next heartbeat skips a sequence number (as if one was lost).
  void SkipSequence() { skip_sequence_ = true; }
  // Called (prefill role) with the PrefillRequest and its reservation, after the Ack of
  // the message that completed them.
  std::function<void(const proto::PrefillRequest&)> on_prefill;

  // Streams the script for (id, epoch), as decode does after a KV handoff.
  void StartStream(uint64_t id, uint32_t epoch) {
    std::lock_guard<std::mutex> lock(mu_);
    NodeScript script = script_;
    streams_.emplace_back([this, id, epoch, script] { Stream(id, epoch, script); });
  }

  void Kill() {
    stop_heartbeats_ = true;
    stopping_ = true;
    if (heartbeat_thread_.joinable()) heartbeat_thread_.join();
    if (conn_) conn_->Close(UnavailableError("fake node killed"));
  }
  void StopHeartbeats() { stop_heartbeats_ = true; }

  // ---- observations ----
  std::vector<proto::ReserveRequest> reserves() {
    std::lock_guard<std::mutex> lock(mu_);
    return reserves_;
  }
  std::vector<proto::PrefillRequest> prefills() {
    std::lock_guard<std::mutex> lock(mu_);
    return prefills_;
  }
  std::vector<proto::Cancel> cancels() {
    std::lock_guard<std::mutex> lock(mu_);
    return cancels_;
  }
  std::vector<proto::Release> releases() {
    std::lock_guard<std::mutex> lock(mu_);
    return releases_;
  }
  std::vector<proto::PrefillTarget> targets() {
    std::lock_guard<std::mutex> lock(mu_);
    return targets_;
  }
  std::vector<proto::Drain> drains() {
    std::lock_guard<std::mutex> lock(mu_);
    return drains_;
  }
  bool WaitFor(const std::function<bool()>& done, int timeout_ms = 5000) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (std::chrono::steady_clock::now() < end) {
      if (done()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return done();
  }
  uint32_t node_id() const { return node_id_; }
  const std::string& address() const { return address_; }
  int heartbeat_interval_ms() const { return interval_ms_; }

 private:
  // A prefill with its reservation: on_prefill on a thread of its own. REQUIRES: mu_ held.
  void Prefilled(const proto::PrefillRequest& prefill) {
    if (on_prefill) streams_.emplace_back([this, prefill] { on_prefill(prefill); });
  }

  void OnRequest(net::MessagePtr m, net::Responder r) {
    std::lock_guard<std::mutex> lock(mu_);
    if (const auto* reserve = proto::MessageAs<proto::ReserveRequest>(*m)) {
      reserves_.push_back(*reserve);
      if (refuse_draining_) return r.Fail(UnavailableError("draining"));
      if (refuse_no_room_ > 0) {
        --refuse_no_room_;
        return r.Fail(ResourceExhaustedError("no batch slot for a reservation"));
      }
      proto::ReserveReply reply;
      reply.set_request_id(reserve->request_id());
      reply.set_epoch(reserve->epoch());
      reply.set_decode_node_id(node_id_);
      reply.set_transport_descriptor("fake-target");
      if (!reserve_needs_nothing_) {
        proto::BlockRun* run = reply.add_needed_runs();
        run->set_first_block(3);
        run->set_num_blocks(1);
      }
      active_[reserve->request_id()] = reserve->epoch();
      reserved_[reserve->request_id()] = reserve->epoch();
      if (const int delay = reserve_delay_ms_.load(); delay > 0) {
        streams_.emplace_back([r, reply, delay] {
          std::this_thread::sleep_for(std::chrono::milliseconds(delay));
          r.Reply(reply);
        });
        return;
      }
      return r.Reply(reply);
    }
    if (const auto* prefill = proto::MessageAs<proto::PrefillRequest>(*m)) {
      prefills_.push_back(*prefill);
      if (role_ == proto::NODE_ROLE_PREFILL) {
        if (refuse_prefill_) return r.Fail(ResourceExhaustedError("prefill queue full"));
        if (refuse_prefills_ > 0) {
          --refuse_prefills_;
          return r.Fail(ResourceExhaustedError("prefill queue full"));
        }
        // As a real node's tombstone (common/node/request_table.h): a Cancel that found
        // nothing refuses that epoch or older when it comes.
        if (auto t = prefill_tombstones_.find(prefill->request_id());
            t != prefill_tombstones_.end() && prefill->epoch() <= t->second) {
          return r.Fail(CancelledError("request was cancelled before it arrived"));
        }
        proto::Ack ack;
        ack.set_request_id(prefill->request_id());
        r.Reply(ack);
        if (prefill->reservation_follows()) {
          awaiting_target_[prefill->request_id()] = *prefill;
        } else {
          Prefilled(*prefill);
        }
        return;
      }
      if (refuse_draining_) return r.Fail(UnavailableError("draining"));
      if (refuse_no_room_ > 0) {
        --refuse_no_room_;
        return r.Fail(ResourceExhaustedError("waiting queue full"));
      }
      auto it = active_.find(prefill->request_id());
      if (it != active_.end()) return r.Fail(AlreadyExistsError("request exists"));
      active_[prefill->request_id()] = prefill->epoch();
      proto::Ack ack;
      ack.set_request_id(prefill->request_id());
      const int delay = local_ack_delays_left_ != 0 ? local_ack_delay_ms_.load() : 0;
      if (local_ack_delays_left_ > 0) --local_ack_delays_left_;
      if (delay > 0) {
        streams_.emplace_back([r, ack, delay] {
          std::this_thread::sleep_for(std::chrono::milliseconds(delay));
          r.Reply(ack);
        });
      } else {
        r.Reply(ack);
      }
      NodeScript script = script_;
      const uint64_t id = prefill->request_id();
      const uint32_t epoch = prefill->epoch();
      streams_.emplace_back([this, id, epoch, script] { Stream(id, epoch, script); });
      return;
    }
    if (const auto* target = proto::MessageAs<proto::PrefillTarget>(*m)) {
      targets_.push_back(*target);
      auto it = awaiting_target_.find(target->request_id());
      if (it == awaiting_target_.end() || it->second.epoch() != target->epoch()) {
        return r.Fail(NotFoundError("no such request"));
      }
      proto::PrefillRequest prefill = std::move(it->second);
      awaiting_target_.erase(it);
      *prefill.mutable_reservation() = target->reservation();
      proto::Ack ack;
      ack.set_request_id(target->request_id());
      r.Reply(ack);
      return Prefilled(prefill);
    }
    if (const auto* cancel = proto::MessageAs<proto::Cancel>(*m)) {
      cancels_.push_back(*cancel);
      if (auto it = awaiting_target_.find(cancel->request_id());
          it != awaiting_target_.end() && it->second.epoch() == cancel->epoch()) {
        awaiting_target_.erase(it);
      } else if (role_ == proto::NODE_ROLE_PREFILL) {
        prefill_tombstones_[cancel->request_id()] = cancel->epoch();
      }
      auto reserved = reserved_.find(cancel->request_id());
      if (cancel_fails_handoff_ && reserved != reserved_.end() && reserved->second == cancel->epoch()) {
        proto::Tokens tokens;
        tokens.set_node_id(node_id_);
        proto::TokenEntry* e = tokens.add_entries();
        e->set_request_id(cancel->request_id());
        e->set_epoch(cancel->epoch());
        e->set_finish_reason(proto::FINISH_REASON_ERROR);
        *e->mutable_error() = proto::ToErrorInfo(CancelledError("cancelled by the router"));
        (void)conn_->Send(tokens);
      }
      EndLocked(cancel->request_id(), cancel->epoch());
    } else if (const auto* release = proto::MessageAs<proto::Release>(*m)) {
      releases_.push_back(*release);
      EndLocked(release->request_id(), release->epoch());
    } else if (const auto* drain = proto::MessageAs<proto::Drain>(*m)) {
      drains_.push_back(*drain);
      draining_ = true;
    }
    proto::Ack ack;
    r.Reply(ack);
  }

  // Cancel/Release: the request goes away (after one "engine step") with an ABORT entry.
  void EndLocked(uint64_t id, uint32_t epoch) {
    auto it = active_.find(id);
    if (it == active_.end() || it->second != epoch) return;
    cancelled_[id] = epoch;
    streams_.emplace_back([this, id, epoch] {
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      {
        std::lock_guard<std::mutex> lock(mu_);
        auto a = active_.find(id);
        if (a != active_.end() && a->second == epoch) active_.erase(a);
      }
      proto::Tokens tokens;
      tokens.set_node_id(node_id_);
      proto::TokenEntry* e = tokens.add_entries();
      e->set_request_id(id);
      e->set_epoch(epoch);
      e->set_finish_reason(proto::FINISH_REASON_ABORT);
      (void)conn_->Send(tokens);
    });
  }

  void Stream(uint64_t id, uint32_t epoch, NodeScript script) {
    for (size_t i = 0; i < script.tokens.size(); ++i) {
      if (script.hold_after >= 0 && static_cast<int>(i) >= script.hold_after) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(script.step_ms));
      if (stopping_) return;
      {
        std::lock_guard<std::mutex> lock(mu_);
        auto c = cancelled_.find(id);
        if (c != cancelled_.end() && c->second == epoch) return;
      }
      proto::Tokens tokens;
      tokens.set_node_id(node_id_);
      tokens.set_step(++step_);
      proto::TokenEntry* e = tokens.add_entries();
      e->set_request_id(id);
      e->set_epoch(epoch);
      e->add_token_ids(script.tokens[i]);
      if (i + 1 == script.tokens.size()) {
        e->set_finish_reason(script.finish);
        e->set_num_cached_tokens(script.cached_tokens);
        std::lock_guard<std::mutex> lock(mu_);
        active_.erase(id);
      }
      (void)conn_->Send(tokens);
    }
  }

  void HeartbeatLoop() {
    uint64_t seq = 0;
    while (!stopping_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(interval_ms_));
      if (stop_heartbeats_ || stopping_) continue;
      proto::Heartbeat hb;
      hb.set_node_id(node_id_);
      if (skip_sequence_.exchange(false)) ++seq;
      hb.set_sequence(++seq);
      hb.set_draining(draining_);
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (cache_report_) *hb.mutable_cache() = *std::exchange(cache_report_, std::nullopt);
        hb.mutable_load()->set_num_running(running_);
        hb.mutable_load()->set_num_waiting(waiting_);
        hb.mutable_load()->set_queued_prefill_tokens(queued_prefill_);
        proto::TierUsage* gpu = hb.mutable_load()->add_tiers();
        gpu->set_tier(proto::KV_TIER_GPU);
        gpu->set_free_blocks(free_blocks_);
        gpu->set_total_blocks(1000);
      }
      (void)conn_->Send(hb);
    }
  }

  const proto::NodeRole role_;
  const std::string name_;
  std::unique_ptr<net::RpcClient> client_;
  std::shared_ptr<net::RpcConnection> conn_;
  uint32_t node_id_ = 0;
  int interval_ms_ = 500;
  std::string address_;
  std::atomic<bool> stop_heartbeats_{false};
  std::atomic<bool> stopping_{false};
  std::atomic<bool> reserve_needs_nothing_{false};
  std::atomic<bool> refuse_prefill_{false};
  std::atomic<int> refuse_no_room_{0};
  std::atomic<int> refuse_prefills_{0};
  std::atomic<int> reserve_delay_ms_{0};
  std::atomic<bool> refuse_draining_{false};
  std::atomic<int> local_ack_delay_ms_{0};
  std::atomic<int> local_ack_delays_left_{-1};
  std::atomic<bool> cancel_fails_handoff_{false};
  std::atomic<bool> draining_{false};
  std::atomic<bool> skip_sequence_{false};
  std::atomic<uint64_t> step_{0};
  std::thread heartbeat_thread_;

  std::mutex mu_;
  NodeScript script_;                               // guarded by mu_
  int running_ = 0, waiting_ = 0;                   // guarded by mu_
  int64_t free_blocks_ = 100;                       // guarded by mu_
  int64_t queued_prefill_ = 0;                      // guarded by mu_
  std::optional<proto::CacheReport> cache_report_;  // guarded by mu_
  std::map<uint64_t, uint32_t> active_;             // id -> epoch, guarded by mu_
  std::map<uint64_t, uint32_t> cancelled_;          // guarded by mu_
  std::map<uint64_t, uint32_t> reserved_;           // id -> epoch of its last Reserve, guarded by mu_
  std::map<uint64_t, proto::PrefillRequest> awaiting_target_;  // sent beside the Reserve, guarded by mu_
  std::map<uint64_t, uint32_t> prefill_tombstones_;            // id -> epoch cancelled unheld, guarded by mu_
  std::vector<proto::ReserveRequest> reserves_;
  std::vector<proto::PrefillRequest> prefills_;
  std::vector<proto::PrefillTarget> targets_;
  std::vector<proto::Cancel> cancels_;
  std::vector<proto::Release> releases_;
  std::vector<proto::Drain> drains_;
  std::vector<std::thread> streams_;  // guarded by mu_
};

}  // namespace tandem::router::cluster::testing
