#include "router/cluster/cluster_backend.h"

#include <algorithm>
#include <random>

#include "common/base/logging.h"
#include "common/metrics/metric_names.h"
#include "common/net/address.h"
#include "common/proto/messages.h"
#include "router/cluster/placement.h"
#include "router/cluster/tenant_salt.h"

namespace tandem::router::cluster {

namespace {

constexpr int64_t kLocalRetryMs = 20;
constexpr int kMaxLocalRetries = 100;  // 2 s of AlreadyExists before giving up
constexpr int64_t kMinNoRoomBackoffMs = 2;
constexpr int64_t kMaxNoRoomBackoffMs = 50;
constexpr int64_t kTimerTickMs = 20;
constexpr int kMaxRedispatches = 2;

// A fresh 64-bit sampling seed (thread-safe: one random_device per call).
uint64_t NewSeed() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ static_cast<uint64_t>(device());
}

}  // namespace

enum class Phase { kReserving, kPrefilling, kLocal, kDecoding };

struct ClusterBackend::Inflight {
  GenerateRequest request;
  StreamCallbacks callbacks;
  std::string salt;
  // Guarded by ClusterBackend::mu_:
  Epoch epoch = 1;
  Phase phase = Phase::kReserving;
  uint32_t decode_node = 0;
  uint32_t prefill_node = 0;       // while a prefill node holds the prompt
  int64_t prefill_tokens = 0;      // accounted on prefill_node
  bool fell_back = false;          // the local path was taken after a prefill failure
  int local_retries = 0;
  int redispatches = 0;            // moves to another decode node after a death
  std::vector<TokenId> generated;  // tokens delivered so far (for re-dispatch)
  // Prefill nodes' cached prefix of the prompt at dispatch (node id -> tokens),
  // so prefill placement after the reservation does not hash the prompt again.
  std::vector<std::pair<uint32_t, int64_t>> prefill_hits;
  Nanos no_room_until = 0;         // set at the first "no room" refusal
  int64_t no_room_backoff_ms = 0;
  bool ended = false;
  // Serializes callbacks of this request (recursive: a callback may Cancel).
  std::recursive_mutex cb_mu;
};

proto::SamplingParams ToProtoSampling(const GenerateRequest& request) {
  proto::SamplingParams s;
  s.set_temperature(request.sampling.temperature);
  s.set_top_p(request.sampling.top_p);
  s.set_top_k(request.sampling.top_k);
  s.set_min_p(request.sampling.min_p);
  s.set_presence_penalty(request.sampling.presence_penalty);
  s.set_frequency_penalty(request.sampling.frequency_penalty);
  s.set_repetition_penalty(request.sampling.repetition_penalty);
  if (request.sampling.seed) {
    s.set_has_seed(true);
    s.set_seed(*request.sampling.seed);
  }
  s.set_max_tokens(request.max_tokens);
  s.set_ignore_eos(request.ignore_eos);
  for (TokenId id : request.stop_token_ids) s.add_stop_token_ids(id);
  return s;
}

ClusterBackend::ClusterBackend(net::EventLoop& loop, const ClusterConfig& config,
                               metrics::MetricsRegistry* metrics, const Clock& clock)
    : loop_(loop),
      config_(config),
      clock_(clock),
      registry_(clock, config.heartbeat_interval_ms, config.dead_after_missed_heartbeats) {
  if (metrics) {
    nodes_gauge_ = &metrics->AddGauge("tandem_router_nodes",
                                      "Live nodes registered with the router, by role (draining counted apart).",
                                      {"role"});
    cached_blocks_gauge_ = &metrics->AddGauge(
        metrics::kRouterNodeCachedBlocks, "Prefix-cache blocks the router knows a node holds (from heartbeats).",
        {"node"});
  }
}

StatusOr<std::unique_ptr<ClusterBackend>> ClusterBackend::Start(net::EventLoop& loop, const ClusterConfig& config,
                                                                metrics::MetricsRegistry* metrics,
                                                                const Clock& clock) {
  TANDEM_RETURN_IF_ERROR(config.Validate());
  TANDEM_ASSIGN_OR_RETURN(std::string token, config.ResolveToken());
  std::unique_ptr<ClusterBackend> backend(new ClusterBackend(loop, config, metrics, clock));
  ClusterBackend* self = backend.get();
  net::RpcServerConfig server_config;
  server_config.listen_address = config.control_address;
  server_config.rpc.cluster_token = std::move(token);
  server_config.rpc.peer_name = "router";
  server_config.rpc.tls = config.tls.ForServer();
  backend->guard_->self = self;
  net::RpcHandlers handlers;
  handlers.on_request = [guard = backend->guard_](const std::shared_ptr<net::RpcConnection>& conn,
                                                  net::MessagePtr m, net::Responder r) {
    std::lock_guard<std::recursive_mutex> lock(guard->mu);
    if (guard->self) guard->self->OnNodeRequest(conn, std::move(m), std::move(r));
  };
  handlers.on_message = [guard = backend->guard_](const std::shared_ptr<net::RpcConnection>& conn,
                                                  net::MessagePtr m) {
    std::lock_guard<std::recursive_mutex> lock(guard->mu);
    if (guard->self) guard->self->OnNodeMessage(conn, std::move(m));
  };
  handlers.on_close = [guard = backend->guard_](const std::shared_ptr<net::RpcConnection>& conn,
                                                const Status& reason) {
    std::lock_guard<std::recursive_mutex> lock(guard->mu);
    ClusterBackend* self = guard->self;
    if (self == nullptr) return;
    if (std::optional<uint32_t> id = self->registry_.OnConnectionClosed(conn.get())) {
      TANDEM_LOG_WARN("node {} disconnected ({}): dead", *id, reason.ToString());
      self->OnNodeDead(*id);
    }
  };
  TANDEM_ASSIGN_OR_RETURN(backend->server_, net::RpcServer::Start(loop, std::move(server_config), handlers));
  backend->UpdateNodeGauge();
  backend->timer_thread_ = std::thread([self] { self->RunTimer(); });
  TANDEM_LOG_INFO("router control plane on {} ({} mode, local_prefill_max_tokens {})",
                  backend->server_->address(), ServingModeName(config.mode), config.local_prefill_max_tokens);
  return backend;
}

ClusterBackend::~ClusterBackend() { Stop(); }

void ClusterBackend::Stop() {
  if (stopped_.exchange(true)) return;
  {
    std::lock_guard<std::recursive_mutex> lock(guard_->mu);  // waits for a running handler
    guard_->self = nullptr;
  }
  {
    std::lock_guard<std::mutex> lock(timer_mu_);
    stopping_ = true;
  }
  timer_cv_.notify_all();
  if (timer_thread_.joinable()) timer_thread_.join();
  if (server_) server_->Stop();
  std::vector<std::shared_ptr<Inflight>> left;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, r] : requests_) left.push_back(r);
  }
  for (auto& r : left) EndWithError(r, UnavailableError("router shutting down"));
}

std::string ClusterBackend::control_address() const { return server_ ? server_->address() : ""; }

size_t ClusterBackend::num_inflight() const {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_.size();
}

// ---- control plane ----

void ClusterBackend::OnNodeRequest(const std::shared_ptr<net::RpcConnection>& conn, net::MessagePtr message,
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
    UpdateNodeGauge();
    return responder.Reply(*reply);
  }
  responder.Fail(UnimplementedError("the router does not serve " + message->GetTypeName()));
}

void ClusterBackend::OnNodeMessage(const std::shared_ptr<net::RpcConnection>& conn, net::MessagePtr message) {
  if (const auto* heartbeat = proto::MessageAs<proto::Heartbeat>(*message)) {
    registry_.OnHeartbeat(conn.get(), *heartbeat);
  } else if (const auto* tokens = proto::MessageAs<proto::Tokens>(*message)) {
    OnTokens(conn.get(), *tokens);
  } else if (const auto* error = proto::MessageAs<proto::Error>(*message)) {
    TANDEM_LOG_WARN("node error notice for request {}: {}", error->request_id(), error->error().message());
  }
}

void ClusterBackend::OnTokens(const net::RpcConnection* conn, const proto::Tokens& tokens) {
  const uint32_t node_id = registry_.NodeIdOf(conn);
  if (node_id == 0) return;
  for (const proto::TokenEntry& entry : tokens.entries()) {
    std::shared_ptr<Inflight> r;
    bool fallback = false;
    uint32_t left_prefill = 0;  // a prefill node still holding the prompt when decode gave up
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = requests_.find(entry.request_id());
      if (it == requests_.end()) continue;
      r = it->second;
      if (r->epoch != entry.epoch() || r->decode_node != node_id || r->ended) continue;
      const bool before_first = r->phase == Phase::kPrefilling || r->phase == Phase::kReserving;
      if (entry.finish_reason() == proto::FINISH_REASON_ERROR && before_first && entry.token_ids_size() == 0 &&
          !r->fell_back) {
        fallback = true;  // the remote prefill failed before the first token
      } else if (r->phase != Phase::kLocal || entry.token_ids_size() > 0) {
        r->phase = Phase::kDecoding;
      }
      if (r->prefill_node != 0 && (fallback || r->phase == Phase::kDecoding)) {
        if (fallback) left_prefill = r->prefill_node;
        registry_.AddInflight(r->prefill_node, 0, -r->prefill_tokens);
        r->prefill_node = 0;
        r->prefill_tokens = 0;
      }
    }
    if (fallback) {
      TANDEM_LOG_WARN("request {}: remote prefill failed ({}); prefilling on decode", entry.request_id(),
                      entry.error().message());
      if (left_prefill != 0) SendCancel(left_prefill, entry.request_id(), entry.epoch(), "handoff failed");
      ReleaseThenLocal(r, entry.epoch());
      continue;
    }
    if (entry.num_cached_tokens() > 0 && entry.finish_reason() == proto::FINISH_REASON_NONE) {
      DeliverCached(r, entry.epoch(), entry.num_cached_tokens());
    }
    if (entry.token_ids_size() > 0) {
      DeliverTokens(r, entry.epoch(), std::vector<TokenId>(entry.token_ids().begin(), entry.token_ids().end()));
    }
    switch (entry.finish_reason()) {
      case proto::FINISH_REASON_NONE:
        break;
      case proto::FINISH_REASON_STOP:
      case proto::FINISH_REASON_LENGTH: {
        GenerateResult result;
        result.finish_reason =
            entry.finish_reason() == proto::FINISH_REASON_STOP ? FinishReason::kStop : FinishReason::kLength;
        // After a re-dispatch the node's prompt includes generated tokens: count
        // only the client's prompt as cached.
        result.num_cached_prompt_tokens = std::clamp(entry.num_cached_tokens(), 0,
                                                     static_cast<int32_t>(r->request.prompt_token_ids.size()));
        End(r, [result](const StreamCallbacks& cb) { cb.on_finish(result); });
        break;
      }
      case proto::FINISH_REASON_ABORT:
        EndWithError(r, CancelledError("request aborted by the decode node"));
        break;
      default: {
        Status status = proto::FromErrorInfo(entry.error());
        if (status.ok()) status = InternalError("decode node reported an error");
        EndWithError(r, status);
        break;
      }
    }
  }
}

void ClusterBackend::OnNodeDead(uint32_t node_id) {
  UpdateNodeGauge();
  std::vector<std::shared_ptr<Inflight>> failed, moved;
  std::vector<Epoch> moved_epochs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, r] : requests_) {
      if (r->ended) continue;
      if (r->decode_node == node_id) {
        failed.push_back(r);
      } else if (r->prefill_node == node_id) {
        r->prefill_node = 0;
        r->prefill_tokens = 0;
        if (r->phase == Phase::kPrefilling && !r->fell_back) {
          moved.push_back(r);
          moved_epochs.push_back(r->epoch);
        }
      }
    }
  }
  for (auto& r : failed) Redispatch(r, node_id);
  for (size_t i = 0; i < moved.size(); ++i) ReleaseThenLocal(moved[i], moved_epochs[i]);
}

// F1 (RELIABILITY.md): a request whose decode node died continues on another
// decode node (local path, prompt + tokens so far, epoch + 1), at most
// kMaxRedispatches times; otherwise it ends with Unavailable.
void ClusterBackend::Redispatch(const std::shared_ptr<Inflight>& r, uint32_t dead_node) {
  const Status dead = UnavailableError("decode node " + std::to_string(dead_node) + " died");
  std::optional<uint32_t> decode = PickDecodeForLocalPath(r);
  Epoch next = 0;
  bool length_reached = false;
  uint32_t left_prefill = 0;  // a prefill node still holding the prompt for the dead node
  Epoch left_epoch = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (r->ended || r->decode_node != dead_node) return;
    if (decode && r->redispatches < kMaxRedispatches && !stopped_.load()) {
      length_reached = static_cast<int32_t>(r->generated.size()) >= r->request.max_tokens;
      if (!length_reached) {
        if (r->prefill_node != 0) {
          registry_.AddInflight(r->prefill_node, 0, -r->prefill_tokens);
          left_prefill = r->prefill_node;
          left_epoch = r->epoch;
        }
        r->redispatches++;
        r->decode_node = *decode;
        r->prefill_node = 0;
        r->prefill_tokens = 0;
        r->fell_back = true;
        r->phase = Phase::kLocal;
        r->local_retries = 0;
        next = ++r->epoch;
        registry_.AddInflight(*decode, 1, 0);
      }
    }
  }
  if (length_reached) {
    GenerateResult result;
    result.finish_reason = FinishReason::kLength;
    End(r, [result](const StreamCallbacks& cb) { cb.on_finish(result); });
    return;
  }
  if (next == 0) return EndAndCancel(r, dead);
  TANDEM_LOG_WARN("request {}: {}; continuing on decode node {} (epoch {})", r->request.request_id,
                  dead.message(), *decode, next);
  if (left_prefill != 0) SendCancel(left_prefill, r->request.request_id, left_epoch, "decode node died");
  SendLocal(r, next);
}

// ---- request steps ----

void ClusterBackend::Submit(GenerateRequest request, StreamCallbacks callbacks) {
  auto r = std::make_shared<Inflight>();
  r->salt = TenantSalt(request.tenant_id);
  // One seed per request, sent to prefill (first token) and decode (the rest) alike, so a
  // disaggregated sample equals a single-process one with that seed. Explicit seeds stay
  // (GenerationJob already made choice i of n use seed + i).
  if (request.sampling.temperature > 0 && !request.sampling.seed) request.sampling.seed = NewSeed();
  r->request = std::move(request);
  r->callbacks = std::move(callbacks);
  const RequestId id = r->request.request_id;
  bool duplicate = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_.load()) {
      duplicate = true;
    } else {
      duplicate = !requests_.emplace(id, r).second;
    }
  }
  if (duplicate) {
    r->ended = true;
    r->callbacks.on_error(stopped_.load() ? UnavailableError("router shutting down")
                                          : InvalidArgumentError("duplicate request id"));
    return;
  }
  Dispatch(r);
}

void ClusterBackend::Dispatch(const std::shared_ptr<Inflight>& r) {
  const std::vector<NodeView> views = registry_.ViewsFor(r->request.prompt_token_ids, r->salt);
  std::optional<uint32_t> decode = PickDecode(views);
  if (!decode) return EndWithError(r, UnavailableError("no live decode node"));
  const int32_t prompt_len = static_cast<int32_t>(r->request.prompt_token_ids.size());
  const bool local = config_.mode == ServingMode::kColocated || prompt_len <= config_.local_prefill_max_tokens ||
                     !PickPrefill(views, prompt_len).has_value();
  std::vector<std::pair<uint32_t, int64_t>> prefill_hits;
  for (const NodeView& v : views) {
    if (ServesPrefill(v.role) && v.prefix_hit_tokens > 0) prefill_hits.emplace_back(v.node_id, v.prefix_hit_tokens);
  }
  Epoch epoch;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (r->ended) return;
    r->decode_node = *decode;
    r->prefill_hits = std::move(prefill_hits);
    r->phase = local ? Phase::kLocal : Phase::kReserving;
    epoch = r->epoch;
    // Counted in the same section as the placement, so an End racing this cannot
    // subtract first (the registry clamps at 0 and the +1 would stay).
    registry_.AddInflight(*decode, 1, 0);
  }
  if (local) {
    SendLocal(r, epoch);
  } else {
    SendReserve(r);
  }
}

bool ClusterBackend::IsCurrent(const std::shared_ptr<Inflight>& r, Epoch epoch) const {
  std::lock_guard<std::mutex> lock(mu_);
  return !r->ended && r->epoch == epoch;
}

std::optional<uint32_t> ClusterBackend::PickDecodeForLocalPath(const std::shared_ptr<Inflight>& r) {
  std::vector<TokenId> prompt = r->request.prompt_token_ids;  // what the local path will send
  {
    std::lock_guard<std::mutex> lock(mu_);
    prompt.insert(prompt.end(), r->generated.begin(), r->generated.end());
  }
  return PickDecode(registry_.ViewsFor(prompt, r->salt));
}

bool ClusterBackend::RetryWhenRoom(const std::shared_ptr<Inflight>& r, Epoch epoch) {
  Epoch next;
  int64_t delay_ms;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (r->ended || r->epoch != epoch) return true;  // over or moved on meanwhile
    const Nanos now = clock_.NowNanos();
    if (r->no_room_until == 0) r->no_room_until = now + int64_t{config_.no_room_retry_ms} * 1'000'000;
    if (now >= r->no_room_until) return false;
    r->no_room_backoff_ms = std::clamp<int64_t>(2 * r->no_room_backoff_ms, kMinNoRoomBackoffMs, kMaxNoRoomBackoffMs);
    delay_ms = r->no_room_backoff_ms;
    registry_.AddInflight(r->decode_node, -1, 0);  // the next placement counts its node
    r->decode_node = 0;
    r->local_retries = 0;
    next = ++r->epoch;
  }
  RunAfter(delay_ms, [this, r, next] {
    if (!IsCurrent(r, next)) return;
    bool local_only;
    {
      std::lock_guard<std::mutex> lock(mu_);
      local_only = r->fell_back;
    }
    // A request already on the local path (prefill failed, or moved after a decode death
    // with tokens delivered) stays on it: prompt + tokens so far, to one decode node.
    if (!local_only) return Dispatch(r);
    std::optional<uint32_t> decode = PickDecodeForLocalPath(r);
    if (!decode) return EndWithError(r, UnavailableError("no live decode node"));
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (r->ended || r->epoch != next) return;
      r->decode_node = *decode;
      r->phase = Phase::kLocal;
      registry_.AddInflight(*decode, 1, 0);
    }
    SendLocal(r, next);
  });
  return true;
}

void ClusterBackend::SendReserve(const std::shared_ptr<Inflight>& r) {
  uint32_t decode;
  Epoch epoch;
  {
    std::lock_guard<std::mutex> lock(mu_);
    decode = r->decode_node;
    epoch = r->epoch;
  }
  std::optional<NodeHandle> node = registry_.Get(decode);
  if (!node) return EndWithError(r, UnavailableError("decode node went away"));
  proto::ReserveRequest reserve;
  reserve.set_request_id(r->request.request_id);
  reserve.set_epoch(epoch);
  reserve.set_prompt_len(static_cast<int32_t>(r->request.prompt_token_ids.size()));
  reserve.set_max_tokens(r->request.max_tokens);
  for (TokenId t : r->request.prompt_token_ids) reserve.add_token_ids(t);
  *reserve.mutable_sampling() = ToProtoSampling(r->request);
  reserve.set_tenant_salt(r->salt);
  reserve.set_lease_ms(static_cast<uint32_t>(config_.reservation_lease_ms));
  node->conn->Call(reserve, config_.node_call_timeout_ms,
                   [this, r, epoch](StatusOr<net::MessagePtr> reply) { OnReserved(r, epoch, std::move(reply)); });
}

void ClusterBackend::OnReserved(const std::shared_ptr<Inflight>& r, Epoch epoch, StatusOr<net::MessagePtr> reply) {
  if (!IsCurrent(r, epoch)) {
    // Abandoned meanwhile (cancel, node death): free whatever was reserved.
    if (reply.ok()) {
      uint32_t decode;
      {
        std::lock_guard<std::mutex> lock(mu_);
        decode = r->decode_node;
      }
      proto::Release release;
      release.set_request_id(r->request.request_id);
      release.set_epoch(epoch);
      SendToNode(decode, release);
    }
    return;
  }
  if (!reply.ok()) {
    if (reply.status().code() == StatusCode::kResourceExhausted && RetryWhenRoom(r, epoch)) return;
    // A timeout may leave the reservation on decode: cancel it there.
    return EndAndCancel(r, reply.status());
  }
  const auto* reservation = proto::MessageAs<proto::ReserveReply>(**reply);
  if (!reservation) return EndWithError(r, InternalError("decode answered Reserve with " + (*reply)->GetTypeName()));
  if (reservation->needed_runs_size() == 0) {
    // The whole prompt is cached on decode: nothing to transfer.
    return ReleaseThenLocal(r, epoch);
  }
  std::vector<NodeView> views = registry_.Views();
  uint32_t decode_id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    decode_id = r->decode_node;
    for (NodeView& v : views) {
      for (const auto& [node, hit] : r->prefill_hits) {
        if (v.node_id == node) v.prefix_hit_tokens = hit;
      }
    }
  }
  const int64_t prompt_len = static_cast<int64_t>(r->request.prompt_token_ids.size());
  std::optional<uint32_t> prefill = PickPrefill(views, prompt_len);
  if (!prefill) return ReleaseThenLocal(r, epoch);
  std::optional<NodeHandle> prefill_node = registry_.Get(*prefill);
  std::optional<NodeHandle> decode_node = registry_.Get(decode_id);
  if (!prefill_node || !decode_node) return ReleaseThenLocal(r, epoch);
  // What the router counts as queued there: the tokens that node will compute.
  int64_t tokens = prompt_len;
  for (const NodeView& v : views) {
    if (v.node_id == *prefill) tokens = UncachedTokens(v, prompt_len);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (r->ended || r->epoch != epoch) return;
    r->phase = Phase::kPrefilling;
    r->prefill_node = *prefill;
    r->prefill_tokens = tokens;
    registry_.AddInflight(*prefill, 0, tokens);
  }
  proto::PrefillRequest request;
  request.set_request_id(r->request.request_id);
  request.set_epoch(epoch);
  for (TokenId t : r->request.prompt_token_ids) request.add_token_ids(t);
  *request.mutable_sampling() = ToProtoSampling(r->request);
  *request.mutable_reservation() = *reservation;
  request.set_decode_address(decode_node->address);
  request.set_tenant_salt(r->salt);
  const uint32_t prefill_id = *prefill;
  prefill_node->conn->Call(request, config_.node_call_timeout_ms, [this, r, epoch, prefill_id](
                                                                       StatusOr<net::MessagePtr> ack) {
    if (ack.ok()) {
      // A cancel sent while this PrefillRequest was in flight may have reached the node first.
      if (!IsCurrent(r, epoch)) SendCancel(prefill_id, r->request.request_id, epoch, "request ended");
      return;
    }
    bool fallback = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!r->ended && r->epoch == epoch && r->phase == Phase::kPrefilling) {
        if (r->prefill_node != 0) registry_.AddInflight(r->prefill_node, 0, -r->prefill_tokens);
        r->prefill_node = 0;
        r->prefill_tokens = 0;
        fallback = true;
      }
    }
    if (fallback) {
      TANDEM_LOG_WARN("request {}: prefill node refused ({}); prefilling on decode", r->request.request_id,
                      ack.status().ToString());
      // After a timeout the prefill node may hold it after all.
      SendCancel(prefill_id, r->request.request_id, epoch, "prefill abandoned");
      ReleaseThenLocal(r, epoch);
    }
  });
}

void ClusterBackend::ReleaseThenLocal(const std::shared_ptr<Inflight>& r, Epoch epoch) {
  Epoch next;
  uint32_t decode;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (r->ended || r->epoch != epoch) return;
    r->fell_back = true;
    r->phase = Phase::kLocal;
    next = ++r->epoch;
    decode = r->decode_node;
  }
  proto::Release release;
  release.set_request_id(r->request.request_id);
  release.set_epoch(epoch);
  SendToNode(decode, release);
  SendLocal(r, next);
}

void ClusterBackend::SendLocal(const std::shared_ptr<Inflight>& r, Epoch epoch) {
  uint32_t decode;
  std::vector<TokenId> generated;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (r->ended || r->epoch != epoch) return;
    decode = r->decode_node;
    generated = r->generated;
  }
  std::optional<NodeHandle> node = registry_.Get(decode);
  if (!node) return EndWithError(r, UnavailableError("decode node went away"));
  proto::PrefillRequest request;
  request.set_request_id(r->request.request_id);
  request.set_epoch(epoch);
  // After a re-dispatch the tokens generated so far are part of the prompt.
  for (TokenId t : r->request.prompt_token_ids) request.add_token_ids(t);
  for (TokenId t : generated) request.add_token_ids(t);
  *request.mutable_sampling() = ToProtoSampling(r->request);
  request.mutable_sampling()->set_max_tokens(r->request.max_tokens - static_cast<int32_t>(generated.size()));
  // The node samples them as output (draw positions, penalties), continuing the same draws.
  request.mutable_sampling()->set_num_output_tokens_in_prompt(static_cast<int32_t>(generated.size()));
  request.set_tenant_salt(r->salt);
  node->conn->Call(request, config_.node_call_timeout_ms, [this, r, epoch, decode](StatusOr<net::MessagePtr> ack) {
    if (ack.ok()) {
      // A cancel sent while this PrefillRequest was in flight may have reached the node
      // first; then the node runs a request nobody waits for. Cancel it again.
      if (!IsCurrent(r, epoch)) SendCancel(decode, r->request.request_id, epoch, "request ended");
      return;
    }
    if (!IsCurrent(r, epoch)) return;
    if (ack.status().code() == StatusCode::kAlreadyExists) {
      bool retry = false;
      {
        std::lock_guard<std::mutex> lock(mu_);
        retry = ++r->local_retries <= kMaxLocalRetries;
      }
      // The decode still holds the released epoch; it lets go within a step.
      if (retry) return RunAfter(kLocalRetryMs, [this, r, epoch] { SendLocal(r, epoch); });
    }
    if (ack.status().code() == StatusCode::kResourceExhausted && RetryWhenRoom(r, epoch)) return;
    // A timeout may leave the request on decode (accepted late, or waiting behind an older epoch).
    EndAndCancel(r, ack.status());
  });
}

void ClusterBackend::Cancel(RequestId request_id) { CancelWith(request_id, CancelledError("request cancelled")); }

void ClusterBackend::CancelWith(RequestId request_id, const Status& status) {
  std::shared_ptr<Inflight> r;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = requests_.find(request_id);
    if (it == requests_.end()) return;
    r = it->second;
  }
  EndAndCancel(r, status);
}

void ClusterBackend::EndAndCancel(const std::shared_ptr<Inflight>& r, const Status& status) {
  // Ended before the nodes hear of it: a node's answer to this cancel (a failed KV handoff)
  // must not look like a prefill failure and start the local path at a newer epoch.
  std::optional<Holders> held = End(r, [status](const StreamCallbacks& cb) { cb.on_error(status); });
  if (!held) return;
  const RequestId id = r->request.request_id;
  if (held->decode != 0) SendCancel(held->decode, id, held->epoch, "cancelled by the router");
  if (held->prefill != 0) SendCancel(held->prefill, id, held->epoch, "cancelled by the router");
}

void ClusterBackend::SendCancel(uint32_t node_id, RequestId request_id, Epoch epoch, const char* reason) {
  proto::Cancel cancel;
  cancel.set_request_id(request_id);
  cancel.set_epoch(epoch);
  cancel.set_reason(reason);
  SendToNode(node_id, cancel);
}

void ClusterBackend::SendToNode(uint32_t node_id, const google::protobuf::Message& message) {
  std::optional<NodeHandle> node = registry_.Get(node_id);
  if (!node) return;
  node->conn->Call(message, config_.node_call_timeout_ms, [](StatusOr<net::MessagePtr>) {});
}

// ---- delivery ----

void ClusterBackend::DeliverTokens(const std::shared_ptr<Inflight>& r, Epoch epoch, std::vector<TokenId> tokens) {
  std::lock_guard<std::recursive_mutex> cb_lock(r->cb_mu);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (r->ended || r->epoch != epoch) return;
    r->generated.insert(r->generated.end(), tokens.begin(), tokens.end());
  }
  if (r->callbacks.on_tokens) r->callbacks.on_tokens(std::move(tokens));
}

void ClusterBackend::DeliverCached(const std::shared_ptr<Inflight>& r, Epoch epoch, int32_t cached) {
  std::lock_guard<std::recursive_mutex> cb_lock(r->cb_mu);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (r->ended || r->epoch != epoch) return;
  }
  // After a re-dispatch the node's prompt includes generated tokens: only the client's count.
  if (r->callbacks.on_cached) {
    r->callbacks.on_cached(std::clamp(cached, 0, static_cast<int32_t>(r->request.prompt_token_ids.size())));
  }
}

std::optional<ClusterBackend::Holders> ClusterBackend::End(
    const std::shared_ptr<Inflight>& r, const std::function<void(const StreamCallbacks&)>& finish) {
  std::lock_guard<std::recursive_mutex> cb_lock(r->cb_mu);
  Holders held;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (r->ended) return std::nullopt;
    r->ended = true;
    held = Holders{r->decode_node, r->prefill_node, r->epoch};
    if (held.decode != 0) registry_.AddInflight(held.decode, -1, 0);
    if (held.prefill != 0) registry_.AddInflight(held.prefill, 0, -r->prefill_tokens);
    auto it = requests_.find(r->request.request_id);
    if (it != requests_.end() && it->second == r) requests_.erase(it);
  }
  finish(r->callbacks);
  return held;
}

void ClusterBackend::EndWithError(const std::shared_ptr<Inflight>& r, const Status& status) {
  End(r, [status](const StreamCallbacks& cb) { cb.on_error(status); });
}

// ---- timer thread ----

void ClusterBackend::UpdateNodeGauge() {
  if (!nodes_gauge_) return;
  NodeCounts counts = registry_.Counts();
  nodes_gauge_->WithLabels({"decode"}).Set(counts.decode);
  nodes_gauge_->WithLabels({"prefill"}).Set(counts.prefill);
  nodes_gauge_->WithLabels({"draining"}).Set(counts.draining);
}

void ClusterBackend::UpdateCacheGauge() {
  if (!cached_blocks_gauge_) return;
  std::map<std::string, int64_t> by_name;  // a restarted node may briefly be there twice
  for (const auto& [name, blocks] : registry_.CachedBlocksByNode()) by_name[name] += blocks;
  std::set<std::string> live;
  for (const auto& [name, blocks] : by_name) {
    cached_blocks_gauge_->WithLabels({name}).Set(static_cast<double>(blocks));
    live.insert(name);
  }
  // Series cannot be removed: a node that left reads 0.
  for (const std::string& name : cache_gauge_names_) {
    if (live.count(name) == 0) cached_blocks_gauge_->WithLabels({name}).Set(0);
  }
  cache_gauge_names_.insert(live.begin(), live.end());
}

void ClusterBackend::RunAfter(int64_t delay_ms, std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(timer_mu_);
    if (stopping_) return;
    timers_.emplace(clock_.NowNanos() + delay_ms * 1'000'000, std::move(task));
  }
  timer_cv_.notify_all();
}

void ClusterBackend::RunTimer() {
  std::unique_lock<std::mutex> lock(timer_mu_);
  while (!stopping_) {
    timer_cv_.wait_for(lock, std::chrono::milliseconds(kTimerTickMs));
    if (stopping_) break;
    std::vector<std::function<void()>> due;
    const Nanos now = clock_.NowNanos();
    while (!timers_.empty() && timers_.begin()->first <= now) {
      due.push_back(std::move(timers_.begin()->second));
      timers_.erase(timers_.begin());
    }
    lock.unlock();
    for (auto& task : due) task();
    for (const NodeHandle& dead : registry_.SweepExpired()) {
      TANDEM_LOG_WARN("node {} ('{}') missed {} heartbeats: dead", dead.node_id, dead.name,
                      config_.dead_after_missed_heartbeats);
      dead.conn->Close(UnavailableError("heartbeats stopped"));
      OnNodeDead(dead.node_id);
    }
    // Deadlines (the HTTP layer cancels too; this catches requests nobody watches).
    std::vector<RequestId> expired;
    {
      std::lock_guard<std::mutex> req_lock(mu_);
      const Nanos real_now = Clock::Real().NowNanos();
      for (const auto& [id, r] : requests_) {
        if (r->request.deadline_ns != 0 && real_now > r->request.deadline_ns) expired.push_back(id);
      }
    }
    for (RequestId id : expired) CancelWith(id, DeadlineExceededError("request deadline passed"));
    UpdateNodeGauge();
    UpdateCacheGauge();
    lock.lock();
  }
}

}  // namespace tandem::router::cluster
