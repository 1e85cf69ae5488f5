// RouterLink: a node's connection to the router. Dials the router, sends
// RegisterRequest, then a Heartbeat every interval (load and prefix-cache
// changes from callbacks; the cache callback is asked for a full list on the
// first heartbeat after each (re)registration and every
// full_cache_report_every heartbeats, see docs/protocol.md "Heartbeat");
// when the connection is lost it calls on_lost (so the role cancels every
// router-originated request) and retries connect + register every
// reconnect_interval_ms. Requests the router sends on this connection go to
// the role's handler, except Drain (an operator's drain, docs/protocol.md
// "Drain"), which the link answers itself: on_drain, heartbeats say draining
// from then on, Ack. A refused or failed registration (wrong cluster token,
// protocol version skew, a RegisterRequest the router rejects, an unreachable
// router) is logged with its reason: at once, then at most every 10 s while it
// lasts (with the number of attempts in between), and kept for readiness.
//
// Thread rule: Start/Stop from the owning thread; Send, registered(),
// node_id(), SetDraining are thread-safe. Callbacks: make_register and load
// run on the link's own thread; on_request and on_lost on an I/O thread (must
// not block). make_register, load and cache run on the link's own thread too;
// on_drain on an I/O thread (must not block).
// Lifetime: Stop() before the EventLoop and the callbacks' owners die.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "common/base/status.h"
#include "common/net/event_loop.h"
#include "common/net/rpc_client.h"
#include "common/proto/control.pb.h"

namespace tandem::node {

struct RouterLinkOptions {
  std::string router_address;        // "host:port"
  net::RpcClientConfig client;       // token, peer name
  int heartbeat_interval_ms = 1000;  // until the RegisterReply sets one
  int reconnect_interval_ms = 500;
  // Builds the RegisterRequest (called at every (re)registration).
  std::function<proto::RegisterRequest()> make_register;
  // The load for a heartbeat.
  std::function<proto::LoadReport()> load;
  // Prefix-cache changes for a heartbeat (optional); nullopt = none this time.
  // `full`: start over with the complete set (it may come in a later heartbeat).
  std::function<std::optional<proto::CacheReport>(bool full)> cache;
  // Heartbeats between two full cache reports, besides the one after each
  // registration: heals a view the router dropped after a sequence gap. 0 = never.
  int full_cache_report_every = 60;
  // A request from the router (Reserve, Prefill, Cancel, Release).
  std::function<void(const std::shared_ptr<net::RpcConnection>&, net::MessagePtr, net::Responder)> on_request;
  // The registered connection was lost (not called for failed dials).
  std::function<void()> on_lost;
  // The router asked this node to drain (`reason` for logs); optional: without it a
  // Drain is refused as Unimplemented.
  std::function<void(const std::string& reason)> on_drain;
};

class RouterLink {
 public:
  RouterLink(net::EventLoop& loop, RouterLinkOptions options);
  ~RouterLink();  // Stop()

  // Validates the client config and starts the link thread.
  Status Start();
  // Stops the thread and closes the connection. Idempotent.
  void Stop();

  // One-way message to the router (Tokens). Unavailable when not registered.
  Status Send(const google::protobuf::Message& message);
  bool registered() const { return registered_.load(); }
  uint32_t node_id() const { return node_id_.load(); }
  // Heartbeats carry draining = true from now on.
  void SetDraining(bool draining) { draining_.store(draining); }
  // Why the last attempt to register failed ("" once registered, or before any attempt).
  std::string last_refusal() const;

 private:
  void Run();
  bool TryRegister();
  void OnClosed(const std::shared_ptr<net::RpcConnection>& conn);
  // A Drain from the router (I/O thread): on_drain, then Ack.
  void OnDrain(const proto::Drain& drain, const net::Responder& responder);
  // Link thread: records and (rate-limited) logs a failed registration.
  void NoteRefusal(const Status& status);

  // Handlers reach the link through this guard, so a close that the I/O thread
  // delivers after Stop() finds no link instead of a dead one.
  struct Guard {
    std::mutex mu;
    RouterLink* link = nullptr;  // guarded by mu
  };

  net::EventLoop& loop_;
  RouterLinkOptions options_;
  std::shared_ptr<Guard> guard_ = std::make_shared<Guard>();
  std::unique_ptr<net::RpcClient> client_;
  std::atomic<bool> registered_{false};
  std::atomic<uint32_t> node_id_{0};
  std::atomic<bool> draining_{false};
  std::atomic<int> interval_ms_{1000};

  mutable std::mutex mu_;  // guards conn_, stop_, last_refusal_
  std::condition_variable cv_;
  std::shared_ptr<net::RpcConnection> conn_;
  bool stop_ = false;
  std::string last_refusal_;
  // Link thread only: the refusal last logged, when, and attempts since.
  std::string logged_refusal_;
  std::chrono::steady_clock::time_point logged_at_;
  int refusals_since_log_ = 0;
  std::thread thread_;
};

}  // namespace tandem::node
