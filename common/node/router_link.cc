#include "common/node/router_link.h"

#include <chrono>
#include <future>

#include "common/base/logging.h"
#include "common/proto/messages.h"

namespace tandem::node {

namespace {
// A refusal that lasts is logged again at most this often.
constexpr auto kRefusalLogInterval = std::chrono::seconds(10);
}  // namespace

RouterLink::RouterLink(net::EventLoop& loop, RouterLinkOptions options) : loop_(loop), options_(std::move(options)) {
  interval_ms_.store(options_.heartbeat_interval_ms);
}

RouterLink::~RouterLink() { Stop(); }

Status RouterLink::Start() {
  if (options_.router_address.empty()) return InvalidArgumentError("router_address is empty");
  guard_->link = this;
  net::RpcHandlers handlers;
  handlers.on_request = [guard = guard_](const std::shared_ptr<net::RpcConnection>& conn, net::MessagePtr message,
                                         net::Responder responder) {
    std::lock_guard<std::mutex> lock(guard->mu);
    if (guard->link == nullptr) return responder.Fail(UnavailableError("node is stopping"));
    if (const auto* drain = proto::MessageAs<proto::Drain>(*message)) return guard->link->OnDrain(*drain, responder);
    if (!guard->link->options_.on_request) return responder.Fail(UnavailableError("node is stopping"));
    guard->link->options_.on_request(conn, std::move(message), std::move(responder));
  };
  handlers.on_close = [guard = guard_](const std::shared_ptr<net::RpcConnection>& conn, const Status&) {
    std::lock_guard<std::mutex> lock(guard->mu);
    if (guard->link) guard->link->OnClosed(conn);
  };
  TANDEM_ASSIGN_OR_RETURN(client_, net::RpcClient::Create(loop_, options_.client, std::move(handlers)));
  thread_ = std::thread([this] { Run(); });
  return Status::Ok();
}

void RouterLink::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  {
    std::lock_guard<std::mutex> lock(guard_->mu);
    guard_->link = nullptr;
  }
  if (client_) client_->CloseAll();
  registered_.store(false);
}

Status RouterLink::Send(const google::protobuf::Message& message) {
  std::shared_ptr<net::RpcConnection> conn;
  {
    std::lock_guard<std::mutex> lock(mu_);
    conn = conn_;
  }
  if (!conn || !registered_.load()) return UnavailableError("not registered with the router");
  return conn->Send(message);
}

void RouterLink::OnClosed(const std::shared_ptr<net::RpcConnection>& conn) {
  bool was_registered = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (conn_ != conn) return;
    conn_.reset();
    was_registered = registered_.exchange(false);
  }
  cv_.notify_all();
  if (was_registered) {
    TANDEM_LOG_WARN("router connection lost; cancelling router requests and reconnecting");
    if (options_.on_lost) options_.on_lost();
  }
}

void RouterLink::OnDrain(const proto::Drain& drain, const net::Responder& responder) {
  if (!options_.on_drain) return responder.Fail(UnimplementedError("this node cannot be drained by the router"));
  options_.on_drain(drain.reason().substr(0, 256));
  draining_.store(true);
  responder.Reply(proto::Ack());
}

std::string RouterLink::last_refusal() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_refusal_;
}

void RouterLink::NoteRefusal(const Status& status) {
  const std::string reason = status.ToString();
  {
    std::lock_guard<std::mutex> lock(mu_);
    last_refusal_ = reason;
  }
  const auto now = std::chrono::steady_clock::now();
  if (reason == logged_refusal_ && now - logged_at_ < kRefusalLogInterval) {
    ++refusals_since_log_;
    return;
  }
  TANDEM_LOG_WARN("cannot register with router {}: {}{}", options_.router_address, reason,
                  refusals_since_log_ > 0 ? " (" + std::to_string(refusals_since_log_) + " more attempts failed since)"
                                          : std::string());
  logged_refusal_ = reason;
  logged_at_ = now;
  refusals_since_log_ = 0;
}

bool RouterLink::TryRegister() {
  StatusOr<std::shared_ptr<net::RpcConnection>> connected = client_->Connect(options_.router_address);
  if (!connected.ok()) {
    // The router's refusal of the Hello (wrong cluster token, version skew) arrives as this status.
    NoteRefusal(connected.status());
    return false;
  }
  std::shared_ptr<net::RpcConnection> conn = *connected;
  proto::RegisterRequest request = options_.make_register ? options_.make_register() : proto::RegisterRequest();
  // The reply is taken on the connection's strand, before anything the router sends after
  // it: a request that follows the reply at once already finds the link registered, so
  // the Tokens it produces are not refused by Send (a waiting link thread may be late).
  auto registered = std::make_shared<std::promise<Status>>();
  std::future<Status> result = registered->get_future();
  conn->Call(request, 5000, [this, conn, registered](StatusOr<net::MessagePtr> reply) {
    const proto::RegisterReply* r = reply.ok() ? proto::MessageAs<proto::RegisterReply>(**reply) : nullptr;
    if (r == nullptr) {
      registered->set_value(reply.ok()
                                ? InternalError("router answered RegisterRequest with " + (*reply)->GetTypeName())
                                : reply.status());
      return;
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (!conn->is_open() || stop_) {
      registered->set_value(UnavailableError("connection closed while registering"));
      return;
    }
    conn_ = conn;
    node_id_.store(r->node_id());
    if (r->heartbeat_interval_ms() > 0) {
      interval_ms_.store(static_cast<int>(std::min<uint32_t>(r->heartbeat_interval_ms(), 60000)));
    }
    registered_.store(true);
    last_refusal_.clear();
    registered->set_value(Status::Ok());
  });
  // Call answers exactly once (reply, error or its deadline), so this returns.
  Status status = result.get();
  if (!status.ok()) {
    conn->Close(UnavailableError("register failed"));
    NoteRefusal(status.WithContext("registration refused"));
    return false;
  }
  logged_refusal_.clear();
  refusals_since_log_ = 0;
  TANDEM_LOG_INFO("registered with router {} as node {}", options_.router_address, node_id_.load());
  return true;
}

void RouterLink::Run() {
  uint64_t sequence = 0;
  int since_register = 0;  // heartbeats since the last registration
  while (true) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
    }
    int wait_ms = options_.reconnect_interval_ms;
    if (!registered_.load()) {
      if (TryRegister()) {
        wait_ms = 0;
        since_register = 0;
      }
    } else {
      proto::Heartbeat hb;
      hb.set_node_id(node_id_.load());
      hb.set_sequence(++sequence);
      if (options_.load) *hb.mutable_load() = options_.load();
      const int every = options_.full_cache_report_every;
      const bool full = since_register == 0 || (every > 0 && since_register % every == 0);
      ++since_register;
      if (options_.cache) {
        if (std::optional<proto::CacheReport> cache = options_.cache(full)) *hb.mutable_cache() = std::move(*cache);
      }
      hb.set_draining(draining_.load());
      Send(hb).IgnoreError();
      wait_ms = interval_ms_.load();
    }
    std::unique_lock<std::mutex> lock(mu_);
    // Wake early on stop, or when the connection drops (to reconnect at once after the interval).
    cv_.wait_for(lock, std::chrono::milliseconds(wait_ms), [this] { return stop_; });
  }
}

}  // namespace tandem::node
