#include "common/net/rpc_client.h"

#include <future>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "common/net/connection_impl.h"
#include "common/net/tls_context.h"

namespace tandem::net {

using internal::ConnectionImpl;

struct RpcClient::Impl : std::enable_shared_from_this<RpcClient::Impl> {
  struct Entry {
    std::shared_ptr<ConnectionImpl> connection;
    bool ready = false;                    // Hello done
    std::vector<ConnectCallback> waiters;  // callers waiting for the dial
  };

  EventLoop* loop = nullptr;
  RpcClientConfig config;
  RpcHandlers handlers;
  std::shared_ptr<boost::asio::ssl::context> tls;
  std::mutex mu;
  std::unordered_map<std::string, Entry> entries;  // guarded by mu; key: address as given

  void Finish(const std::string& address, const std::shared_ptr<ConnectionImpl>& conn, Status status);
};

void RpcClient::Impl::Finish(const std::string& address, const std::shared_ptr<ConnectionImpl>& conn, Status status) {
  std::vector<ConnectCallback> waiters;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = entries.find(address);
    if (it == entries.end() || it->second.connection != conn) return;
    waiters.swap(it->second.waiters);
    if (status.ok()) {
      it->second.ready = true;
    } else {
      entries.erase(it);
    }
  }
  for (auto& waiter : waiters) {
    if (status.ok()) {
      waiter(std::shared_ptr<RpcConnection>(conn));
    } else {
      waiter(status);
    }
  }
}

StatusOr<std::unique_ptr<RpcClient>> RpcClient::Create(EventLoop& loop, RpcClientConfig config, RpcHandlers handlers) {
  TANDEM_RETURN_IF_ERROR(config.Validate());
  auto impl = std::make_shared<Impl>();
  impl->loop = &loop;
  impl->config = std::move(config);
  impl->handlers = std::move(handlers);
  if (impl->config.rpc.tls.enabled) {
    TANDEM_ASSIGN_OR_RETURN(impl->tls, internal::MakeClientTlsContext(impl->config.rpc.tls));
  }
  return std::unique_ptr<RpcClient>(new RpcClient(impl));
}

RpcClient::~RpcClient() { CloseAll(); }

void RpcClient::AsyncConnect(const std::string& address, ConnectCallback on_done) {
  auto peer = ParseHostPort(address);
  if (!peer.ok()) {
    on_done(peer.status());
    return;
  }
  std::shared_ptr<ConnectionImpl> conn;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    auto it = impl_->entries.find(address);
    if (it != impl_->entries.end() && !it->second.connection->is_open()) {
      impl_->entries.erase(it);
      it = impl_->entries.end();
    }
    if (it != impl_->entries.end()) {
      if (!it->second.ready) {
        it->second.waiters.push_back(std::move(on_done));
        return;
      }
      conn = it->second.connection;
    } else {
      ConnectionImpl::Options options;
      options.side = ConnectionImpl::Side::kClient;
      options.rpc = impl_->config.rpc;
      options.default_call_timeout_ms = impl_->config.default_call_timeout_ms;
      options.tls = impl_->tls;
      options.handlers = impl_->handlers;
      auto fresh = std::make_shared<ConnectionImpl>(impl_->loop->context(), std::move(options));
      Impl::Entry entry;
      entry.connection = fresh;
      entry.waiters.push_back(std::move(on_done));
      impl_->entries.emplace(address, std::move(entry));
      std::weak_ptr<Impl> weak = impl_;
      fresh->StartClient(*peer, impl_->config.connect_timeout_ms, [weak, address, fresh](Status status) {
        if (auto impl = weak.lock()) impl->Finish(address, fresh, status);
      });
      return;
    }
  }
  on_done(std::shared_ptr<RpcConnection>(conn));
}

StatusOr<std::shared_ptr<RpcConnection>> RpcClient::Connect(const std::string& address) {
  TANDEM_CHECK(!impl_->loop->InLoopThread()) << "RpcClient::Connect would block an I/O thread";
  auto promise = std::make_shared<std::promise<StatusOr<std::shared_ptr<RpcConnection>>>>();
  auto future = promise->get_future();
  AsyncConnect(address,
               [promise](StatusOr<std::shared_ptr<RpcConnection>> result) { promise->set_value(std::move(result)); });
  return future.get();
}

void RpcClient::CloseAll() {
  std::unordered_map<std::string, Impl::Entry> entries;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    entries.swap(impl_->entries);
  }
  for (auto& [address, entry] : entries) {
    entry.connection->Close(CancelledError("client closed"));
    for (auto& waiter : entry.waiters) waiter(CancelledError("client closed"));
  }
}

}  // namespace tandem::net
