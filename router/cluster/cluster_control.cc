// ClusterClient, control-plane side: the RpcServer's handlers (registration,
// heartbeats, Tokens, closed connections) and the periodic tick (heartbeat
// sweep, deadlines, gauges), both on the EventLoop's I/O threads.
#include <algorithm>

#include "common/base/logging.h"
#include "common/net/address.h"
#include "common/proto/messages.h"
#include "router/cluster/cluster_client.h"

namespace tandem::router::cluster {

StatusOr<std::unique_ptr<ClusterClient>> ClusterClient::Start(net::EventLoop& loop, const ClusterConfig& config,
                                                              metrics::MetricsRegistry* metrics, const Clock& clock) {
  TANDEM_RETURN_IF_ERROR(config.Validate());
  TANDEM_ASSIGN_OR_RETURN(std::string token, config.ResolveToken());
  std::unique_ptr<ClusterClient> engine(new ClusterClient(loop, config, metrics, clock));
  net::RpcServerConfig server_config;
  server_config.listen_address = config.control_address;
  server_config.rpc.cluster_token = std::move(token);
  server_config.rpc.peer_name = "router";
  server_config.rpc.tls = config.control_tls;  // its ca_file: every node must present a certificate it verifies
  // A connection with no traffic at all is closed (the node is dead) after the same
  // silence that declares a node dead; keepalives keep an idle, live one open.
  server_config.rpc.idle_timeout_ms = config.node_dead_after_ms;
  server_config.rpc.keepalive_interval_ms =
      std::min<int64_t>(server_config.rpc.keepalive_interval_ms, config.node_dead_after_ms / 2);
  engine->guard_->self = engine.get();
  net::RpcHandlers handlers;
  handlers.on_request = [guard = engine->guard_](const std::shared_ptr<net::RpcConnection>& conn, net::MessagePtr m,
                                                 net::Responder r) {
    std::lock_guard<std::recursive_mutex> lock(guard->mu);
    if (guard->self) guard->self->OnNodeRequest(conn, std::move(m), std::move(r));
  };
  handlers.on_message = [guard = engine->guard_](const std::shared_ptr<net::RpcConnection>& conn, net::MessagePtr m) {
    std::lock_guard<std::recursive_mutex> lock(guard->mu);
    if (guard->self) guard->self->OnNodeMessage(conn, std::move(m));
  };
  handlers.on_close = [guard = engine->guard_](const std::shared_ptr<net::RpcConnection>& conn, const Status& reason) {
    std::lock_guard<std::recursive_mutex> lock(guard->mu);
    ClusterClient* self = guard->self;
    if (self == nullptr) return;
    if (std::optional<uint32_t> id =
            self->registry_.OnConnectionClosed(conn.get(), "connection closed: " + reason.ToString())) {
      TANDEM_LOG_WARN("node {} disconnected ({}): dead", *id, reason.ToString());
      self->OnNodeDead(*id);
    }
  };
  TANDEM_ASSIGN_OR_RETURN(engine->server_, net::RpcServer::Start(loop, std::move(server_config), handlers));
  engine->gauges_.UpdateNodes(engine->registry_);
  engine->StartTicker();
  TANDEM_LOG_INFO("router control plane on {} ({} mode, local_prefill_max_tokens {})", engine->server_->address(),
                  ServingModeName(config.mode), config.local_prefill_max_tokens);
  return engine;
}

void ClusterClient::OnNodeRequest(const std::shared_ptr<net::RpcConnection>& conn, net::MessagePtr message,
                                  net::Responder responder) {
  if (const auto* reg = proto::MessageAs<proto::RegisterRequest>(*message)) {
    StatusOr<proto::RegisterReply> reply = registry_.Register(conn, *reg);
    if (!reply.ok()) {
      StatusOr<net::HostPort> peer = net::ParseHostPort(conn->remote_address());
      const std::string host = peer.ok() ? peer->host : conn->remote_address();
      int64_t suppressed = 0;
      if (refused_registrations_.Allow(host + "|" + reply.status().ToString(), &suppressed)) {
        TANDEM_LOG_WARN("refused registration of node '{}' from {}: {}{}", reg->node_name().substr(0, 256), host,
                        reply.status().ToString(), SuppressedNote(suppressed));
      }
      return responder.Fail(reply.status());
    }
    TANDEM_LOG_INFO("node {} registered: role {} name '{}' address {}", reply->node_id(),
                    proto::NodeRole_Name(reg->role()), reg->node_name(), reg->address());
    gauges_.UpdateNodes(registry_);
    return responder.Reply(*reply);
  }
  responder.Fail(UnimplementedError("the router does not serve " + message->GetTypeName()));
}

void ClusterClient::OnNodeMessage(const std::shared_ptr<net::RpcConnection>& conn, net::MessagePtr message) {
  if (const auto* heartbeat = proto::MessageAs<proto::Heartbeat>(*message)) {
    if (NodeId draining = registry_.OnHeartbeat(conn.get(), *heartbeat)) OnNodeDraining(draining, "is draining");
  } else if (const auto* tokens = proto::MessageAs<proto::Tokens>(*message)) {
    registry_.MarkSeen(conn.get());
    OnTokens(conn.get(), *tokens);
  } else if (const auto* error = proto::MessageAs<proto::Error>(*message)) {
    TANDEM_LOG_WARN("node error notice for request {}: {}", error->request_id(), error->error().message());
  }
}

namespace {

TokenLogprobs FromProto(const proto::TokenLogprobs& logprobs) {
  TokenLogprobs out;
  out.logprob = logprobs.logprob();
  for (const proto::TokenLogprob& t : logprobs.top()) out.top.push_back({t.token_id(), t.logprob()});
  return out;
}

}  // namespace

void ClusterClient::OnTokens(const net::RpcConnection* conn, const proto::Tokens& tokens) {
  const NodeId node_id = registry_.NodeIdOf(conn);
  if (node_id == 0) return;
  for (const proto::TokenEntry& entry : tokens.entries()) {
    std::shared_ptr<Entry> request = Find(entry.request_id());
    if (!request) continue;
    HandoffEvent event = MakeEvent(HandoffEventKind::kTokens);
    event.node = node_id;
    event.epoch = entry.epoch();
    event.tokens.assign(entry.token_ids().begin(), entry.token_ids().end());
    for (const proto::TokenLogprobs& logprobs : entry.logprobs()) event.logprobs.push_back(FromProto(logprobs));
    for (const proto::TokenLogprobs& p : entry.prompt_logprobs()) event.prompt_logprobs.push_back(FromProto(p));
    if (entry.has_stage_times()) {
      const proto::StageTimes& t = entry.stage_times();
      event.stage_times =
          NodeStageTimes{t.decode_queue_s(), t.prefill_queue_s(), t.prefill_s(), t.kv_transfer_s(), t.kv_wait_s()};
    }
    event.finish = entry.finish_reason();
    event.status = proto::FromErrorInfo(entry.error());
    event.cached_tokens = entry.num_cached_tokens();
    Post(request, std::move(event));
  }
}

void ClusterClient::OnNodeDead(NodeId node_id) {
  gauges_.UpdateNodes(registry_);
  for (const std::shared_ptr<Entry>& entry : AllEntries()) {
    HandoffEvent dead = MakeEvent(HandoffEventKind::kNodeDead);
    dead.node = node_id;
    Post(entry, std::move(dead));
  }
}

void ClusterClient::OnNodeDraining(NodeId node_id, std::string_view why) {
  const bool elsewhere = registry_.HasOtherDecodeNode(node_id);
  TANDEM_LOG_INFO("node {} {}: {}", node_id, why,
                  elsewhere ? "requests it has not begun to stream are placed again"
                            : "no other decode node, so its requests stay");
  gauges_.UpdateNodes(registry_);
  for (const std::shared_ptr<Entry>& entry : AllEntries()) {
    HandoffEvent draining = MakeEvent(HandoffEventKind::kNodeDraining);
    draining.node = node_id;
    draining.elsewhere = elsewhere;
    Post(entry, std::move(draining));
  }
}

Status ClusterClient::DrainNode(NodeId node_id, const std::string& reason) {
  std::optional<NodeHandle> node = registry_.Get(node_id);
  if (!node) return NotFoundError("no live node " + std::to_string(node_id));
  // Placement stops at once; requests it has not begun to stream move now.
  if (registry_.RequestDrain(node_id)) OnNodeDraining(node_id, "is drained by an operator (" + reason + ")");
  proto::Drain drain;
  drain.set_reason(reason);
  node->conn->Call(drain, config_.node_call_timeout_ms, [node_id, name = node->name](StatusOr<net::MessagePtr> reply) {
    Status status = reply.status();
    if (reply.ok() && !proto::MessageAs<proto::Ack>(**reply)) {
      status = InternalError("answered Drain with " + (*reply)->GetTypeName());
    }
    if (status.ok()) {
      TANDEM_LOG_INFO("node {} ('{}') is draining", node_id, name);
    } else {
      TANDEM_LOG_WARN("node {} ('{}') did not take the drain: {}; it gets no new work", node_id, name,
                      status.ToString());
    }
  });
  return Status::Ok();
}

void ClusterClient::Tick() {
  for (const NodeHandle& dead : registry_.SweepExpired()) {
    TANDEM_LOG_WARN("node {} ('{}') silent for {} ms: dead", dead.node_id, dead.name, config_.node_dead_after_ms);
    // Its requests move before the close fails the calls in flight to it.
    OnNodeDead(dead.node_id);
    dead.conn->Close(UnavailableError("node fell silent"));
  }
  CancelExpired();
  gauges_.UpdateNodes(registry_);
  gauges_.UpdateCachedBlocks(registry_);
  gauges_.UpdateWaitingForRoom(waiting_for_room_.size());
}

}  // namespace tandem::router::cluster
