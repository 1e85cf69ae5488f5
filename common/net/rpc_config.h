// Configuration of the control-plane RPC layer (RpcServer, RpcClient).
// Plain values; Validate() before use. Thread rule: value types.
#pragma once

#include <cstdint>
#include <string>

#include "common/base/status.h"

namespace tandem::net {

// TLS for control connections (Asio SSL over OpenSSL, TLS 1.2+). The one TLS
// config type: RpcServer/RpcClient take it, and the router's and the nodes'
// configs bind it under `control_tls` (Bind, ValidateMutual).
struct TlsConfig {
  // Off by default: control traffic is plaintext, protected by the cluster token only.
  bool enabled = false;
  // PEM certificate chain. Server: required. Client: optional; presented for mutual TLS.
  std::string cert_file;
  // PEM private key of cert_file. Required whenever cert_file is set.
  std::string key_file;
  // PEM CA bundle. Client: required, verifies the server's certificate.
  // Server: when set, every client must present a certificate signed by it (mutual TLS).
  std::string ca_file;
  // Client: name or IP the server certificate must carry; empty = host of the dialed address.
  std::string server_name;

  // Server-side checks when is_server, client-side otherwise.
  Status Validate(bool is_server) const;
  // The control plane's rule, stricter than Validate: TLS is mutual, so enabled
  // needs cert_file, key_file and ca_file, and any of them set without enabled
  // is a forgotten half, not plaintext. InvalidArgument naming `prefix`.key.
  Status ValidateMutual(const std::string& prefix) const;

  // Binds enabled, cert_file, key_file and ca_file as `prefix`.<field> (a
  // config::ConfigBinder); `dials` adds server_name, for a process that dials
  // out (nodes; the router only serves).
  template <typename Binder>
  void Bind(Binder& b, const std::string& prefix, bool dials) {
    b.Field(prefix + ".enabled", enabled, "mutual TLS on control connections (needs the three files)");
    b.Field(prefix + ".cert_file", cert_file,
            "PEM certificate chain of this process, signed by the cluster CA (served, and presented when dialing)");
    b.Field(prefix + ".key_file", key_file, "PEM private key of " + prefix + ".cert_file");
    b.Field(prefix + ".ca_file", ca_file, "PEM CA bundle verifying the other side's certificate");
    if (dials) {
      b.Field(prefix + ".server_name", server_name,
              "name the dialed side's certificate must carry (empty: the dialed host)");
    }
  }
};

// Settings shared by both ends of a connection.
struct RpcConfig {
  // Shared secret every peer presents in its Hello (compared in constant time).
  // Required, at least 16 bytes; the same on router and all nodes. Never logged.
  std::string cluster_token;
  // Cap on one frame's payload, bytes. Larger frames are refused and the connection closed.
  uint32_t max_frame_bytes = 64u << 20;
  // Send a Ping when nothing was sent for this long, ms. 0 disables keepalive pings.
  int64_t keepalive_interval_ms = 1000;
  // Close the connection (Unavailable) when nothing arrived for this long, ms.
  // Must exceed keepalive_interval_ms so a live idle peer is never cut. 0 disables.
  int64_t idle_timeout_ms = 5000;
  // Server: a connection must complete TLS and Hello within this time, ms.
  int64_t hello_timeout_ms = 3000;
  // Cap on bytes queued for writing on one connection; Send/Call beyond it fail
  // with ResourceExhausted (the peer is not reading).
  uint64_t max_queued_write_bytes = 256u << 20;
  // Name sent in Hello/HelloReply, for logs ("router", "decode-0").
  std::string peer_name = "tandem";
  // TLS settings; see TlsConfig.
  TlsConfig tls;

  Status Validate(bool is_server) const;
};

struct RpcServerConfig {
  // "host:port" to listen on. Loopback by default; listening on all interfaces
  // ("0.0.0.0:port" or "[::]:port") must be configured explicitly. Port 0 picks a
  // free port (RpcServer::port() reports it).
  std::string listen_address = "127.0.0.1:0";
  // Pending connections the kernel may queue before accept.
  int backlog = 128;
  // Connections accepted at once; more are closed at accept.
  int max_connections = 1024;
  RpcConfig rpc;

  Status Validate() const;
};

struct RpcClientConfig {
  // Time to resolve, connect, finish TLS and Hello, ms.
  int64_t connect_timeout_ms = 3000;
  // Deadline used by Call() when the caller passes timeout_ms <= 0, ms.
  int64_t default_call_timeout_ms = 10000;
  RpcConfig rpc;

  Status Validate() const;
};

}  // namespace tandem::net
