// ClusterClient: the EngineClient that serves requests with the node
// cluster (docs/protocol.md). It runs the control RpcServer nodes register
// with (NodeRegistry) and drives each request's Handoff (handoff.h), the state
// machine that decides every step: this class only keeps the request table,
// feeds each Handoff its events (node replies, Tokens entries, node deaths,
// cancels, timers) one at a time, and runs the actions it returns (placement,
// messages to nodes, callbacks, timers, in-flight counts).
//
// Thread rule: thread-safe. Submit/Cancel from any thread. A request's events
// are handled one at a time, in arrival order (a per-request mailbox), so its
// callbacks run one at a time; they run on the thread that delivered the event
// (control I/O threads, or the caller of Submit/Cancel). Timers run on the
// EventLoop. Lifetime: Stop() (or destroy) before the EventLoop; Stop ends
// every request still in flight with Unavailable.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "common/base/clock.h"
#include "common/base/log_limiter.h"
#include "common/metrics/metrics_registry.h"
#include "common/net/event_loop.h"
#include "common/net/rpc_server.h"
#include "router/cluster/cluster_config.h"
#include "router/cluster/cluster_gauges.h"
#include "router/cluster/handoff.h"
#include "router/cluster/node_registry.h"
#include "router/cluster/room_queue.h"
#include "router/engine_client.h"

namespace tandem::router::cluster {

class ClusterClient final : public EngineClient {
 public:
  // Validates config, resolves the token, listens on config.control_address
  // and starts the periodic tick. `metrics` (optional, not owned) gets the
  // gauges of cluster_gauges.h. Errors: InvalidArgument, Unavailable (bind).
  static StatusOr<std::unique_ptr<ClusterClient>> Start(net::EventLoop& loop, const ClusterConfig& config,
                                                        metrics::MetricsRegistry* metrics = nullptr,
                                                        const Clock& clock = Clock::Real());
  ~ClusterClient() override;
  ClusterClient(const ClusterClient&) = delete;
  ClusterClient& operator=(const ClusterClient&) = delete;

  void Submit(GenerateRequest request, StreamCallbacks callbacks) override;
  void Cancel(RequestId request_id) override;

  // Stops the control server and the tick; ends in-flight requests with
  // Unavailable and returns once they have ended. Idempotent. REQUIRES: not
  // called from a StreamCallbacks callback.
  void Stop();

  // "host:port" the control server listens on (the real port for port 0).
  std::string control_address() const;
  // Readiness: at least one live, non-draining decode node.
  bool Ready() const { return registry_.HasDecodeNode(); }
  // An operator drains the node (node_admin.h): placement passes it over from now on,
  // its requests that have not begun to stream move, and it is sent a Drain (the
  // answer is logged). NotFound for an id that is not live.
  Status DrainNode(NodeId node_id, const std::string& reason);
  ServingMode mode() const { return config_.mode; }
  const NodeRegistry& registry() const { return registry_; }
  size_t num_inflight() const;

 private:
  struct Entry;
  struct Ticker;

  ClusterClient(net::EventLoop& loop, const ClusterConfig& config, metrics::MetricsRegistry* metrics,
                const Clock& clock);

  // ---- control plane (cluster_control.cc; I/O threads) ----
  void OnNodeRequest(const std::shared_ptr<net::RpcConnection>& conn, net::MessagePtr message,
                     net::Responder responder);
  void OnNodeMessage(const std::shared_ptr<net::RpcConnection>& conn, net::MessagePtr message);
  void OnTokens(const net::RpcConnection* conn, const proto::Tokens& tokens);
  // The node is gone: every request hears of it.
  void OnNodeDead(NodeId node_id);
  // The node began draining (`why`) or is avoided: every request hears of it; those placed
  // on it that have not begun to stream move while another decode node can take them.
  void OnNodeDraining(NodeId node_id, std::string_view why);
  // Every tick (20 ms): heartbeat sweep, deadlines, gauges.
  void Tick();

  // ---- requests (cluster_client.cc) ----
  void StartTicker();
  // REQUIRES: guard_->mu held, ticker_ set.
  void ScheduleTick();
  // Requests past their deadline_ns are cancelled with DeadlineExceeded.
  void CancelExpired();
  // Queues `event` for the entry's Handoff and, unless another thread is at it,
  // handles the queue: Handle, then run the actions outside the entry's lock.
  // `first`: ahead of the queue (a placement answer, during that handling).
  void Post(const std::shared_ptr<Entry>& entry, HandoffEvent event, bool first = false);
  void Execute(const std::shared_ptr<Entry>& entry, HandoffAction& action);
  void PlaceDecode(const std::shared_ptr<Entry>& entry, const HandoffAction& action);
  void PlacePrefill(const std::shared_ptr<Entry>& entry, const HandoffAction& action);
  // Calls `node` with `message`; the reply becomes `ok` / `failed` for the entry.
  void CallNode(const std::shared_ptr<Entry>& entry, const HandoffAction& action,
                const google::protobuf::Message& message, HandoffEventKind ok, HandoffEventKind failed);
  void SendToNode(NodeId node_id, const google::protobuf::Message& message);
  void ArmTimer(const std::shared_ptr<Entry>& entry, const HandoffAction& action);
  // The request ended: it leaves the table (and the room queue), and the first request
  // waiting for room tries again (the one that ended may have freed some).
  void Forget(const std::shared_ptr<Entry>& entry);
  // Wakes the first request waiting for room that is not trying yet (RoomQueue::WakeFirst),
  // from the EventLoop.
  void WakeForRoomSoon();
  void WakeFirstWaitingForRoom();
  std::shared_ptr<Entry> Find(RequestId request_id) const;
  std::vector<std::shared_ptr<Entry>> AllEntries() const;
  HandoffEvent MakeEvent(HandoffEventKind kind) const;

  net::EventLoop& loop_;
  const ClusterConfig config_;
  const Clock& clock_;
  NodeRegistry registry_;
  ClusterGauges gauges_;
  LogLimiter refused_registrations_{clock_};  // per node host and reason: a refused node retries often
  // Control-plane callbacks and timers can run after Stop() (closes complete on I/O
  // threads): they go through this guard, which Stop() clears first.
  struct HandlerGuard {
    std::recursive_mutex mu;
    ClusterClient* self = nullptr;
  };
  std::shared_ptr<HandlerGuard> guard_ = std::make_shared<HandlerGuard>();
  std::unique_ptr<net::RpcServer> server_;
  std::unique_ptr<Ticker> ticker_;  // guarded by guard_->mu

  mutable std::mutex mu_;
  std::map<RequestId, std::shared_ptr<Entry>> requests_;  // guarded by mu_
  uint64_t arrivals_ = 0;                                 // guarded by mu_: Submit's count, each Entry's place
  RoomQueue waiting_for_room_;
  std::condition_variable forgotten_;                     // a request left requests_
  std::atomic<bool> stopped_{false};
};

}  // namespace tandem::router::cluster
