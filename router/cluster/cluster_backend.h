// ClusterBackend: the InferenceBackend that serves requests with the node
// cluster (docs/protocol.md). It runs the control RpcServer nodes register
// with (NodeRegistry), places requests (placement.h) and drives each one:
//   disaggregated: Reserve on decode -> Prefill on a prefill node -> Tokens
//                  from decode;
//   local path:    PrefillRequest with an empty reservation to decode (short
//                  prompts, colocated mode, no prefill node, prefill refused or
//                  failed before the first token, whole prompt cached).
// Fallback to the local path releases the reservation and re-sends with
// epoch + 1 (a decode still holding the old epoch answers AlreadyExists; the
// router retries every 20 ms for up to 2 s).
// A dead decode node's requests continue on another decode node (prompt +
// tokens so far as the new prompt, epoch + 1, local path; at most twice), or
// end with Unavailable when there is none; a dead prefill node sends its
// not-yet-started requests down the local path. Cancel() tells decode (and prefill while prefilling) and ends
// the request with Cancelled at once. Every request ends with exactly one
// on_finish / on_error.
//
// Thread rule: thread-safe. Submit/Cancel from any thread; callbacks run on
// control I/O threads or the backend's timer thread, one at a time per request.
// Lifetime: Stop() (or destroy) before the EventLoop; Stop ends every request
// still in flight with Unavailable.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/base/clock.h"
#include "common/base/log_limiter.h"
#include "common/metrics/metrics_registry.h"
#include "common/net/event_loop.h"
#include "common/net/rpc_server.h"
#include "router/cluster/cluster_config.h"
#include "router/cluster/node_registry.h"
#include "router/inference_backend.h"

namespace tandem::router::cluster {

class ClusterBackend final : public InferenceBackend {
 public:
  // Validates config, resolves the token, listens on config.control_address
  // and starts the timer thread. `metrics` (optional, not owned) gets the
  // tandem_router_nodes and tandem_router_node_cached_blocks gauges. Errors:
  // InvalidArgument, Unavailable (bind).
  static StatusOr<std::unique_ptr<ClusterBackend>> Start(net::EventLoop& loop, const ClusterConfig& config,
                                                         metrics::MetricsRegistry* metrics = nullptr,
                                                         const Clock& clock = Clock::Real());
  ~ClusterBackend() override;
  ClusterBackend(const ClusterBackend&) = delete;
  ClusterBackend& operator=(const ClusterBackend&) = delete;

  void Submit(GenerateRequest request, StreamCallbacks callbacks) override;
  void Cancel(RequestId request_id) override;

  // Stops the control server and the timer thread; ends in-flight requests
  // with Unavailable. Idempotent.
  void Stop();

  // "host:port" the control server listens on (the real port for port 0).
  std::string control_address() const;
  // Readiness: at least one live, non-draining decode node.
  bool Ready() const { return registry_.HasDecodeNode(); }
  const NodeRegistry& registry() const { return registry_; }
  size_t num_inflight() const;

  struct Inflight;

 private:
  ClusterBackend(net::EventLoop& loop, const ClusterConfig& config, metrics::MetricsRegistry* metrics,
                 const Clock& clock);

  // Control-plane handlers (I/O threads).
  void OnNodeRequest(const std::shared_ptr<net::RpcConnection>& conn, net::MessagePtr message,
                     net::Responder responder);
  void OnNodeMessage(const std::shared_ptr<net::RpcConnection>& conn, net::MessagePtr message);
  void OnTokens(const net::RpcConnection* conn, const proto::Tokens& tokens);
  void OnNodeDead(uint32_t node_id);
  void Redispatch(const std::shared_ptr<Inflight>& r, uint32_t dead_node);

  // Request steps; each checks that the request is still current for `epoch`.
  void Dispatch(const std::shared_ptr<Inflight>& r);
  void SendReserve(const std::shared_ptr<Inflight>& r);
  void OnReserved(const std::shared_ptr<Inflight>& r, Epoch epoch, StatusOr<net::MessagePtr> reply);
  void SendLocal(const std::shared_ptr<Inflight>& r, Epoch epoch);
  // Releases the current epoch on decode and goes down the local path with epoch + 1.
  void ReleaseThenLocal(const std::shared_ptr<Inflight>& r, Epoch epoch);
  // Ends the request with `status`, then cancels it at the nodes that held it. Ending
  // first means no fallback, retry or re-dispatch can start a newer epoch afterwards.
  // Every placement change counts its node (registry_.AddInflight) under mu_, End too.
  void CancelWith(RequestId request_id, const Status& status);
  // CancelWith for a request in hand (also after a node call failed or timed out: the
  // node may hold it regardless).
  void EndAndCancel(const std::shared_ptr<Inflight>& r, const Status& status);
  void SendToNode(uint32_t node_id, const google::protobuf::Message& message);
  // Cancel{request_id, epoch} to `node_id` (no reply awaited).
  void SendCancel(uint32_t node_id, RequestId request_id, Epoch epoch, const char* reason);

  // Delivery: exactly one End per request; tokens only before it.
  void DeliverTokens(const std::shared_ptr<Inflight>& r, Epoch epoch, std::vector<TokenId> tokens);
  // The nodes a request was placed on when it ended, and its epoch there.
  struct Holders {
    uint32_t decode = 0;
    uint32_t prefill = 0;
    Epoch epoch = 0;
  };
  // Ends `r` and calls `finish`; nullopt when it had already ended.
  std::optional<Holders> End(const std::shared_ptr<Inflight>& r,
                             const std::function<void(const StreamCallbacks&)>& finish);
  // A decode node's early report of the prompt's cache hits (StreamCallbacks::on_cached).
  void DeliverCached(const std::shared_ptr<Inflight>& r, Epoch epoch, int32_t cached);
  void EndWithError(const std::shared_ptr<Inflight>& r, const Status& status);
  bool IsCurrent(const std::shared_ptr<Inflight>& r, Epoch epoch) const;
  // A decode node refused `r` (at `epoch`) for lack of room: place it again, at a
  // new epoch, after a backoff (2 ms doubling to 50 ms). False once
  // config_.no_room_retry_ms has passed since the first refusal.
  bool RetryWhenRoom(const std::shared_ptr<Inflight>& r, Epoch epoch);
  // The decode node for `r`'s local path: placement over prompt + the tokens delivered so far.
  std::optional<uint32_t> PickDecodeForLocalPath(const std::shared_ptr<Inflight>& r);

  void RunTimer();
  // tandem_router_nodes{role} from the registry (registration, death, every tick).
  void UpdateNodeGauge();
  // tandem_router_node_cached_blocks{node} from the registry (timer thread, every tick).
  void UpdateCacheGauge();
  void RunAfter(int64_t delay_ms, std::function<void()> task);

  net::EventLoop& loop_;
  const ClusterConfig config_;
  const Clock& clock_;
  NodeRegistry registry_;
  LogLimiter refused_registrations_{clock_};  // per node host and reason: a refused node retries often
  metrics::Family<metrics::Gauge>* nodes_gauge_ = nullptr;
  metrics::Family<metrics::Gauge>* cached_blocks_gauge_ = nullptr;
  std::set<std::string> cache_gauge_names_;  // timer thread only: node names the gauge has seen
  // Control-plane callbacks can run after the server stopped (closes complete on I/O
  // threads): they go through this guard, which Stop() clears first.
  struct HandlerGuard {
    std::recursive_mutex mu;
    ClusterBackend* self = nullptr;
  };
  std::shared_ptr<HandlerGuard> guard_ = std::make_shared<HandlerGuard>();
  std::unique_ptr<net::RpcServer> server_;

  mutable std::mutex mu_;
  std::map<RequestId, std::shared_ptr<Inflight>> requests_;  // guarded by mu_

  std::mutex timer_mu_;
  std::condition_variable timer_cv_;
  std::multimap<Nanos, std::function<void()>> timers_;  // guarded by timer_mu_
  bool stopping_ = false;                                // guarded by timer_mu_
  std::thread timer_thread_;
  std::atomic<bool> stopped_{false};
};

// Router -> protocol sampling params (max_tokens, ignore_eos, stop ids included).
proto::SamplingParams ToProtoSampling(const GenerateRequest& request);

}  // namespace tandem::router::cluster
