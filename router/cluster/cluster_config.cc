#include "router/cluster/cluster_config.h"

#include "common/net/cluster_token_file.h"

namespace tandem::router::cluster {

const char* ServingModeName(ServingMode mode) {
  return mode == ServingMode::kColocated ? "colocated" : "disaggregated";
}

void ClusterConfig::Bind(config::ConfigBinder& b) {
  b.Field("control_address", control_address, "control address nodes dial to register, host:port");
  b.Secret("cluster_token", cluster_token, "shared cluster secret (>= 16 bytes), the same on every node");
  b.Field("cluster_token_file", cluster_token_file, "file holding the cluster token, used when cluster_token is empty");
  b.Field("heartbeat_interval_ms", heartbeat_interval_ms, "heartbeat period told to nodes (ms)");
  b.Field("node_dead_after_ms", node_dead_after_ms,
          "a node silent this long is dead and its requests move (ms, >= 2 x heartbeat_interval_ms)");
  b.Choice("mode", mode, {{"disaggregated", ServingMode::kDisaggregated}, {"colocated", ServingMode::kColocated}},
           "disaggregated (prefill nodes compute prompts) | colocated (every prompt prefills on its decode node)");
  b.Field("local_prefill_max_tokens", local_prefill_max_tokens,
          "prompts of at most this many tokens prefill on their decode node (0 = never)");
  b.Field("node_call_timeout_ms", node_call_timeout_ms,
          "deadline of one Reserve / Prefill / Cancel call to a node (ms)");
  b.Field("reservation_lease_ms", reservation_lease_ms, "KV reservation lease asked of decode nodes (ms, 0 = theirs)");
  b.Field("no_room_retry_ms", no_room_retry_ms,
          "how long a request refused for lack of room is placed again before 429 (ms)");
  b.Field("prefill_with_reserve", prefill_with_reserve,
          "send a request's PrefillRequest beside its Reserve (the prompt computes while decode reserves)");
  b.Field("num_control_threads", num_control_threads, "I/O threads of the control plane");
  control_tls.Bind(b, "control_tls", /*dials=*/false);
}

Status ClusterConfig::Validate() const {
  if (control_address.empty() || control_address.find(':') == std::string::npos) {
    return InvalidArgumentError("control_address must be host:port");
  }
  if (!cluster_token.empty() && cluster_token.size() < 16) {
    return InvalidArgumentError("cluster_token must be at least 16 bytes");
  }
  if (cluster_token.empty() && cluster_token_file.empty()) {
    return InvalidArgumentError("cluster_token or cluster_token_file is required");
  }
  if (heartbeat_interval_ms < 10 || heartbeat_interval_ms > 60000) {
    return InvalidArgumentError("heartbeat_interval_ms must be in [10, 60000]");
  }
  if (node_dead_after_ms < 2 * heartbeat_interval_ms || node_dead_after_ms > 600000) {
    return InvalidArgumentError("node_dead_after_ms must be in [2 x heartbeat_interval_ms, 600000]");
  }
  if (local_prefill_max_tokens < 0) {
    return InvalidArgumentError("local_prefill_max_tokens must be >= 0");
  }
  if (node_call_timeout_ms < 1) return InvalidArgumentError("node_call_timeout_ms must be >= 1");
  if (reservation_lease_ms < 0) return InvalidArgumentError("reservation_lease_ms must be >= 0");
  if (no_room_retry_ms < 0) return InvalidArgumentError("no_room_retry_ms must be >= 0");
  if (num_control_threads < 1 || num_control_threads > 64) {
    return InvalidArgumentError("num_control_threads must be in [1, 64]");
  }
  return control_tls.ValidateMutual("control_tls");
}

StatusOr<std::string> ClusterConfig::ResolveToken() const {
  if (cluster_token.empty()) return net::ReadClusterTokenFile(cluster_token_file);
  if (cluster_token.size() < 16) return InvalidArgumentError("cluster token must be at least 16 bytes");
  return cluster_token;
}

}  // namespace tandem::router::cluster
