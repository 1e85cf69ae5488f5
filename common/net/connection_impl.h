// ConnectionImpl: the Asio implementation of RpcConnection (plain TCP or TLS).
// Internal to tandem_net; RpcServer and RpcClient create it.
//
// Thread rule: all state below "strand state" is touched only on strand_;
// public entry points post onto it. See rpc_connection.h for the contract.
#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <chrono>
#include <deque>
#include <mutex>
#include <unordered_map>

#include "common/base/log_limiter.h"
#include "common/net/address.h"
#include "common/net/cluster_token.h"
#include "common/net/frame.h"
#include "common/net/rpc_config.h"
#include "common/net/rpc_connection.h"

namespace tandem::net::internal {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Strand = asio::strand<asio::io_context::executor_type>;

class ConnectionImpl final : public RpcConnection, public std::enable_shared_from_this<ConnectionImpl> {
 public:
  enum class Side { kServer, kClient };
  struct Options {
    Side side = Side::kServer;
    RpcConfig rpc;
    int64_t default_call_timeout_ms = 10000;
    std::shared_ptr<asio::ssl::context> tls;  // null: plaintext
    RpcHandlers handlers;
    // Server: rate-limits the logs of refused Hellos, shared by one server's
    // connections; null logs every refusal.
    std::shared_ptr<LogLimiter> refusal_log;
  };
  // Result of a client's connect + TLS + Hello.
  using OpenCallback = std::function<void(Status)>;

  ConnectionImpl(asio::io_context& io, Options options);

  // The TCP socket under TLS, for accept.
  tcp::socket& socket();
  // Server side, after accept: TLS handshake, then wait for Hello.
  void StartServer();
  // Client side: resolve, connect, TLS, Hello; on_open runs once on the strand.
  void StartClient(const HostPort& peer, int64_t timeout_ms, OpenCallback on_open);

  void Call(const google::protobuf::Message& request, int64_t timeout_ms, ReplyCallback on_reply) override;
  Status Send(const google::protobuf::Message& message) override;
  void Close(const Status& reason) override;
  bool is_open() const override { return open_.load(); }
  std::string remote_address() const override;
  std::string peer_name() const override;
  bool OnIoThread() const override { return io_.get_executor().running_in_this_thread(); }

  // Queues a reply frame (Responder). Closes the connection if it cannot queue.
  void SendReply(uint64_t correlation_id, const google::protobuf::Message& reply);

 private:
  using Clock = std::chrono::steady_clock;
  struct PendingCall {
    ReplyCallback on_reply;
    std::unique_ptr<asio::steady_timer> timer;
  };

  StatusOr<std::string> Encode(FrameKind kind, uint64_t correlation_id, const google::protobuf::Message& message);
  Status Enqueue(std::string frame);
  void PushWrite(std::string frame);  // strand
  void StartWrite();                  // strand
  void StartRead();                   // strand
  void OnRead(const boost::system::error_code& ec, size_t bytes);
  void Dispatch(Frame frame);
  void HandleHello(const Frame& frame);
  void HandleReply(const Frame& frame);
  void HandleRequest(const Frame& frame);
  void HandleOneWay(const Frame& frame);
  void SendHello();
  void MarkOpen();
  void Reject(uint64_t correlation_id, const Status& status);
  // Server: logs why a peer that has not passed Hello is refused (rate-limited per
  // peer host and reason), then rejects it with `status`.
  void RefuseHello(uint64_t correlation_id, const Status& status);
  void CloseAfterFlush(const Status& reason);
  void ArmKeepalive();
  void OnKeepalive();
  void AfterConnect(const HostPort& peer);
  void DoClose(const Status& reason);  // strand

  asio::io_context& io_;
  Strand strand_;
  Options options_;
  ClusterToken expected_token_;
  std::unique_ptr<tcp::socket> plain_;
  std::unique_ptr<asio::ssl::stream<tcp::socket>> tls_;
  std::atomic<bool> open_{true};
  std::atomic<uint64_t> next_correlation_id_{1};
  std::atomic<uint64_t> queued_bytes_{0};
  mutable std::mutex info_mu_;
  std::string remote_address_;  // guarded by info_mu_
  std::string peer_name_;       // guarded by info_mu_

  // Strand state.
  std::string remote_host_;  // server: the peer's IP
  tcp::resolver resolver_;
  FrameDecoder decoder_;
  std::array<char, 64 * 1024> read_buffer_{};
  std::deque<std::string> write_queue_;
  bool writing_ = false;
  bool closed_ = false;
  bool authenticated_ = false;
  bool reading_stopped_ = false;
  bool close_after_flush_ = false;
  Status close_reason_;
  std::unordered_map<uint64_t, PendingCall> pending_;
  asio::steady_timer keepalive_timer_;
  asio::steady_timer open_timer_;  // Hello / connect deadline, then flush-before-close guard
  Clock::time_point last_received_;
  Clock::time_point last_sent_;
  OpenCallback on_open_;
};

}  // namespace tandem::net::internal

namespace tandem::net {

// Shared by every copy of one Responder.
struct Responder::State {
  std::weak_ptr<internal::ConnectionImpl> connection;
  uint64_t correlation_id = 0;
  std::atomic<bool> answered{false};
  ~State();  // answers Internal when nobody did
};

}  // namespace tandem::net
