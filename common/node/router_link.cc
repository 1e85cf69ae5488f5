#include "common/node/router_link.h"

#include <chrono>
#include <future>

#include "common/base/logging.h"
#include "common/proto/messages.h"

namespace tandem::node {

RouterLink::RouterLink(net::EventLoop& loop, RouterLinkOptions options)
    : loop_(loop), options_(std::move(options)) {
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
    if (guard->link && guard->link->options_.on_request) {
      guard->link->options_.on_request(conn, std::move(message), std::move(responder));
    } else {
      responder.Fail(UnavailableError("node is stopping"));
    }
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

bool RouterLink::TryRegister() {
  StatusOr<std::shared_ptr<net::RpcConnection>> connected = client_->Connect(options_.router_address);
  if (!connected.ok()) return false;
  std::shared_ptr<net::RpcConnection> conn = *connected;
  proto::RegisterRequest request = options_.make_register ? options_.make_register() : proto::RegisterRequest();
  // The reply is taken on the connection's strand, before anything the router sends after
  // it: a request that follows the reply at once already finds the link registered, so
  // the Tokens it produces are not refused by Send (a waiting link thread may be late).
  auto registered = std::make_shared<std::promise<bool>>();
  std::future<bool> result = registered->get_future();
  conn->Call(request, 5000, [this, conn, registered](StatusOr<net::MessagePtr> reply) {
    const proto::RegisterReply* r = reply.ok() ? proto::MessageAs<proto::RegisterReply>(**reply) : nullptr;
    if (r == nullptr) {
      const std::string why =
          reply.ok() ? "unexpected reply " + (*reply)->GetTypeName() : reply.status().ToString().substr(0, 1024);
      int64_t suppressed = 0;
      if (register_failures_.Allow(why, &suppressed)) {
        TANDEM_LOG_WARN("register with router {} failed: {}{}", options_.router_address, why,
                        SuppressedNote(suppressed));
      }
      registered->set_value(false);
      return;
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (!conn->is_open() || stop_) {
      registered->set_value(false);
      return;
    }
    conn_ = conn;
    node_id_.store(r->node_id());
    if (r->heartbeat_interval_ms() > 0) {
      interval_ms_.store(static_cast<int>(std::min<uint32_t>(r->heartbeat_interval_ms(), 60000)));
    }
    registered_.store(true);
    registered->set_value(true);
  });
  // Call answers exactly once (reply, error or its deadline), so this returns.
  if (!result.get()) {
    conn->Close(UnavailableError("register failed"));
    return false;
  }
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
