#include "common/node/node_config.h"

#include "common/net/cluster_token_file.h"

namespace tandem::node {

void NodeConfig::Bind(config::ConfigBinder& b) {
  b.Field("role", role, "node role: prefill (tandem-prefill) | decode or colocated (tandem-decode; colocated prefills every request itself)");
  b.Field("listen_address", listen_address, "control-plane listen address host:port (port 0 = any)");
  b.Field("advertise_address", advertise_address, "control address peers dial (empty: the bound one)");
  b.Field("router_address", router_address, "router control address host:port");
  b.Secret("cluster_token", cluster_token, "shared cluster secret (>= 16 bytes)");
  b.Field("cluster_token_file", cluster_token_file, "file holding the cluster token, used when cluster_token is empty");
  b.Field("node_name", node_name, "node name for logs and the router registry");
  b.Field("heartbeat_interval_ms", heartbeat_interval_ms, "heartbeat period until the router sets one (ms)");
  b.Field("reconnect_interval_ms", reconnect_interval_ms, "router reconnect period (ms)");
  b.Field("http_address", http_address, "HTTP /metrics and /health listener host:port (empty: off)");
  b.Field("transport", transport, "KV transport: ucx | cuda_ipc | nccl | local");
  b.Field("kv_staging", kv_staging,
          "auto: KV moves pool to pool where the transport reaches it; host: always through host arenas");
  b.Field("ucx_transports", ucx_transports, "UCX transport list (UCX_TLS syntax)");
  b.Field("transfer_blocks", transfer_blocks, "blocks of the registered landing/staging host arena");
  b.Field("late_write_grace_ms", late_write_grace_ms, "quarantine of landing blocks after a failed transfer (ms)");
  b.Field("lease_ms", lease_ms, "default reservation lease (ms)");
  b.Field("max_pending_jobs", max_pending_jobs, "prefill jobs in flight at most");
  b.Field("drain_timeout_ms", drain_timeout_ms, "SIGTERM drain deadline (ms)");
  control_tls.Bind(b, "control_tls", /*dials=*/true);
  engine.Bind(b);
}

Status NodeConfig::Validate() const {
  if (!role.empty() && role != "prefill" && role != "decode" && role != "colocated") {
    return InvalidArgumentError("role must be prefill, decode or colocated, not " + role);
  }
  if (listen_address.empty()) return InvalidArgumentError("listen_address is required");
  if (cluster_token.size() < 16) {
    return InvalidArgumentError("cluster_token must be at least 16 bytes (or set cluster_token_file)");
  }
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
  TANDEM_RETURN_IF_ERROR(control_tls.ValidateMutual("control_tls"));
  TANDEM_RETURN_IF_ERROR(engine.Validate());
  TANDEM_RETURN_IF_ERROR(ServerConfig().Validate());
  return ClientConfig().Validate();
}

Status NodeConfig::ResolveClusterToken() {
  if (!cluster_token.empty()) return Status::Ok();
  if (cluster_token_file.empty()) return InvalidArgumentError("cluster_token or cluster_token_file is required");
  TANDEM_ASSIGN_OR_RETURN(cluster_token, net::ReadClusterTokenFile(cluster_token_file));
  return Status::Ok();
}

net::RpcServerConfig NodeConfig::ServerConfig() const {
  net::RpcServerConfig c;
  c.listen_address = listen_address;
  c.rpc.cluster_token = cluster_token;
  c.rpc.peer_name = node_name;
  c.rpc.tls = control_tls;  // server_name is a client setting; servers ignore it
  return c;
}

net::RpcClientConfig NodeConfig::ClientConfig() const {
  net::RpcClientConfig c;
  c.rpc.cluster_token = cluster_token;
  c.rpc.peer_name = node_name;
  c.rpc.tls = control_tls;
  return c;
}

}  // namespace tandem::node
