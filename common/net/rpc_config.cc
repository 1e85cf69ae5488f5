#include "common/net/rpc_config.h"

#include "common/net/address.h"

namespace tandem::net {

Status TlsConfig::Validate(bool is_server) const {
  if (!enabled) return Status::Ok();
  if (cert_file.empty() != key_file.empty()) {
    return InvalidArgumentError("tls: cert_file and key_file must be set together");
  }
  if (is_server && cert_file.empty()) {
    return InvalidArgumentError("tls: a server needs cert_file and key_file");
  }
  if (!is_server && ca_file.empty()) {
    return InvalidArgumentError("tls: a client needs ca_file to verify the server");
  }
  return Status::Ok();
}

Status TlsConfig::ValidateMutual(const std::string& prefix) const {
  if (!enabled) {
    if (!cert_file.empty() || !key_file.empty() || !ca_file.empty()) {
      return InvalidArgumentError(prefix + ": cert_file/key_file/ca_file are set but " + prefix +
                                  ".enabled is false (set it to true, or remove the files)");
    }
    return Status::Ok();
  }
  if (cert_file.empty()) return InvalidArgumentError(prefix + ".enabled needs " + prefix + ".cert_file");
  if (key_file.empty()) {
    return InvalidArgumentError(prefix + ".cert_file is set but " + prefix + ".key_file is empty");
  }
  if (ca_file.empty()) {
    return InvalidArgumentError(prefix + ".enabled needs " + prefix + ".ca_file (verifies the other side)");
  }
  return Status::Ok();
}

Status RpcConfig::Validate(bool is_server) const {
  if (cluster_token.size() < 16) {
    return InvalidArgumentError("cluster_token must be at least 16 bytes");
  }
  if (cluster_token.size() > 4096) return InvalidArgumentError("cluster_token is over 4096 bytes");
  if (max_frame_bytes < 1024) return InvalidArgumentError("max_frame_bytes must be >= 1024");
  if (keepalive_interval_ms < 0 || idle_timeout_ms < 0 || hello_timeout_ms <= 0) {
    return InvalidArgumentError("rpc timeouts must be >= 0 (hello_timeout_ms > 0)");
  }
  if (idle_timeout_ms > 0 && keepalive_interval_ms > 0 && idle_timeout_ms <= keepalive_interval_ms) {
    return InvalidArgumentError("idle_timeout_ms must exceed keepalive_interval_ms");
  }
  if (max_queued_write_bytes < max_frame_bytes) {
    return InvalidArgumentError("max_queued_write_bytes must be >= max_frame_bytes");
  }
  if (peer_name.size() > 256) return InvalidArgumentError("peer_name is over 256 bytes");
  return tls.Validate(is_server);
}

Status RpcServerConfig::Validate() const {
  TANDEM_RETURN_IF_ERROR(ParseHostPort(listen_address));
  if (backlog <= 0) return InvalidArgumentError("backlog must be > 0");
  if (max_connections <= 0) return InvalidArgumentError("max_connections must be > 0");
  return rpc.Validate(/*is_server=*/true);
}

Status RpcClientConfig::Validate() const {
  if (connect_timeout_ms <= 0) return InvalidArgumentError("connect_timeout_ms must be > 0");
  if (default_call_timeout_ms <= 0) {
    return InvalidArgumentError("default_call_timeout_ms must be > 0");
  }
  return rpc.Validate(/*is_server=*/false);
}

}  // namespace tandem::net
