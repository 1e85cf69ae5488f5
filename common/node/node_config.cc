#include "common/node/node_config.h"

namespace tandem::node {

Status NodeTlsConfig::Validate() const {
  if (!enabled) {
    if (!cert_file.empty() || !key_file.empty() || !ca_file.empty()) {
      return InvalidArgumentError(
          "control_tls: cert_file/key_file/ca_file are set but control_tls.enabled is false "
          "(set it to true, or remove the files)");
    }
    return Status::Ok();
  }
  if (cert_file.empty()) return InvalidArgumentError("control_tls.enabled needs control_tls.cert_file");
  if (key_file.empty()) return InvalidArgumentError("control_tls.cert_file is set but control_tls.key_file is empty");
  if (ca_file.empty()) {
    return InvalidArgumentError("control_tls.enabled needs control_tls.ca_file (verifies the router and peers)");
  }
  return Status::Ok();
}

net::TlsConfig NodeTlsConfig::ForServer() const {
  net::TlsConfig tls;
  tls.enabled = enabled;
  tls.cert_file = cert_file;
  tls.key_file = key_file;
  tls.ca_file = ca_file;  // set: peers must present a certificate signed by it
  return tls;
}

net::TlsConfig NodeTlsConfig::ForClient() const {
  net::TlsConfig tls = ForServer();
  tls.server_name = server_name;
  return tls;
}

void NodeConfig::Bind(config::ConfigBinder& b) {
  b.Field("role", role, "node role: prefill | decode");
  b.Field("listen_address", listen_address, "control-plane listen address host:port (port 0 = any)");
  b.Field("advertise_address", advertise_address, "control address peers dial (empty: the bound one)");
  b.Field("router_address", router_address, "router control address host:port");
  b.Field("cluster_token", cluster_token, "shared cluster secret (>= 16 bytes)");
  b.Field("node_name", node_name, "node name for logs and the router registry");
  b.Field("heartbeat_interval_ms", heartbeat_interval_ms, "heartbeat period until the router sets one (ms)");
  b.Field("reconnect_interval_ms", reconnect_interval_ms, "router reconnect period (ms)");
  b.Field("http_address", http_address, "HTTP /metrics and /health listener host:port (empty: off)");
  b.Field("transport", transport, "KV transport: ucx | cuda_ipc | nccl | local");
  b.Field("kv_staging", kv_staging, "auto: KV moves pool to pool where the transport reaches it; host: always through host arenas");
  b.Field("ucx_transports", ucx_transports, "UCX transport list (UCX_TLS syntax)");
  b.Field("transfer_blocks", transfer_blocks, "blocks of the registered landing/staging host arena");
  b.Field("late_write_grace_ms", late_write_grace_ms, "quarantine of landing blocks after a failed transfer (ms)");
  b.Field("lease_ms", lease_ms, "default reservation lease (ms)");
  b.Field("max_pending_jobs", max_pending_jobs, "prefill jobs in flight at most");
  b.Field("drain_timeout_ms", drain_timeout_ms, "SIGTERM drain deadline (ms)");
  b.Field("control_tls.enabled", control_tls.enabled, "mutual TLS on control connections");
  b.Field("control_tls.cert_file", control_tls.cert_file, "PEM certificate of this node (server and client)");
  b.Field("control_tls.key_file", control_tls.key_file, "PEM private key of control_tls.cert_file");
  b.Field("control_tls.ca_file", control_tls.ca_file, "PEM CA bundle verifying the router and peers");
  b.Field("control_tls.server_name", control_tls.server_name,
          "name the router's/peers' certificates must carry (empty: dialed host)");
  engine.Bind(b);
}

Status NodeConfig::Validate() const {
  if (role != "prefill" && role != "decode") return InvalidArgumentError("role must be prefill or decode");
  if (listen_address.empty()) return InvalidArgumentError("listen_address is required");
  if (cluster_token.size() < 16) return InvalidArgumentError("cluster_token must be at least 16 bytes");
  if (heartbeat_interval_ms < 10 || heartbeat_interval_ms > 60000) {
    return InvalidArgumentError("heartbeat_interval_ms must be in [10, 60000]");
  }
  if (reconnect_interval_ms < 10 || reconnect_interval_ms > 60000) {
    return InvalidArgumentError("reconnect_interval_ms must be in [10, 60000]");
  }
  if (transport != "ucx" && transport != "cuda_ipc" && transport != "nccl" && transport != "local") {
    return InvalidArgumentError("transport must be ucx, cuda_ipc, nccl or local");
  }
  if (kv_staging != "auto" && kv_staging != "host") return InvalidArgumentError("kv_staging must be auto or host");
  if (transfer_blocks < 1 || transfer_blocks > (1 << 20)) {
    return InvalidArgumentError("transfer_blocks must be in [1, 1048576]");
  }
  if (late_write_grace_ms < 0) return InvalidArgumentError("late_write_grace_ms must be >= 0");
  if (lease_ms < 1) return InvalidArgumentError("lease_ms must be >= 1");
  if (max_pending_jobs < 1) return InvalidArgumentError("max_pending_jobs must be >= 1");
  if (drain_timeout_ms < 0) return InvalidArgumentError("drain_timeout_ms must be >= 0");
  TANDEM_RETURN_IF_ERROR(control_tls.Validate());
  TANDEM_RETURN_IF_ERROR(engine.Validate());
  TANDEM_RETURN_IF_ERROR(ServerConfig().Validate());
  return ClientConfig().Validate();
}

net::RpcServerConfig NodeConfig::ServerConfig() const {
  net::RpcServerConfig c;
  c.listen_address = listen_address;
  c.rpc.cluster_token = cluster_token;
  c.rpc.peer_name = node_name;
  c.rpc.tls = control_tls.ForServer();
  return c;
}

net::RpcClientConfig NodeConfig::ClientConfig() const {
  net::RpcClientConfig c;
  c.rpc.cluster_token = cluster_token;
  c.rpc.peer_name = node_name;
  c.rpc.tls = control_tls.ForClient();
  return c;
}

}  // namespace tandem::node
