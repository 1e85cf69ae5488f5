// NodeHost: the process plumbing both node roles share: the control-plane
// EventLoop and RpcServer, the RouterLink (register, heartbeat, reconnect),
// the /metrics and /health HTTP listener, and the drain state. The role
// (PrefillNode, DecodeNode) owns the engine and the KV transfer and plugs
// into the host through RoleHooks.
//
// Readiness: ready = registered with the router (or no router configured) and
// not draining; a 503 says which, with the router's last refusal if any. Draining
// (SIGTERM, or a Drain from the router): readiness fails at once, heartbeats say
// draining, and the role refuses new admissions (check draining()); main's
// RunUntilDrained sees draining() and exits once the node is idle.
//
// Thread rule: Start/Stop from the owning thread; the rest is thread-safe.
// Hooks run on I/O threads (must not block) except refresh (HTTP thread).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "common/base/status.h"
#include "common/engine/engine.h"
#include "common/net/event_loop.h"
#include "common/net/rpc_server.h"
#include "common/node/admin_http_server.h"
#include "common/node/node_config.h"
#include "common/node/node_metrics.h"
#include "common/node/router_link.h"

namespace tandem::node {

struct RoleHooks {
  proto::NodeRole role = proto::NODE_ROLE_DECODE;
  std::string kv_transport;          // "ucx" | "local"
  std::string transport_descriptor;  // the transport's worker address
  // A request on any control connection (router link or accepted peers).
  std::function<void(const std::shared_ptr<net::RpcConnection>&, net::MessagePtr, net::Responder)> on_request;
  // A one-way message on an accepted connection (KvControl, KvDone from peers).
  std::function<void(const std::shared_ptr<net::RpcConnection>&, net::MessagePtr)> on_message;
  // An accepted connection (a peer node) closed.
  std::function<void(const std::shared_ptr<net::RpcConnection>&)> on_peer_close;
  // Prompt tokens accepted but not yet computed (heartbeat load); optional.
  std::function<int64_t()> queued_prefill_tokens;
  // The router connection was lost: cancel every router-originated request.
  std::function<void()> on_router_lost;
  // Refreshes role gauges before /metrics renders.
  std::function<void(NodeMetrics&)> refresh;
};

class NodeHost {
 public:
  NodeHost() = default;
  ~NodeHost();  // Stop()

  // Registers the metrics and feeds them the engine's steps, then starts the
  // control server, the HTTP listener and (when router_address is set) the
  // router link. `engine` must outlive Stop().
  Status Start(const NodeConfig& config, engine::Engine* engine, RoleHooks hooks);
  // Stops the router link, the HTTP listener, the server and the I/O threads.
  void Stop();

  // One-way message to the router; Unavailable when not registered.
  Status SendToRouter(const google::protobuf::Message& message);
  // The control address peers dial ("host:port").
  std::string address() const { return address_; }
  // The HTTP listener's "host:port" ("" when disabled).
  std::string http_address() const { return http_ ? http_->address() : std::string(); }
  uint32_t node_id() const { return link_ ? link_->node_id() : 0; }
  bool registered() const { return !link_ || link_->registered(); }

  void BeginDrain();
  bool draining() const { return draining_.load(); }
  bool ready() const { return registered() && !draining(); }

  net::EventLoop& loop() { return *loop_; }
  // The node's metrics, registered by Start (role, model name, KV sizes); valid
  // from Start until the host is destroyed.
  NodeMetrics& metrics() { return *metrics_; }
  const NodeConfig& config() const { return config_; }

 private:
  proto::RegisterRequest MakeRegister() const;
  proto::LoadReport Load() const;
  std::optional<proto::CacheReport> TakeCacheReport(bool full) const;
  HttpReply Serve(const std::string& path);

  NodeConfig config_;
  engine::Engine* engine_ = nullptr;
  RoleHooks hooks_;
  std::unique_ptr<NodeMetrics> metrics_;
  std::unique_ptr<net::EventLoop> loop_;
  std::unique_ptr<net::RpcServer> server_;
  std::unique_ptr<RouterLink> link_;
  std::unique_ptr<AdminHttpServer> http_;
  std::string address_;
  std::atomic<bool> draining_{false};
};

}  // namespace tandem::node
