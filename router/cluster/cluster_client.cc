#include "router/cluster/cluster_client.h"

#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <deque>
#include <random>

#include "common/base/logging.h"
#include "common/proto/messages.h"
#include "router/cluster/node_messages.h"
#include "router/cluster/placement.h"
#include "router/cluster/tenant_salt.h"

namespace tandem::router::cluster {

namespace {

constexpr int64_t kTickMs = 20;

// A fresh 64-bit sampling seed (thread-safe: one random_device per call).
uint64_t NewSeed() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ static_cast<uint64_t>(device());
}

HandoffParams ParamsFor(const GenerateRequest& request, const ClusterConfig& config) {
  HandoffParams p;
  p.request_id = request.request_id;
  p.prompt_len = static_cast<int32_t>(request.prompt_token_ids.size());
  p.max_tokens = request.max_tokens;
  p.no_room_retry_ms = config.no_room_retry_ms;
  p.prefill_with_reserve = config.prefill_with_reserve;
  return p;
}

}  // namespace

// One request in the table: what the client asked for, its Handoff and its mailbox.
struct ClusterClient::Entry {
  Entry(GenerateRequest r, StreamCallbacks cb, const ClusterConfig& config)
      : request(std::move(r)),
        callbacks(std::move(cb)),
        salt(TenantSalt(request.tenant_id)),
        handoff(ParamsFor(request, config)) {}

  const GenerateRequest request;
  const StreamCallbacks callbacks;
  const std::string salt;
  uint64_t arrival = 0;  // set once by Submit: its place in the order room goes in
  std::mutex mu;
  Handoff handoff;                   // guarded by mu
  std::deque<HandoffEvent> pending;  // guarded by mu
  bool running = false;              // guarded by mu: a thread is handling the queue
  // Owned by the thread handling the queue (running):
  std::unique_ptr<boost::asio::steady_timer> timer;
  bool waited_for_room = false;  // since its last tokens: they end the wait (ArmTimer, kDeliverTokens)
  // Prefill nodes' cached prefix of the prompt at dispatch (node id -> tokens), so the
  // prefill placement after the reservation does not hash the prompt again.
  std::vector<std::pair<NodeId, int64_t>> prefill_hits;
};

struct ClusterClient::Ticker {
  explicit Ticker(boost::asio::io_context& io) : timer(io) {}
  boost::asio::steady_timer timer;
};

ClusterClient::ClusterClient(net::EventLoop& loop, const ClusterConfig& config, metrics::MetricsRegistry* metrics,
                             const Clock& clock)
    : loop_(loop),
      config_(config),
      clock_(clock),
      registry_(clock, config.heartbeat_interval_ms, config.node_dead_after_ms),
      gauges_(metrics) {}

ClusterClient::~ClusterClient() { Stop(); }

void ClusterClient::Stop() {
  if (stopped_.exchange(true)) return;
  {
    std::lock_guard<std::recursive_mutex> lock(guard_->mu);  // waits for a running handler
    guard_->self = nullptr;
    ticker_.reset();  // cancels the tick; its handler finds no engine
  }
  if (server_) server_->Stop();
  for (const std::shared_ptr<Entry>& entry : AllEntries()) Post(entry, MakeEvent(HandoffEventKind::kShutdown));
  // A request another thread is handling ends there: wait for it (its timer goes with it).
  std::unique_lock<std::mutex> lock(mu_);
  forgotten_.wait(lock, [this] { return requests_.empty(); });
}

void ClusterClient::StartTicker() {
  std::lock_guard<std::recursive_mutex> lock(guard_->mu);
  ticker_ = std::make_unique<Ticker>(loop_.context());
  ScheduleTick();
}

void ClusterClient::ScheduleTick() {
  ticker_->timer.expires_after(std::chrono::milliseconds(kTickMs));
  ticker_->timer.async_wait([guard = guard_](const boost::system::error_code& ec) {
    if (ec) return;  // cancelled by Stop()
    std::lock_guard<std::recursive_mutex> lock(guard->mu);
    if (guard->self == nullptr) return;
    guard->self->Tick();
    guard->self->ScheduleTick();
  });
}

void ClusterClient::CancelExpired() {
  // The HTTP layer cancels too; this catches requests nobody watches.
  const Nanos real_now = Clock::Real().NowNanos();
  for (const std::shared_ptr<Entry>& entry : AllEntries()) {
    if (entry->request.deadline_ns == 0 || real_now <= entry->request.deadline_ns) continue;
    HandoffEvent cancel = MakeEvent(HandoffEventKind::kCancel);
    cancel.status = DeadlineExceededError("request deadline passed");
    Post(entry, std::move(cancel));
  }
}

std::string ClusterClient::control_address() const { return server_ ? server_->address() : ""; }

size_t ClusterClient::num_inflight() const {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_.size();
}

void ClusterClient::Submit(GenerateRequest request, StreamCallbacks callbacks) {
  // One seed per request, sent to prefill (first token) and decode (the rest) alike, so a
  // disaggregated sample equals a single-process one with that seed. Explicit seeds stay
  // (GenerationJob already made choice i of n use seed + i).
  if (request.sampling.temperature > 0 && !request.sampling.seed) request.sampling.seed = NewSeed();
  auto entry = std::make_shared<Entry>(std::move(request), std::move(callbacks), config_);
  bool added = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stopped_.load()) added = requests_.emplace(entry->request.request_id, entry).second;
    entry->arrival = ++arrivals_;
  }
  if (!added) {
    entry->callbacks.on_error(stopped_.load() ? UnavailableError("router shutting down")
                                              : InvalidArgumentError("duplicate request id"));
    return;
  }
  Post(entry, MakeEvent(HandoffEventKind::kStart));
}

void ClusterClient::Cancel(RequestId request_id) {
  if (std::shared_ptr<Entry> entry = Find(request_id)) {
    HandoffEvent event = MakeEvent(HandoffEventKind::kCancel);
    event.status = CancelledError("request cancelled");
    Post(entry, std::move(event));
  }
}

void ClusterClient::Post(const std::shared_ptr<Entry>& entry, HandoffEvent event, bool first) {
  std::unique_lock<std::mutex> lock(entry->mu);
  if (first) {
    entry->pending.push_front(std::move(event));
  } else {
    entry->pending.push_back(std::move(event));
  }
  if (entry->running) return;  // that thread handles it after what it has in hand
  entry->running = true;
  while (!entry->pending.empty()) {
    HandoffEvent next = std::move(entry->pending.front());
    entry->pending.pop_front();
    std::vector<HandoffAction> actions = entry->handoff.Handle(next);
    lock.unlock();
    for (HandoffAction& action : actions) Execute(entry, action);
    lock.lock();
  }
  entry->running = false;
}

void ClusterClient::Execute(const std::shared_ptr<Entry>& entry, HandoffAction& action) {
  const GenerateRequest& request = entry->request;
  switch (action.kind) {
    case HandoffActionKind::kPlaceDecode: return PlaceDecode(entry, action);
    case HandoffActionKind::kPlacePrefill: return PlacePrefill(entry, action);
    case HandoffActionKind::kSendReserve:
      return CallNode(entry, action,
                      MakeReserveRequest(request, action.epoch, entry->salt, config_.reservation_lease_ms),
                      HandoffEventKind::kReserved, HandoffEventKind::kReserveFailed);
    case HandoffActionKind::kSendPrefill: {
      std::optional<NodeHandle> decode = registry_.Get(action.decode_node);
      if (!decode) {
        HandoffEvent failed = MakeEvent(HandoffEventKind::kPrefillFailed);
        failed.node = action.node;
        failed.epoch = action.epoch;
        failed.status = UnavailableError("decode node went away");
        return Post(entry, std::move(failed));
      }
      return CallNode(entry, action,
                      MakeRemotePrefillRequest(request, action.epoch, entry->salt, action.reply.get(), decode->address),
                      HandoffEventKind::kPrefillAcked, HandoffEventKind::kPrefillFailed);
    }
    case HandoffActionKind::kSendPrefillTarget:
      return CallNode(entry, action, MakePrefillTarget(request.request_id, action.epoch, *action.reply),
                      HandoffEventKind::kPrefillAcked, HandoffEventKind::kPrefillFailed);
    case HandoffActionKind::kSendLocal:
      return CallNode(entry, action, MakeLocalPrefillRequest(request, action.epoch, entry->salt, action.tokens),
                      HandoffEventKind::kLocalAcked, HandoffEventKind::kLocalFailed);
    case HandoffActionKind::kSendRelease: {
      proto::Release release;
      release.set_request_id(request.request_id);
      release.set_epoch(action.epoch);
      return SendToNode(action.node, release);
    }
    case HandoffActionKind::kSendCancel: {
      proto::Cancel cancel;
      cancel.set_request_id(request.request_id);
      cancel.set_epoch(action.epoch);
      cancel.set_reason(action.text);
      return SendToNode(action.node, cancel);
    }
    case HandoffActionKind::kDeliverTokens:
      // Tokens come from a node that has it: a wait for room whose answer went astray (an Ack
      // timing out after the tokens) is over too.
      if (entry->waited_for_room) {  // not a lookup per token: only after a wait
        entry->waited_for_room = false;
        if (waiting_for_room_.Remove(request.request_id)) WakeForRoomSoon();
      }
      if (action.stage_times && entry->callbacks.on_stage_times) entry->callbacks.on_stage_times(*action.stage_times);
      if (!action.prompt_logprobs.empty() && entry->callbacks.on_prompt_logprobs) {
        entry->callbacks.on_prompt_logprobs(std::move(action.prompt_logprobs));
      }
      if (entry->callbacks.on_tokens) entry->callbacks.on_tokens(std::move(action.tokens), std::move(action.logprobs));
      return;
    case HandoffActionKind::kDeliverCached:
      if (entry->callbacks.on_cached) entry->callbacks.on_cached(action.cached_tokens);
      return;
    case HandoffActionKind::kFinish: Forget(entry); return entry->callbacks.on_finish(action.result);
    case HandoffActionKind::kFail: Forget(entry); return entry->callbacks.on_error(action.status);
    case HandoffActionKind::kArmTimer: return ArmTimer(entry, action);
    case HandoffActionKind::kAddInflight:
      return registry_.AddInflight(action.node, action.requests, action.prefill_tokens);
    case HandoffActionKind::kAvoidNode:
      // Passed over for as long as a call may take: a heartbeat proves life, not an answer.
      if (registry_.Avoid(action.node, config_.node_call_timeout_ms)) {
        OnNodeDraining(action.node, "timed out or answered unavailable");
      }
      return;
    case HandoffActionKind::kLogWarning: TANDEM_LOG_WARN("{}", action.text); return;
  }
}

void ClusterClient::PlaceDecode(const std::shared_ptr<Entry>& entry, const HandoffAction& action) {
  const GenerateRequest& request = entry->request;
  HandoffEvent placed = MakeEvent(HandoffEventKind::kDecodePlaced);
  if (action.may_wait && !waiting_for_room_.MayTry(request.request_id, request.priority, entry->arrival)) {
    placed.wait_for_room = true;
    return Post(entry, std::move(placed), /*first=*/true);
  }
  std::vector<TokenId> prompt = request.prompt_token_ids;  // what the node will be sent
  prompt.insert(prompt.end(), action.tokens.begin(), action.tokens.end());
  const std::vector<NodeView> views = registry_.ViewsFor(prompt, entry->salt);
  std::optional<NodeId> decode = stopped_.load() ? std::nullopt : PickDecode(views);
  placed.node = decode.value_or(0);
  const int32_t prompt_len = static_cast<int32_t>(request.prompt_token_ids.size());
  if (action.local_only) {
    placed.local = true;
  } else if (decode) {
    // A colocated node prefills its own requests, in either mode (a mixed pool: colocated
    // replicas beside P/D pairs behind one router).
    const bool colocated_node = std::any_of(views.begin(), views.end(), [&](const NodeView& v) {
      return v.node_id == *decode && v.role == proto::NODE_ROLE_COLOCATED;
    });
    placed.local = config_.mode == ServingMode::kColocated || colocated_node ||
                   prompt_len <= config_.local_prefill_max_tokens || !PickPrefill(views, prompt_len).has_value();
    entry->prefill_hits.clear();
    for (const NodeView& v : views) {
      if (ServesPrefill(v.role) && v.prefix_hit_tokens > 0)
        entry->prefill_hits.emplace_back(v.node_id, v.prefix_hit_tokens);
    }
  }
  Post(entry, std::move(placed), /*first=*/true);
}

void ClusterClient::PlacePrefill(const std::shared_ptr<Entry>& entry, const HandoffAction& action) {
  std::vector<NodeView> views = registry_.Views();
  for (NodeView& v : views) {
    for (const auto& [node, hit] : entry->prefill_hits) {
      if (v.node_id == node) v.prefix_hit_tokens = hit;
    }
  }
  const int64_t prompt_len = static_cast<int64_t>(entry->request.prompt_token_ids.size());
  HandoffEvent placed = MakeEvent(HandoffEventKind::kPrefillPlaced);
  std::optional<NodeId> prefill = PickPrefill(views, prompt_len);
  if (prefill && registry_.Get(*prefill) && registry_.Get(action.node)) {
    placed.node = *prefill;
    // What the router counts as queued there: the tokens that node will compute.
    placed.prefill_tokens = prompt_len;
    for (const NodeView& v : views) {
      if (v.node_id == *prefill) placed.prefill_tokens = UncachedTokens(v, prompt_len);
    }
  }
  Post(entry, std::move(placed), /*first=*/true);
}

void ClusterClient::CallNode(const std::shared_ptr<Entry>& entry, const HandoffAction& action,
                             const google::protobuf::Message& message, HandoffEventKind ok, HandoffEventKind failed) {
  HandoffEvent answer = MakeEvent(failed);
  answer.node = action.node;
  answer.epoch = action.epoch;
  std::optional<NodeHandle> node = registry_.Get(action.node);
  if (!node) {
    answer.status = UnavailableError(failed == HandoffEventKind::kPrefillFailed ? "prefill node went away"
                                                                                : "decode node went away");
    return Post(entry, std::move(answer));
  }
  node->conn->Call(message, config_.node_call_timeout_ms,
                   [guard = guard_, entry, answer = std::move(answer), ok](StatusOr<net::MessagePtr> reply) mutable {
                     std::lock_guard<std::recursive_mutex> lock(guard->mu);
                     ClusterClient* self = guard->self;
                     if (self == nullptr) return;
                     answer.now_ns = self->clock_.NowNanos();
                     if (reply.ok() && (ok == HandoffEventKind::kReserved || ok == HandoffEventKind::kLocalAcked) &&
                         self->waiting_for_room_.Remove(entry->request.request_id)) {
                       self->WakeForRoomSoon();  // it waited and has room: the next may find some too
                     }
                     if (!reply.ok()) {
                       answer.status = reply.status();
                     } else if (ok != HandoffEventKind::kReserved) {
                       answer.kind = ok;
                     } else if (const auto* r = proto::MessageAs<proto::ReserveReply>(**reply)) {
                       answer.kind = ok;
                       answer.reply = std::make_shared<const proto::ReserveReply>(*r);
                     } else {
                       answer.status = InternalError("decode answered Reserve with " + (*reply)->GetTypeName());
                     }
                     self->Post(entry, std::move(answer));
                   });
}

void ClusterClient::SendToNode(NodeId node_id, const google::protobuf::Message& message) {
  std::optional<NodeHandle> node = registry_.Get(node_id);
  if (!node) return;
  node->conn->Call(message, config_.node_call_timeout_ms, [](StatusOr<net::MessagePtr>) {});
}

void ClusterClient::ArmTimer(const std::shared_ptr<Entry>& entry, const HandoffAction& action) {
  if (action.wait_for_room) {
    waiting_for_room_.Wait(entry->request.request_id, entry->request.priority, entry->arrival, action.timer_seq);
    entry->waited_for_room = true;
  } else if (waiting_for_room_.Remove(entry->request.request_id)) {
    WakeForRoomSoon();  // it waits for something else: the next may go
  }
  entry->timer = std::make_unique<boost::asio::steady_timer>(loop_.context());
  entry->timer->expires_after(std::chrono::milliseconds(action.delay_ms));
  std::weak_ptr<Entry> weak = entry;
  entry->timer->async_wait([guard = guard_, weak, seq = action.timer_seq](const boost::system::error_code& ec) {
    if (ec) return;  // cancelled: the request ended or the router stopped
    std::lock_guard<std::recursive_mutex> lock(guard->mu);
    std::shared_ptr<Entry> entry = weak.lock();
    if (guard->self == nullptr || !entry) return;
    HandoffEvent fired = guard->self->MakeEvent(HandoffEventKind::kTimerFired);
    fired.timer_seq = seq;
    guard->self->Post(entry, std::move(fired));
  });
}

void ClusterClient::Forget(const std::shared_ptr<Entry>& entry) {
  entry->timer.reset();
  waiting_for_room_.Remove(entry->request.request_id);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = requests_.find(entry->request.request_id);
    if (it != requests_.end() && it->second == entry) requests_.erase(it);
  }
  forgotten_.notify_all();
  WakeForRoomSoon();
}

void ClusterClient::WakeForRoomSoon() {
  if (waiting_for_room_.size() == 0) return;  // one that queues later has its backoff timer
  // On the loop, not in the caller: a woken request that ends at once would wake the next
  // inside this call, and so on down the queue.
  boost::asio::post(loop_.context(), [guard = guard_] {
    std::lock_guard<std::recursive_mutex> lock(guard->mu);
    if (guard->self != nullptr) guard->self->WakeFirstWaitingForRoom();
  });
}

void ClusterClient::WakeFirstWaitingForRoom() {
  std::optional<RoomQueue::Wake> first = waiting_for_room_.WakeFirst();
  if (!first) return;
  std::shared_ptr<Entry> entry = Find(first->id);
  if (!entry) {
    waiting_for_room_.Remove(first->id);  // it ended meanwhile
    return;
  }
  HandoffEvent wake = MakeEvent(HandoffEventKind::kTimerFired);
  wake.timer_seq = first->timer_seq;
  Post(entry, std::move(wake));
}

std::shared_ptr<ClusterClient::Entry> ClusterClient::Find(RequestId request_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = requests_.find(request_id);
  return it == requests_.end() ? nullptr : it->second;
}

std::vector<std::shared_ptr<ClusterClient::Entry>> ClusterClient::AllEntries() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::shared_ptr<Entry>> all;
  all.reserve(requests_.size());
  for (const auto& [id, entry] : requests_) all.push_back(entry);
  return all;
}

HandoffEvent ClusterClient::MakeEvent(HandoffEventKind kind) const {
  HandoffEvent event;
  event.kind = kind;
  event.now_ns = clock_.NowNanos();
  return event;
}

}  // namespace tandem::router::cluster
